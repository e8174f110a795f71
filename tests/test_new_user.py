"""What a demanding new user broke (issue: never lose a user's data, never a silent wrong
answer), one test per finding: each bad input is one line naming the option, file or variable
and the value, exit status 2, found before anything runs; or the exact result. ``tpugen
clean``'s and the disk budget's tests are in ``tests/test_cache.py``."""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tpugen.cli.gemm_options as cli_gemm
import tpugen.cli.infer as cli_infer
import tpugen.cli.port as cli_port
import tpugen.memory
from tpugen import Accelerator, Config, load_tflite
from tpugen.backends import board as board_backend
from tpugen.cli import main
from tpugen.fpga.host.board_link import ConfigMismatch
from tpugen.fpga.protocol import PROTOCOL_VERSION
from tpugen.memory import GemmTooLarge, gemm_bytes
from tpugen.simulate import _waves_line
from tpugen.tflite.writer import ModelWriter


def run_main(capsys, *args):
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def one_line(capsys, *args) -> str:
    """Run ``tpugen ARGS``: exit status 2, nothing on standard output, one error line."""
    status, out, err = run_main(capsys, *args)
    assert status == 2 and out == "", (status, out, err)
    assert err.count("\n") == 1 and err.startswith("tpugen: error: "), err
    return err[len("tpugen: error: "):].strip()


@pytest.fixture
def model(tmp_path):
    """A small int8 model (a fully connected layer) and an input for it."""
    rng = np.random.default_rng(3)
    mw = ModelWriter()
    x = mw.input((1, 12), 0.05, 3)
    y = mw.fully_connected(x, rng.integers(-127, 128, (5, 12)), rng.integers(-99, 99, 5), 0.01,
                           0.04, -1)
    path = tmp_path / "fc.tflite"
    path.write_bytes(mw.build(y))
    inp = tmp_path / "x.npy"
    np.save(inp, rng.integers(-128, 128, (1, 12)).astype(np.int8))
    return path, inp


# --- 3. memory: the Python API estimates before it allocates -----------------------------------
def test_matmul_refuses_a_gemm_that_cannot_fit(monkeypatch):
    """The estimate the command line uses, before any conversion: a 1 x 2**27 x 1 GEMM with
    1 GiB available is refused at once, naming the shape and the estimate."""
    monkeypatch.setattr(tpugen.memory, "available_memory", lambda: 2**30)
    acc = Accelerator(Config(rows=4, cols=4), backend="model")
    a, b = np.zeros((1, 2**27), np.int8), np.zeros((2**27, 1), np.int8)
    with pytest.raises(GemmTooLarge, match=r"^a @ b: a 1 x 134217728 x 1 GEMM needs about "
                                           r"\d+\.\d GiB .* more than the 1\.0 GiB available$"):
        acc.matmul(a, b)
    assert isinstance(GemmTooLarge("x"), MemoryError)
    assert gemm_bytes(Config(rows=4, cols=4), 1, 2**27, 1) > 2**30


def test_the_command_line_uses_the_same_estimate(monkeypatch, capsys):
    monkeypatch.setattr(tpugen.memory, "available_memory", lambda: 2**30)
    msg = one_line(capsys, "sim", "--m", 1, "--k", 2**27, "--n", 1, "--backend", "model")
    assert msg.startswith("--m 1 --k 134217728 --n 1: a 1 x 134217728 x 1 GEMM needs about")


# --- 4. no configuration that differs from the oracle runs --------------------------------------
def test_infer_refuses_accumulators_narrower_than_tflite(model, capsys):
    path, x = model
    assert one_line(capsys, "infer", path, "--input", x, "--acc-width", 24) == (
        "--acc-width 24: acc_width must be at least 32 (TFLite's int32 accumulators) to run a "
        "TFLite model, not 24 (config r8c8_int8_a24)")
    with pytest.raises(ValueError, match="acc_width must be at least 32"):
        load_tflite(path).run(np.load(x), Accelerator(Config(acc_width=24), backend="model"))
    assert run_main(capsys, "infer", path, "--input", x, "--acc-width", 40, "--check")[0] == 0


