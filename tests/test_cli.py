"""The tpugen command line: outputs, configs, the user's operands and programs, reports, and
one-line errors (exit 2, checked before any tool runs) for every user mistake; bugs keep their
traceback; Ctrl-C exits 130; the demo FAILs on a fault."""

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from helpers import interruptible

from tpugen import cli
from tpugen.backends import board as board_backend
from tpugen.cli import verilog as verilog_command
from tpugen.compiler import compile_gemm
from tpugen.fpga.host.board_link import BoardRunResult
from tpugen.fpga.host.serial_link import FrameParser, encode_frame
from tpugen.fpga.protocol import PROTOCOL_VERSION, ErrorCode, FrameType
from tpugen.hdl.config import Config
from tpugen.sim.cache import build_root
from tpugen.sim.machine import Machine
from tpugen.sim.requant import QuantParams, requantize
from tpugen.sim.simulators import verilator_env, verilator_root


def tpugen(*args, timeout=600, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "tpugen.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)


def run_main(capsys, *args):
    """``tpugen ARGS`` in this process: (status, stdout, stderr)."""
    status = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line_error(status, err, *words):
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tpugen: error:"), err
    for w in words:
        assert w in lines[0], (w, lines[0])


# --- outputs ----------------------------------------------------------------------------------
def test_verilog_writes_files_that_both_simulators_accept():
    out = build_root() / "cli_x"
    shutil.rmtree(out, ignore_errors=True)
    r = tpugen("verilog", "--rows", "3", "--cols", "5", "-o", str(out))
    assert r.returncode == 0, r.stderr
    v = out / "tpugen_array.v"
    assert json.loads((out / "config.json").read_text())["cols"] == 5
    assert "act__payload" in (out / "ports.md").read_text()
    text = v.read_text()
    assert "fault" not in text, "the debug option must leave no trace in normal Verilog"
    iv = subprocess.run(["iverilog", "-g2005", "-o", str(out / "a.vvp"), str(v)],
                        capture_output=True, text=True)
    assert iv.returncode == 0, iv.stderr
    vl = subprocess.run([str(verilator_root() / "bin" / "verilator"), "--lint-only",
                         "-Wno-fatal", "--top-module", "tpugen_array", str(v)],
                        capture_output=True, text=True, env=verilator_env())
    assert vl.returncode == 0, vl.stderr


def test_verilog_core_top(capsys, tmp_path):
    status, out, err = run_main(capsys, "verilog", "--rows", 2, "--cols", 3, "--top", "core",
                                "-o", tmp_path)
    assert status == 0, err
    assert "module tpugen_core" in (tmp_path / "tpugen_core.v").read_text()


def test_verilog_config_saved_as_given(capsys, tmp_path):
    """``config.json`` keeps ``act_lanes`` 0 (= C): editing ``cols`` later keeps its meaning;
    ``--config`` gives every field and the typed options override only themselves."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"rows": 3, "cols": 5, "acc_width": 40, "ub_rows": 64}))
    status, _, err = run_main(capsys, "verilog", "--config", cfg, "--cols", 6, "-o", tmp_path)
    assert status == 0, err
    saved = json.loads((tmp_path / "config.json").read_text())
    assert (saved["rows"], saved["cols"], saved["acc_width"], saved["ub_rows"],
            saved["act_lanes"]) == (3, 6, 40, 64, 0)


# --- configs and reports (model backend: no tools) --------------------------------------------
def test_sim_config_file_shape_is_the_arrays(capsys, tmp_path):
    """A 3 x 5 config runs on a 3 x 5 array (the options' defaults do not override it)."""
    cfg = tmp_path / "c.json"
    cfg.write_text('{"rows": 3, "cols": 5}')
    status, out, err = run_main(capsys, "sim", "--config", cfg, "--m", 7, "--k", 9, "--n", 11,
                                "--backend", "model")
    assert status == 0, out + err
    assert "3 x 5 array" in out.splitlines()[0] and out.strip().endswith("PASS")
    status, out, _ = run_main(capsys, "sim", "--config", cfg, "--rows", 4, "--m", 2, "--k", 2,
                              "--n", 2, "--backend", "model")
    assert status == 0 and "4 x 5 array" in out.splitlines()[0]


def test_sim_user_operands_out_and_json(capsys, tmp_path):
    rng = np.random.default_rng(7)
    a, b = rng.integers(-128, 128, (6, 10)), rng.integers(-128, 128, (10, 4))
    np.save(tmp_path / "A.npy", a.astype(np.int8))
    np.save(tmp_path / "B.npy", b)
    status, out, err = run_main(capsys, "sim", "--rows", 3, "--cols", 2, "--a",
                                tmp_path / "A.npy", "--b", tmp_path / "B.npy", "--out",
                                tmp_path / "C.npy", "--backend", "model", "--json")
    assert status == 0, err
    report = json.loads(out)
    assert report["shape"] == {"m": 6, "k": 10, "n": 4}
    assert report["array"] == {"rows": 3, "cols": 2} and report["passed"] is True
    c = np.load(tmp_path / "C.npy")
    assert c.dtype == np.int32 and np.array_equal(c, a @ b)


def test_sim_program_file(capsys, tmp_path):
    cfg = Config(rows=2, cols=3)
    rng = np.random.default_rng(1)
    a, b = rng.integers(-128, 128, (4, 5)), rng.integers(-128, 128, (5, 3))
    gemm = compile_gemm(cfg, a, b)
    gemm.program.save(tmp_path / "p.json")
    status, out, err = run_main(capsys, "sim", "--program", tmp_path / "p.json", "--backend",
                                "model", "--out", tmp_path / "h.npy")
    assert status == 0, out + err
    assert "2 x 3 array" in out and out.strip().endswith("PASS")
    beats = np.load(tmp_path / "h.npy")
    assert beats.dtype == np.int64 and np.array_equal(gemm.decode(beats), a @ b)
    # The program's config is the array's: a config that differs is named.
    status, _, err = run_main(capsys, "sim", "--program", tmp_path / "p.json", "--rows", 4,
                              "--backend", "model")
    assert_one_line_error(status, err, "--program", "r2c3")


# --- one-line errors ---------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path):
    (tmp_path / "c35.json").write_text('{"rows": 3, "cols": 5}')
    (tmp_path / "norows.json").write_text('{"cols": 5}')
    (tmp_path / "lanes5.json").write_text('{"rows": 3, "cols": 5, "act_lanes": 5}')
    (tmp_path / "bin.json").write_bytes(b"\x89PNG\x00\xff\xfe")
    (tmp_path / "regular").write_text("x")
    np.save(tmp_path / "A.npy", np.ones((3, 4), dtype=np.int8))
    np.save(tmp_path / "B5.npy", np.ones((5, 2), dtype=np.int8))
    np.save(tmp_path / "U.npy", np.full((3, 4), 2**64 - 1, dtype=np.uint64))
    np.save(tmp_path / "F.npy", np.ones((3, 4)))
    return tmp_path


#: (arguments, words the error line must contain); ``{d}`` is the test's folder.
BAD = [
    (["verilog", "--rows", "0", "--cols", "4"], ["--rows 0", "rows must be in 1..256"]),
    (["verilog", "--rows", "4", "--cols", "300"], ["--cols 300"]),
    (["verilog", "--rows", "4", "--cols", "4", "--acc-width", "8"], ["--acc-width 8"]),
    (["verilog", "--rows", "x", "--cols", "4"], ["--rows", "'x'"]),
    (["verilog", "--rows", "2"], ["--cols"]),
    (["verilog", "--rows", "2", "--cols", "2", "--debug-fault-cell", "5,0"],
     ["--debug-fault-cell 5,0", "2 x 2"]),
    (["verilog", "--rows", "2", "--cols", "2", "--top", "core", "--debug-fault-cell", "-1,0"],
     ["--debug-fault-cell -1,0"]),
    (["verilog", "--rows", "2", "--cols", "2", "--debug-fault-cell", "1;2"],
     ["--debug-fault-cell", "ROW,COL"]),
    (["verilog", "--rows", "2", "--cols", "2", "-o", "{d}/regular"], ["-o", "regular", "not a "
                                                                      "directory"]),
    (["verilog", "--rows", "2", "--cols", "2", "-o", "/proc/tpugen/x"], ["-o", "/proc/tpugen"]),
    (["verilog", "--config", "/nonexistent.json"], ["--config /nonexistent.json", "no such"]),
    (["verilog", "--config", "{d}/bin.json"], ["--config", "bin.json", "not a text file"]),
    (["verilog", "--config", "{d}/norows.json"], ["--config", "norows.json", "'rows'"]),
    (["verilog", "--config", "{d}"], ["--config", "directory"]),
    (["sim", "--config", "{d}/lanes5.json", "--cols", "2", "--m", "1", "--k", "1", "--n", "1",
      "--backend", "model"], ["--config", "lanes5.json", "--cols 2", "act_lanes"]),
    (["sim", "--m", "0", "--k", "2", "--n", "2", "--backend", "model"], ["--m", "'0'"]),
    (["sim", "--m", "2", "--k", "2", "--backend", "model"], ["--n"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "nope"], ["--backend", "nope"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "model", "--seed", "-1"],
     ["--seed", "'-1'"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "model", "--debug-fault-cell",
      "1,1"], ["--debug-fault-cell", "model"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "icarus", "--debug-fault-cell",
      "-1,0"], ["--debug-fault-cell -1,0"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "amaranth", "--waves",
      "{d}/missing/w.vcd"], ["--waves", "missing", "does not exist"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "icarus", "--waves",
      "{d}/w.vcd"], ["--waves", ".fst"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "model", "--waves", "{d}/w.vcd"],
     ["--waves", "model"]),
    (["sim", "--m", "100000", "--k", "100000", "--n", "100000", "--backend", "model"],
     ["--m 100000", "GiB"]),
    (["sim", "--a", "{d}/A.npy", "--b", "{d}/B5.npy", "--backend", "model"],
     ["--a", "--b", "K differs"]),
    (["sim", "--a", "{d}/A.npy", "--backend", "model"], ["--b"]),
    (["sim", "--a", "{d}/U.npy", "--b", "{d}/A.npy", "--backend", "model"],
     ["--a", "U.npy", "-128..127", str(2**64 - 1)]),
    (["sim", "--a", "{d}/F.npy", "--b", "{d}/A.npy", "--backend", "model"],
     ["--a", "F.npy", "integers"]),
    (["sim", "--a", "{d}/c35.json", "--b", "{d}/A.npy", "--backend", "model"],
     ["--a", "c35.json", ".npy"]),
    (["sim", "--a", "{d}/A.npy", "--b", "{d}/A.npy", "--m", "4", "--backend", "model"],
     ["--m 4", "M = 3"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "model", "--out", "{d}/C.txt"],
     ["--out", ".npy"]),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "model", "--out",
      "{d}/nodir/C.npy"], ["--out", "nodir"]),
    (["sim", "--program", "{d}/c35.json", "--backend", "model"], ["--program", "c35.json"]),
    (["sim", "--program", "{d}/missing.json", "--backend", "model"], ["--program", "no such"]),
    (["run", "--port", "/dev/nonexistent", "--m", "2", "--k", "2", "--n", "2"],
     ["--port /dev/nonexistent", "no such device"]),
    (["run", "--port", "{d}/regular", "--m", "2", "--k", "2", "--n", "2"],
     ["--port", "regular file"]),
    (["run", "--port", "{d}/regular", "--m", "2", "--k", "2", "--n", "2", "--seed", "-1"],
     ["--seed", "'-1'"]),
    (["run", "--port", "{d}/regular", "--m", "2", "--k", "2", "--n", "2", "--timeout", "0"],
     ["--timeout", "'0'"]),
    (["build", "--board", "icebreaker", "--config", "{d}/missing.json"],
     ["--config", "missing.json", "no such file"]),
    (["build", "--board", "icebreaker", "--freq", "-5"], ["--freq", "MHz", "'-5'"]),
    (["build", "--board", "icebreaker", "--rows", "0"], ["--rows 0"]),
    (["build", "--board", "nope"], ["--board", "nope"]),
    (["sim", "--m", "2", "--k", "2", "--n", "3", "--backend", "model", "--shift", "40"],
     ["--shift 40", "-32..31"]),
    (["sim", "--m", "2", "--k", "2", "--n", "3", "--backend", "model", "--bias", "1,2"],
     ["--bias", "2 values", "3 columns"]),
    (["sim", "--m", "2", "--k", "2", "--n", "3", "--backend", "model", "--bias", "x"],
     ["--bias", "'x'"]),
    (["sim", "--m", "2", "--k", "2", "--n", "3", "--backend", "model", "--act-min", "5",
      "--act-max", "4"], ["act_min", "act_max"]),
    (["sim", "--m", "2", "--k", "2", "--n", "3", "--backend", "model", "--activation", "relu"],
     ["--activation RELU", "--scales"]),
    (["sim", "--m", "2", "--k", "2", "--n", "3", "--backend", "model", "--scales", "1,0,1"],
     ["--scales", "1,0,1"]),
    (["sim", "--m", "2", "--k", "2", "--n", "3", "--backend", "model", "--scales", "1,1,1",
      "--shift", "2"], ["--shift", "not with --scales"]),
    (["sim", "--m", "2", "--k", "2", "--n", "3", "--backend", "model", "--in-zp", "200"],
     ["--in-zp 200", "in_zp"]),
    (["build"], ["--board"]),
    (["flash", "--board", "icebreaker", "--bitstream", "{d}/missing.bin"],
     ["--bitstream", "missing.bin", "no such file"]),
    (["demo", "--rows", "2", "--cols", "2", "--debug-fault-cell", "2,0"],
     ["--debug-fault-cell 2,0"]),
    (["frobnicate"], ["invalid choice"]),
]


