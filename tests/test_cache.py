"""The build directory stays bounded (one size budget for simulator builds, harness builds and
job folders, least recently used removed first, never one in use; a fixed number of job
folders, dead jobs' folders removed), ``tpugen clean`` removes what tpugen made and nothing
else; bad settings are named; and the heartbeat that long work prints."""

import fcntl
import io
import os
import shutil
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


def _entry(root, area, name, mb, used):
    """A fake cached build (``area``: ``"cocotb/<sim>"`` or ``"verilator"``) of ``mb`` megabytes
    last used at ``used`` (epoch seconds), made as tpugen makes them."""
    e = cache.entry_dir(root.joinpath(*area.split("/"), name))
    (e / ".used").touch()
    (e / "obj").mkdir()
    (e / "obj" / "model").write_bytes(bytes(mb * MB - 4096))    # room for the markers
    os.utime(e / ".used", (used, used))
    return e


def test_builds_beyond_the_budget_go_least_recently_used_first(root, monkeypatch):
    monkeypatch.setenv(cache.CACHE_MB_ENV, "3")
    now = time.time()
    old = [_entry(root, "cocotb/verilator" if k % 2 else "verilator", f"e{k}", 1, now - 100 + k)
           for k in range(4)]
    new = cache.use_entry(root / "cocotb" / "icarus" / "new")
    (new / "model").write_bytes(bytes(MB - 4096))
    cache.prune()
    left = sorted(p.name for p in (*root.glob("cocotb/*/*"), *root.glob("verilator/*"))
                  if p.is_dir())
    assert left == ["e2", "e3", "new"], left          # 3 MB: the two most recent and the new
    assert not old[0].exists() and not old[1].exists()


def test_the_cache_stays_within_its_budget_over_many_configs(root, monkeypatch):
    """Harness builds, simulator builds and job folders share one budget: after 12 configs
    (each a harness build, a cocotb build and a job of 1 MB), at most 5 MB are left, the
    newest of each kind among them, and the shared Verilator runtime stays."""
    monkeypatch.setenv(cache.CACHE_MB_ENV, "5")
    runtime = cache.entry_dir(root / "verilator" / "runtime-0123")
    (runtime / "verilated.o").write_bytes(bytes(MB))
    for k in range(12):
        for area in ("verilator", "cocotb/icarus"):
            e = cache.use_entry(root.joinpath(*area.split("/"), f"cfg{k}"))
            (e / "model").write_bytes(bytes(MB))
        with cache.job_dir() as job:
            (job / "results").write_bytes(bytes(MB))
    entries = [e for a, d in cache.CACHED_AREAS for e in root.glob(a + "/*" * d)]
    total = sum(f.stat().st_size for e in entries for f in e.rglob("*") if f.is_file())
    assert total <= 5 * MB + 64 * 1024, total
    assert runtime.exists() and (root / "verilator" / "cfg11").exists()
    assert (root / "cocotb" / "icarus" / "cfg11").exists()
    assert not (root / "verilator" / "cfg0").exists()


def test_a_build_in_use_or_being_built_is_never_removed(root, monkeypatch):
    monkeypatch.setenv(cache.CACHE_MB_ENV, "0")
    now = time.time()
    running = _entry(root, "cocotb/verilator", "running", 1, now - 1000)
    building = _entry(root, "verilator", "building", 1, now - 900)
    idle = _entry(root, "cocotb/icarus", "idle", 1, now - 10)
    held = threading.Event()
    release = threading.Event()

    def simulate():
        with cache.in_use(running):
            held.set()
            release.wait(10)

    t = threading.Thread(target=simulate)
    t.start()
    assert held.wait(10)
    with open(building / ".lock", "w") as lock:       # what a build holds
        fcntl.flock(lock, fcntl.LOCK_EX)
        removed = cache.prune()
    release.set()
    t.join()
    assert removed == [idle] and running.exists() and building.exists()
    assert set(cache.prune()) == {running, building}


