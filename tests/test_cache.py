"""The build directory stays bounded (simulator builds within a size budget, least recently
used removed first, never one in use; a fixed number of job folders), ``tpugen clean`` empties
it; and the heartbeat that long work prints."""

import fcntl
import io
import os
import threading
import time

import pytest

from tpugen import cli
from tpugen.sim import cache
from tpugen.sim.heartbeat import Heartbeat

MB = 2**20


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.BUILD_DIR_ENV, str(tmp_path / "b"))
    return tmp_path / "b"


def _entry(root, sim, name, mb, used):
    """A fake simulator build of ``mb`` megabytes last used at ``used`` (epoch seconds)."""
    e = root / "cocotb" / sim / name
    (e / "obj").mkdir(parents=True)
    (e / "obj" / "model").write_bytes(bytes(mb * MB))
    (e / ".used").touch()
    os.utime(e / ".used", (used, used))
    return e


def test_builds_beyond_the_budget_go_least_recently_used_first(root, monkeypatch):
    monkeypatch.setenv(cache.CACHE_MB_ENV, "3")
    now = time.time()
    old = [_entry(root, "verilator" if k % 2 else "icarus", f"e{k}", 1, now - 100 + k)
           for k in range(4)]
    new = cache.use_entry(root / "cocotb" / "verilator" / "new")
    (new / "model").write_bytes(bytes(MB))
    cache.prune()
    left = sorted(p.name for p in (root / "cocotb").glob("*/*"))
    assert left == ["e2", "e3", "new"], left          # 3 MB: the two most recent and the new
    assert not old[0].exists() and not old[1].exists()


def test_a_build_in_use_or_being_built_is_never_removed(root, monkeypatch):
    monkeypatch.setenv(cache.CACHE_MB_ENV, "0")
    now = time.time()
    running = _entry(root, "verilator", "running", 1, now - 1000)
    building = _entry(root, "icarus", "building", 1, now - 900)
    idle = _entry(root, "icarus", "idle", 1, now - 10)
    held = threading.Event()
    release = threading.Event()

    def simulate():
        with cache.in_use(running):
            held.set()
            release.wait(10)

    t = threading.Thread(target=simulate)
    t.start()
    assert held.wait(10)
    with open(building / ".lock", "w") as lock:       # what sim.runner.build holds
        fcntl.flock(lock, fcntl.LOCK_EX)
        removed = cache.prune()
    release.set()
    t.join()
    assert removed == [idle] and running.exists() and building.exists()
    assert set(cache.prune()) == {running, building}


def test_job_folders_keep_the_newest(root, monkeypatch):
    monkeypatch.setenv(cache.JOBS_KEPT_ENV, "3")
    made = []
    for k in range(5):
        made.append(cache.new_job_dir())
        os.utime(made[-1], (time.time() - 100 + k, time.time() - 100 + k))
    left = sorted((root / "jobs").iterdir())
    assert left == sorted(made[-3:])


def test_bad_budget_is_named(root, monkeypatch):
    monkeypatch.setenv(cache.CACHE_MB_ENV, "lots")
    with pytest.raises(ValueError, match="TPUGEN_CACHE_MB"):
        cache.prune()


def test_clean(root, tmp_path, monkeypatch, capsys):
    """With $TPUGEN_BUILD_DIR: its areas go, anything else stays; the default ./build goes
    whole."""
    _entry(root, "icarus", "x", 1, time.time())
    (root / "jobs" / "j").mkdir(parents=True)
    (root / "fpga").mkdir()
    (root / "mine.txt").write_text("keep")
    assert cli.main(["clean"]) == 0
    assert "freed 1.0 MB" in capsys.readouterr().out
    assert sorted(p.name for p in root.iterdir()) == ["mine.txt"]
    monkeypatch.delenv(cache.BUILD_DIR_ENV)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "build" / "cli_x").mkdir(parents=True)
    (tmp_path / "build" / "w.vcd").write_text("")
    assert cli.main(["clean"]) == 0
    assert list((tmp_path / "build").iterdir()) == []


def test_heartbeat_ticks_while_work_runs():
    out = io.StringIO()
    with Heartbeat("building", detail="first time", every=0.05, file=out) as hb:
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines[0] == "building (first time) ..."
    assert hb.ticks >= 3 and lines[1].startswith("  ... building: ")
    assert lines[-1].startswith("building: done in ")
    quiet = io.StringIO()
    with Heartbeat("fast", every=5, announce=False, file=quiet):
        pass
    assert quiet.getvalue() == ""
    with pytest.raises(ValueError, match="every"):
        Heartbeat("x", every=0)
