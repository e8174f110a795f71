"""The board end to end without a board: ``BoardTop``'s Verilog simulated behind a pty
(``tb.simboard``), driven by the host code (``fpga.board_link.BoardLink`` over pyserial); and the
cocotb testbench ``tb/test_board.py`` on Icarus and Verilator.

The simulated board and the Verilator testbench share one Verilator build (same parameters).
"""

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import serial
from helpers import assert_rejects

from tpugen.backends.board import BoardBackend
from tpugen.compiler import compile_gemm
from tpugen.fpga.flow.boards import get_board
from tpugen.fpga.host.board_link import BoardLink, BridgeRejected, ConfigMismatch
from tpugen.fpga.host.serial_link import FrameParser, encode_frame
from tpugen.fpga.protocol import BridgeError, ErrorCode, FrameType
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.program import Program
from tpugen.tb.simboard import SimulatedBoardTop

CFG = Config(rows=4, cols=4, ub_rows=256, acc_rows=128)
#: The simulated board's parameters (4 clocks per bit, a short idle timeout).
PARAMS = {"clk_freq": 4e6, "baud": 1e6, "max_payload": 1024, "timeout_bits": 40}
BOARD_TESTS = 2  # cocotb tests in tb/test_board.py
#: Seconds a reply may take (the Verilator build is done before the board is started).
TIMEOUT = 120


@pytest.fixture(scope="module")
def board():
    with SimulatedBoardTop(CFG, sim="verilator", **PARAMS) as b:
        yield b


def test_identify(board):
    with BoardLink(board.port, 115200, timeout=TIMEOUT) as link:
        info = link.identify(CFG)
    assert (info["rows"], info["cols"], info["operand"], info["isa_version"]) == (
        4, 4, "int8", isa.ISA_VERSION)
    assert (info["ub_rows"], info["acc_rows"], info["weight_fifo_depth"]) == (256, 128, 4)
    assert (info["max_payload"], info["clk_freq"], info["baud"]) == (1024, 4_000_000, 1_000_000)
    assert info["max_reply"] == board.params.max_reply


def test_config_mismatch_is_named(board):
    with BoardLink(board.port, 115200, timeout=TIMEOUT) as link:
        with pytest.raises(ConfigMismatch, match=r"rows: board 4, expected 8") as e:
            link.identify(CFG.replace(rows=8, acc_rows=64))
        assert "acc_rows: board 128, expected 64" in str(e.value)
        assert "cols" not in str(e.value)
        with pytest.raises(ConfigMismatch, match="weight_fifo_depth: board 4, expected 2"):
            link.run(Program(CFG.replace(weight_fifo_depth=2)).sync())


def test_gemm_20x30x10(board):
    rng = np.random.default_rng(20)
    A = rng.integers(-128, 128, (20, 30))
    B = rng.integers(-128, 128, (30, 10))
    gemm = compile_gemm(CFG, A, B)
    with BoardLink(board.port, 115200, timeout=TIMEOUT) as link:
        link.identify(CFG)
        t0 = time.monotonic()
        result = link.run(gemm.program)
        wall = time.monotonic() - t0
    np.testing.assert_array_equal(gemm.decode(result.host_out), A @ B)
    assert result.error == 0 and result.frames >= 2
    assert result.counters["retired"] == len(result.program)
    # The cycle counter runs from the reset before the program to the last reply: UART time.
    assert result.cycles == result.counters["cycles"] > 20 * result.link_bytes
    assert 0 < result.wall_time <= wall
    print(f"\n20x30x10 GEMM on the simulated {CFG.name}: {wall:.1f} s, {result.frames} frames, "
          f"{result.link_bytes} link bytes, {result.cycles} cycles")


def test_flipped_byte_gets_the_crc_error_and_the_next_frame_works(board):
    program = Program(CFG).read_host(0, np.full((3, 4), 7)).write_host(0, 3).sync()
    with BoardLink(board.port, 115200, timeout=TIMEOUT) as link:
        link.identify(CFG)
        frame = bytearray(encode_frame(FrameType.PROGRAM, bytes([1]) + bytes(8)))
        frame[6] ^= 0x04
        port = serial.serial_for_url(board.port, timeout=0.05)
        try:
            port.write(bytes(frame))
            parser, replies = FrameParser(), []
            deadline = time.monotonic() + TIMEOUT
            while not replies and time.monotonic() < deadline:
                replies = parser.feed(port.read(64))
        finally:
            port.close()
        assert replies and replies[0].crc_ok, "no reply to the corrupted frame"
        assert replies[0].type == FrameType.ERROR
        assert replies[0].payload[:2] == bytes([ErrorCode.BAD_CRC, FrameType.PROGRAM])
        result = link.run(program)
    assert result.host_out[:3].tolist() == [[7] * 4] * 3 and result.error == 0