def test_job_folders_keep_the_newest_and_drop_dead_ones(root, monkeypatch):
    monkeypatch.setenv(cache.JOBS_KEPT_ENV, "3")
    made = []
    for k in range(5):
        with cache.job_dir() as job:
            made.append(job)
        os.utime(made[-1] / ".used", (time.time() - 100 + k, time.time() - 100 + k))
    with pytest.raises(KeyboardInterrupt), cache.job_dir() as job:    # interrupted: not done
        interrupted = job
        raise KeyboardInterrupt
    assert interrupted.exists()
    with cache.job_dir() as job:                      # the next start removes it
        assert not interrupted.exists()
        running = job
        with cache.job_dir() as other:                # ... but never a job that is running
            assert running.exists()
    left = sorted(p for p in (root / "jobs").iterdir() if p.is_dir())
    assert left == sorted([*made[-2:], running, other])


@pytest.mark.parametrize("variable, value", [
    (cache.CACHE_MB_ENV, "lots"), (cache.JOBS_KEPT_ENV, "-1"), (cache.BUILD_DIR_ENV, " ")])
def test_bad_settings_are_named(root, monkeypatch, capsys, variable, value):
    """A bad setting: ``BuildDirError`` naming the variable; the command line says it in one
    line, exit status 2, before it runs anything."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(cache.BuildDirError, match=f"\\${variable}"):
        cache.check_settings()
    assert cli.main(["clean"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"${variable}" in err


def test_a_build_dir_that_is_a_file_or_read_only_is_named(tmp_path, monkeypatch, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    monkeypatch.setenv(cache.BUILD_DIR_ENV, str(f))
    assert cli.main(["verilog", "--rows", "2", "--cols", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err and str(f) in err
    # A place nobody may write, root included (CI runs as root: permissions would not stop it).
    monkeypatch.setenv(cache.BUILD_DIR_ENV, "/proc/tpugen-build")
    assert cli.main(["verilog", "--rows", "2", "--cols", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/proc/tpugen-build: cannot write there" in err


def _tpugen_made(root):
    """What tpugen makes in a build directory: builds of both kinds, a job, FPGA output."""
    _entry(root, "cocotb/icarus", "x", 1, time.time())
    _entry(root, "verilator", "r4c4", 1, time.time())
    with cache.job_dir():
        pass
    (cache.entry_dir(root / "fpga" / "icebreaker_r4c4") / "top.bin").write_bytes(b"x")


def test_clean_removes_only_what_tpugen_made(root, capsys):
    """With $TPUGEN_BUILD_DIR: tpugen's folders go (harness builds too); a user's file, a
    user's ``fpga/top.v`` in tpugen's area and a user's ``jobs`` lookalike elsewhere stay."""
    _tpugen_made(root)
    (root / "mine.txt").write_text("keep")
    (root / "fpga" / "top.v").write_text("module top; endmodule")
    (root / "verilog").mkdir()                      # a user's folder with tpugen's area name
    (root / "verilog" / "x.v").write_text("keep")
    assert cli.main(["clean"]) == 0
    out = capsys.readouterr().out
    assert "freed 2.0 MB" in out and f"left {root / 'mine.txt'}" in out
    assert sorted(p.name for p in root.iterdir()) == [cache.AREA_MARKER, "fpga", "mine.txt",
                                                        "verilog"]
    assert sorted(p.name for p in (root / "fpga").iterdir()) == [cache.AREA_MARKER, "top.v"]
    assert (root / "verilog" / "x.v").read_text() == "keep"


def test_clean_leaves_a_foreign_build_folder(tmp_path, monkeypatch, capsys):
    """Without $TPUGEN_BUILD_DIR: ``./build`` of another tool (CMake, setuptools' build/lib)
    is left whole and named; beside tpugen's own folders only those go."""
    monkeypatch.delenv(cache.BUILD_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "build" / "lib").mkdir(parents=True)
    (tmp_path / "build" / "CMakeCache.txt").write_text("cmake")
    assert cli.main(["clean"]) == 0
    assert "freed 0.0 MB" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == ["CMakeCache.txt", "lib"]
    _tpugen_made(tmp_path / "build")
    assert cli.main(["verilog", "--rows", "2", "--cols", "3"]) == 0
    assert (tmp_path / "build" / "verilog" / cache.MARKER).is_file()
    assert cli.main(["clean"]) == 0
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == [
        cache.AREA_MARKER, "CMakeCache.txt", "lib"]
    shutil.rmtree(tmp_path / "build" / "lib")
    (tmp_path / "build" / "CMakeCache.txt").unlink()
    assert cli.main(["clean"]) == 0
    assert not (tmp_path / "build").exists()        # nothing left: the build folder goes too


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