@pytest.mark.parametrize("args,words", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_user_error_is_one_line_exit_2(capsys, files, args, words):
    status, out, err = run_main(capsys, *(a.replace("{d}", str(files)) for a in args))
    assert out == "", "nothing may run before the arguments are checked"
    assert_one_line_error(status, err, *words)


def test_flash_without_a_bitstream_names_the_build(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TPUGEN_BUILD_DIR", str(tmp_path))
    status, _, err = run_main(capsys, "flash", "--board", "icebreaker")
    assert_one_line_error(status, err, "--bitstream", "tpugen build --board icebreaker",
                          str(tmp_path))


def test_errors_in_a_fresh_process_have_no_traceback_or_warnings(tmp_path):
    """The whole process: one line, exit 2, no traceback, no UnusedElaboratable spew (the
    components made before an error would warn at exit)."""
    for args in (["verilog", "--rows", "2", "--cols", "2", "--top", "core",
                  "--debug-fault-cell", "5,0", "-o", str(tmp_path)],
                 ["sim", "--rows", "2", "--cols", "2", "--m", "2", "--k", "2", "--n", "2",
                  "--backend", "icarus", "--waves", str(tmp_path / "nodir" / "w.fst")]):
        r = tpugen(*args)
        assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr and "Warning" not in r.stderr


def test_simboard_bad_argument_is_one_line():
    r = subprocess.run([sys.executable, "-m", "tpugen.tb.simboard", "--max-payload", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--max-payload 0" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


class ErrorBoard:
    """A pty whose far end answers PING (so the link resynchronises) and every other request
    with an ERROR frame, or (``silent``) nothing at all."""

    def __init__(self, silent=False):
        self.master, slave = os.openpty()
        self.port = os.ttyname(slave)
        self._slave = slave
        self.silent = silent
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        parser = FrameParser()
        os.set_blocking(self.master, False)
        while not self._stop.is_set():
            try:
                data = os.read(self.master, 4096)
            except BlockingIOError:
                time.sleep(0.005)
                continue
            except OSError:
                return
            for f in parser.feed(data):
                if self.silent:
                    continue
                if f.type == FrameType.PING:
                    os.write(self.master, encode_frame(FrameType.PING_REPLY, f.payload))
                else:
                    os.write(self.master, encode_frame(
                        FrameType.ERROR, struct.pack("BB", ErrorCode.UNKNOWN_TYPE, f.type)))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        os.close(self.master)
        os.close(self._slave)


@pytest.mark.parametrize("silent,words", [(True, ["no reply within 0.3 s"]),
                                          (False, ["ERROR UNKNOWN_TYPE"])])
def test_run_port_that_does_not_answer_or_answers_error(capsys, silent, words):
    with ErrorBoard(silent=silent) as board:
        status, out, err = run_main(capsys, "run", "--port", board.port, "--m", 2, "--k", 2,
                                    "--n", 2, "--timeout", 0.3)
    assert out == ""
    assert_one_line_error(status, err, f"--port {board.port}", *words)


class FakeBoardLink:
    """A ``BoardLink`` whose board is the golden model (a 4 x 4 array at 12 MHz, 3 Mbaud);
    ``wrong`` adds 1 to one result lane."""

    wrong = False

    def __init__(self, port, baud, timeout):
        self.info = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        pass

    def identify(self, config=None):
        self.info = {"clk_freq": 12_000_000, "baud": 3_000_000,
                     "protocol_version": PROTOCOL_VERSION}
        return self.info

    def board_config(self):
        return Config(rows=4, cols=4)

    def run(self, program):
        exp = Machine(program.config).run(program)
        host_out = exp.host_out.copy()
        host_out[0, 1] += self.wrong
        return BoardRunResult(host_out=host_out, last=exp.last, error=int(exp.error),
                              counters={"cycles": 4000, "array_busy": 120,
                                        "retired": exp.retired},
                              cycles=4000, wall_time=0.25, link_bytes=2000, bytes_to_board=1800,
                              bytes_from_board=200, frames=2,
                              program=program, expected=exp)


@pytest.mark.parametrize("wrong", [False, True])
def test_run_reports_what_the_board_measured(capsys, monkeypatch, wrong):
    """``tpugen run`` is ``sim_gemm`` on the board backend: the report gives the board's
    clock, counters and link figures (here of a fake link whose board is the golden model),
    and a wrong lane FAILs naming the element."""
    monkeypatch.setattr(board_backend, "BoardLink", FakeBoardLink)
    monkeypatch.setattr(FakeBoardLink, "wrong", wrong)
    status, out, err = run_main(capsys, "run", "--port", "loop://", "--m", 6, "--k", 7, "--n",
                                5)
    lines = out.splitlines()
    assert status == int(wrong) and lines[-1] == ("FAIL" if wrong else "PASS"), out + err
    assert lines[0] == ("tpugen run: board at loop://: 4 x 4 array (int8), clock 12.00 MHz, "
                        "link 3000000 baud")
    assert "  link         2000 bytes (1800 to the board, 200 back), 2 frames, 8.0 kB/s" in lines
    assert "  peak         0.38 GOPS (2 x 4 x 4 x 12.00 MHz)" in lines
    assert any(line.startswith("  GOPS         0.0013 from the counters") for line in lines)
    assert any(line.startswith("  problem      C[0, 1] = ") for line in lines) == wrong
    status, out, _ = run_main(capsys, "run", "--port", "loop://", "--m", 6, "--k", 7, "--n", 5,
                              "--json")
    report = json.loads(out)
    assert (report["link_bytes"], report["frames"], report["clk_freq"]) == (2000, 2, 12_000_000)
    assert report["passed"] is not wrong and len(report["problems"]) == 2 * wrong


def test_bugs_keep_their_traceback(capsys, tmp_path, monkeypatch):
    """Only user errors become one line: an AssertionError or a KeyError inside the package
    propagates (its traceback shows)."""
    for exc in (AssertionError("bug"), KeyError("bug"), ValueError("bug inside")):
        def broken(*args, exc=exc, **kw):
            raise exc
        monkeypatch.setattr(verilog_command, "write_verilog", broken)
        with pytest.raises(type(exc)):
            cli.main(["verilog", "--rows", "2", "--cols", "2", "-o", str(tmp_path)])


def test_ctrl_c_is_one_line_exit_130():
    """SIGINT to the process group while a simulation runs (or its simulator builds): one
    line, status 130."""
    p = interruptible([sys.executable, "-m", "tpugen.cli", "sim", "--m", "300", "--k", "300",
                       "--n", "300", "--backend", "icarus"], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
    first = p.stderr.readline()            # the run's progress line: past the imports
    assert "running the GEMM on icarus" in first, first
    time.sleep(2)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, first + out + err
    assert err.strip().splitlines()[-1] == "tpugen: interrupted" and "Traceback" not in err


# --- runs -------------------------------------------------------------------------------------
def test_sim_model_pass():
    r = tpugen("sim", "--rows", "3", "--cols", "5", "--m", "7", "--k", "9", "--n", "11",
               "--backend", "model")
    assert r.returncode == 0 and r.stdout.strip().endswith("PASS"), r.stdout
    assert "3 x 5 array" in r.stdout and "Traceback" not in r.stderr


def test_sim_icarus_config_and_operands(tmp_path):
    """The acceptance case: ``tpugen sim --config c.json --a A.npy --b B.npy --out C.npy
    --backend icarus`` on a 3 x 5 config writes the exact product; the report keeps its
    ``cycles`` line and names the array."""
    (tmp_path / "c.json").write_text('{"rows": 3, "cols": 5}')
    rng = np.random.default_rng(3)
    a, b = rng.integers(-128, 128, (9, 13)), rng.integers(-128, 128, (13, 6))
    np.save(tmp_path / "A.npy", a.astype(np.int8))
    np.save(tmp_path / "B.npy", b.astype(np.int8))
    r = tpugen("sim", "--config", "c.json", "--a", "A.npy", "--b", "B.npy", "--out", "C.npy",
               "--backend", "icarus", cwd=tmp_path,
               env=dict(os.environ, TPUGEN_BUILD_DIR=str(build_root())))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "3 x 5 array" in lines[0] and lines[-1] == "PASS"
    assert any(line.split()[:1] == ["cycles"] for line in lines), r.stdout
    c = np.load(tmp_path / "C.npy")
    assert c.dtype == np.int32 and np.array_equal(c, a @ b)


def test_demo_fails_with_a_fault():
    """The test of the tests, end to end: the demo with a corrupted cell prints FAIL."""
    r = tpugen("demo", "--sim", "icarus", "--debug-fault-cell", "2,3", timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "FAIL"
    assert "differ from NumPy" in r.stdout


def test_sim_int8_with_tflite_parameters(tmp_path):
    """``--bias/--multiplier/--shift/--out-zp/--act-min/--act-max/--in-zp`` (per column or
    one value) and ``--scales/--activation`` give TFLite's requantization: the result file
    equals the golden model's ``requantize`` of the exact sums, and ``--scales`` equals the
    parameters it derives."""
    rng = np.random.default_rng(9)
    a, b = rng.integers(-128, 128, (6, 11)), rng.integers(-128, 128, (11, 3))
    np.save(tmp_path / "A.npy", a.astype(np.int8))
    np.save(tmp_path / "B.npy", b.astype(np.int8))
    args = ["sim", "--rows", "2", "--cols", "2", "--a", "A.npy", "--b", "B.npy", "--backend",
            "model", "--out", "C.npy"]
    r = tpugen(*args, "--bias", "100,-2000,7", "--multiplier", str(1 << 30), "--shift",
               "-5,-6,-7", "--out-zp", "-4", "--act-min", "-100", "--act-max", "90", "--in-zp",
               "3", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip().endswith("PASS"), r.stdout + r.stderr
    params = QuantParams(bias=[100, -2000, 7], multiplier=1 << 30, shift=[-5, -6, -7],
                         out_zp=-4, act_min=-100, act_max=90)
    want = requantize((a - 3) @ b, params)
    got = np.load(tmp_path / "C.npy")
    assert got.dtype == np.int8 and np.array_equal(got, want)
    r = tpugen(*args, "--scales", "0.02,0.005,0.1", "--activation", "relu6", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    want = requantize(a @ b, QuantParams.from_scales(0.02, 0.005, 0.1, activation="RELU6"))
    assert np.array_equal(np.load(tmp_path / "C.npy"), want)


@pytest.mark.parametrize("operand", ["int4", "bf16", "fp8_e4m3", "fp8_e5m2"])
def test_sim_operand_on_the_model(capsys, tmp_path, operand):
    """``tpugen sim --operand``: random operands of the type, PASS, the result file in the
    type's result dtype (float32: the binary32 accumulators)."""
    out_file = tmp_path / "C.npy"
    status, out, _ = run_main(capsys, "sim", "--operand", operand, "--rows", "3", "--cols",
                              "5", "--m", "9", "--k", "11", "--n", "7", "--backend", "model",
                              "--out", out_file)
    assert status == 0 and out.strip().endswith("PASS")
    kind = "int32" if operand == "int4" else "fp32"
    assert f"({kind} results)" in out
    c = np.load(out_file)
    assert c.shape == (9, 7) and c.dtype == (np.int32 if operand == "int4" else np.float32)


@pytest.mark.parametrize("option", [["--relu"], ["--bias", "3"], ["--scales", "0.1,0.1,0.1"]])
def test_float_operands_refuse_requantization(capsys, option):
    status, _, err = run_main(capsys, "sim", "--operand", "bf16", "--m", "4", "--k", "4",
                              "--n", "4", *option)
    assert status == 2
    assert err.strip() == (f"tpugen: error: {option[0]}: requantization applies to integer "
                           f"operand types, not bf16 (its results are the fp32 sums)")