def test_bridge_errors_are_named(board):
    with BoardLink(board.port, 115200, timeout=TIMEOUT) as link:
        link.identify(CFG)
        with pytest.raises(BridgeRejected, match="BAD_RECORD.*record byte.*offset 9") as e:
            link.send_program_frame(CFG, bytes([1]) + bytes(8) + b"\x0e")
        assert e.value.offset == 9 and e.value.code == BridgeError.BAD_RECORD
        with pytest.raises(BridgeRejected, match="BAD_CONTROL"):
            link.request(FrameType.CONTROL, b"\xff")
        assert link.control(reset=True).flags == 0


def test_board_backend(board):
    """``BoardBackend`` checks against the golden model; a program that sets an error too."""
    rng = np.random.default_rng(5)
    gemm = compile_gemm(CFG, rng.integers(-128, 128, (5, 6)), rng.integers(-128, 128, (6, 3)))
    erring = Program(CFG).matmul(0, 0, 1).sync()                   # NO_TILE
    with BoardBackend(CFG, board.port, 115200, timeout=TIMEOUT) as backend:
        ok, bad = backend.run_many([gemm.program, erring], stalls=(0.1, 0, 0))
        assert backend.name == "board"
    assert ok.mismatches == [] and ok.error == 0
    assert bad.mismatches == [] and bad.error == isa.Cause.NO_TILE
    assert bad.host_out[0, :2].tolist() == [isa.SYNC_MAGIC, isa.Cause.NO_TILE]


@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_board_verilog_cocotb(sim):
    """tb/test_board.py on the generated Verilog of ``BoardTop``."""
    top = SimulatedBoardTop(CFG, sim=sim, **PARAMS)
    env = {"TPUGEN_BOARD": json.dumps(top.spec)}
    tests, failed = top.build().run("tpugen.tb.test_board", env=env, name="tb_board", seed=3)
    assert (tests, failed) == (BOARD_TESTS, 0)


def test_amaranth_simulated_board():
    """The same top in the Amaranth simulator (slow: identify and a status only)."""
    with SimulatedBoardTop(CFG, sim="amaranth", **PARAMS) as b, \
            BoardLink(b.port, 115200, timeout=TIMEOUT) as link:
        assert link.identify(CFG)["rows"] == 4
        status = link.control(clear_counters=True)
    assert status.flags == 0 and status.counters["retired"] == 0


def test_simulated_board_arguments():
    assert_rejects(lambda: SimulatedBoardTop(CFG, sim="ghdl"), ValueError, "sim must be one of")
    assert_rejects(lambda: SimulatedBoardTop(CFG, clk_freq=2e6, baud=1e6), ValueError,
                   "clocks per bit")


def test_tpugen_run_cli(board):
    """``tpugen run --port <pty of the simulated board> --m 20 --k 30 --n 10`` prints PASS."""
    r = subprocess.run([sys.executable, "-m", "tpugen.cli", "run", "--port", board.port,
                        "--m", "20", "--k", "30", "--n", "10", "--timeout", str(TIMEOUT)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "PASS"
    assert any(line.strip().startswith("GOPS") for line in lines)


@pytest.mark.slow      # a simulated board build per board (minutes): make test-slow
@pytest.mark.parametrize("name", ["icebreaker", "ulx3s"])
def test_board_default_runs_gemms(name):
    """Each board's default config (what ``tpugen build --board NAME`` builds) on the simulated
    board (Verilator): ``tpugen run`` checks a GEMM (PASS) and prints the peak GOPS beside the
    GOPS the link sustains."""
    cfg = get_board(name).config
    with SimulatedBoardTop(cfg, sim="verilator", **PARAMS) as b:
        r = subprocess.run([sys.executable, "-m", "tpugen.cli", "run", "--port", b.port,
                            "--m", "17", "--k", str(2 * cfg.rows + 3), "--n", str(cfg.cols + 2),
                            "--timeout", str(TIMEOUT)],
                           capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "PASS"
    assert f"{cfg.rows} x {cfg.cols} array (int8)" in r.stdout
    peak = [line for line in lines if line.strip().startswith("peak")]
    assert peak and f"(2 x {cfg.rows} x {cfg.cols} x " in peak[0], r.stdout
    gops = [line for line in lines if line.strip().startswith("GOPS")]
    assert gops and "sustained over the link" in gops[0], r.stdout


@pytest.mark.slow      # a simulated board build per format (a minute each): make test-slow
@pytest.mark.parametrize("operand", ["int4", "bf16"])
def test_number_formats_on_the_simulated_board(operand):
    """The board backend with other operand types: the board's ID names the format, a GEMM of
    random operands (int4 beats in packed records, bf16 lanes of two bytes) matches the golden
    model bit for bit through the UART link (``Accelerator.matmul`` checks it)."""
    from tpugen import Accelerator
    from tpugen.simulate import random_operands

    cfg = Config(rows=3, cols=4, operand=operand, ub_rows=64, acc_rows=64)
    with SimulatedBoardTop(cfg, sim="verilator", **PARAMS) as b:
        acc = Accelerator(cfg, "board", port=b.port, baud=PARAMS["baud"])
        a, w = random_operands(cfg, 9, 10, 7, 5)
        got = acc.matmul(a, w)
    assert acc.last.passed and got.shape == (9, 7)
    assert got.dtype == (np.float32 if operand == "bf16" else np.int32)