# --- 5. one line instead of a traceback ---------------------------------------------------------
@pytest.mark.parametrize("operand", ["bf16", "fp8_e4m3", "int4"])
def test_infer_with_another_operand_type_is_one_line(model, capsys, operand):
    path, x = model
    assert one_line(capsys, "infer", path, "--input", x, "--operand", operand).startswith(
        f"--operand {operand}: tpugen infer runs int8 models: operand must be int8")


def test_scales_that_are_not_float32_are_one_line(capsys):
    msg = one_line(capsys, "sim", "--m", 2, "--k", 2, "--n", 2, "--backend", "model",
                   "--scales", "1e300,1,1e-300")
    assert msg.startswith("argument --scales: must be S_IN,S_W,S_OUT") and "1e300" in msg


def test_an_unknown_port_url_is_one_line(capsys):
    assert one_line(capsys, "run", "--port", "bogus://x", "--m", 2, "--k", 2, "--n", 2) == (
        "--port bogus://x: 'bogus' is not a pyserial URL scheme (e.g. loop://, "
        "socket://HOST:PORT, rfc2217://HOST:PORT)")


def test_a_folder_that_cannot_be_written_is_one_line(monkeypatch, capsys):
    """The current folder is one nobody may write (root included): the build directory there
    cannot be made."""
    monkeypatch.delenv("TPUGEN_BUILD_DIR", raising=False)
    monkeypatch.chdir("/proc")
    assert one_line(capsys, "verilog", "--rows", 2, "--cols", 2) == (
        "/proc/build: cannot write there (No such file or directory)")


# --- 6. outputs are checked before the run ------------------------------------------------------
@pytest.mark.parametrize("option, value, backend", [
    ("--waves", "/proc/w.vcd", "verilator"), ("--out", "/proc/c.npy", "model"),
    ("--out", "/nonexistent/c.npy", "model")])
def test_outputs_that_cannot_be_written_are_refused_first(capsys, option, value, backend):
    msg = one_line(capsys, "sim", "--m", 3, "--k", 3, "--n", 3, "--backend", backend, option,
                   value)
    assert msg.startswith(f"{option} {value}: ")


def test_a_waveform_the_simulator_did_not_write_fails_the_run(tmp_path):
    lines, fields = [], {}
    assert not _waves_line(tmp_path / "none.vcd", lines, fields)
    assert lines == [f"waves        NOT WRITTEN: the simulator left no file at "
                     f"{tmp_path / 'none.vcd'}"]
    (tmp_path / "w.vcd").write_text("$end")
    assert _waves_line(tmp_path / "w.vcd", lines, fields)


# --- 7. no hang on a pipe -----------------------------------------------------------------------
def test_a_fifo_as_config_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "cfg.fifo"
    os.mkfifo(fifo)
    p = subprocess.run([sys.executable, "-m", "tpugen.cli", "sim", "--config", str(fifo),
                        "--m", "2", "--k", "2", "--n", "2", "--backend", "model"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (f"tpugen: error: --config {fifo}: not a regular file (a pipe or a "
                        f"device); name a config file\n")


# --- 8. refusals that were wrong, and files that are not what they claim ------------------------
class FakeBoard:
    """A board link to a 4 x 4 board built with 256 / 128 buffer rows (not Config's defaults):
    it refuses a config that is not its hardware, as a real board's ID check does."""

    BOARD = Config(rows=4, cols=4, ub_rows=256, acc_rows=128)

    def __init__(self, port, baud, timeout):
        self.info = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def close(self):
        pass

    def identify(self, config=None):
        if config is not None and not config.same_hardware(self.BOARD):
            raise ConfigMismatch(f"the board does not implement config {config.name}")
        self.info = {"clk_freq": 12_000_000, "baud": 3_000_000,
                     "protocol_version": PROTOCOL_VERSION}
        return self.info

    def board_config(self):
        return self.BOARD


def test_infer_on_a_board_takes_the_board_s_buffers(model, capsys, monkeypatch):
    """``--rows 4 --cols 4`` on a 4 x 4 board with other buffer sizes is that board (the
    options override the board's config, not Config's defaults); ``--rows 8`` is refused."""
    monkeypatch.setattr(board_backend, "BoardLink", FakeBoard)
    path, x = model
    seen = []
    monkeypatch.setattr(cli_port, "board_accelerator",
                        lambda args, cfg: seen.append(cfg) or Accelerator(cfg, "model"))
    status, out, err = run_main(capsys, "infer", path, "--input", x, "--backend", "board",
                                "--port", "loop://", "--rows", 4, "--cols", 4)
    assert status == 0, err
    assert seen == [FakeBoard.BOARD]
    monkeypatch.undo()
    monkeypatch.setattr(board_backend, "BoardLink", FakeBoard)
    msg = one_line(capsys, "infer", path, "--input", x, "--backend", "board", "--port",
                   "loop://", "--rows", 8, "--cols", 4, "--timeout", 0.5)
    assert msg.startswith("--port loop://: ") and "does not implement" in msg


@pytest.mark.parametrize("path, words", [("/dev/null", "not a regular file"),
                                         ("", "--a: empty; name a NumPy .npy file")])
def test_a_device_or_nothing_as_an_operand_file(capsys, path, words):
    msg = one_line(capsys, "sim", "--a", path, "--b", "/dev/null", "--backend", "model")
    assert words in msg


def test_an_npy_header_that_claims_too_much_is_refused(tmp_path, capsys):
    huge = tmp_path / "huge.npy"
    with open(huge, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "|i1", "fortran_order": False, "shape": (100_000, 100_000_000)})
    ok = tmp_path / "ok.npy"
    np.save(ok, np.zeros((2, 2), np.int8))
    assert one_line(capsys, "sim", "--a", huge, "--b", ok, "--backend", "model") == (
        f"--a {huge}: its header claims a 100000 x 100000000 int8 array "
        f"(10,000,000,000,000 bytes) but the file holds 0 bytes")


@pytest.mark.parametrize("option", ["--config", "--program"])
def test_an_empty_file_name_is_not_ignored(capsys, option):
    args = ["sim", option, "", "--backend", "model"]
    if option == "--config":
        args += ["--m", 2, "--k", 2, "--n", 2]
    assert one_line(capsys, *args).startswith(f"{option}: empty; name a")


def test_ml_dtypes_narrow_integers_are_operands():
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 8, (5, 7))
    b = rng.integers(-8, 8, (7, 3))
    acc = Accelerator(Config(rows=4, cols=4, operand="int4"), backend="model")
    got = acc.matmul(a.astype(ml_dtypes.int4), b.astype(ml_dtypes.int4))
    assert np.array_equal(got, a @ b)
    with pytest.raises(ValueError, match="values must be in -8..7"):
        acc.matmul(np.full((2, 2), 9).astype(ml_dtypes.uint4), b[:2])


def test_numpy_integers_make_a_config():
    assert Config(rows=np.int64(4), cols=np.int32(3)) == Config(rows=4, cols=3)


# --- 9. what the reports and progress lines claim -----------------------------------------------
def test_the_int4_report_shows_the_int4_clamp(capsys):
    status, out, _ = run_main(capsys, "sim", "--operand", "int4", "--m", 8, "--k", 8, "--n", 8,
                              "--backend", "model", "--relu")
    assert status == 0
    assert "act_min 0, act_max 7," in out.splitlines()[0]


def test_model_backend_work_has_progress_lines(model, capsys, monkeypatch):
    """The compile and golden model of ``sim`` and the model run of ``infer`` sit inside a
    heartbeat (a line every 10 s), whatever the backend."""
    labels = []

    class Recorder:
        def __init__(self, label, **kw):
            labels.append(label)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(cli_gemm, "Heartbeat", Recorder)
    monkeypatch.setattr(cli_infer, "Heartbeat", Recorder)
    assert run_main(capsys, "sim", "--m", 4, "--k", 4, "--n", 4, "--backend", "model")[0] == 0
    path, x = model
    assert run_main(capsys, "infer", path, "--input", x)[0] == 0
    assert labels == ["compiling the GEMM and its golden result",
                      f"tpugen infer: running {path} on model"]
