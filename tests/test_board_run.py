"""The host on the simulated board (``tb.simboard``, Verilator): after a half-sent frame of a
host killed mid-transfer the link resynchronises; ``tpugen run`` with the user's operands
(``--a --b --out``), a saved program (``--program``) and the JSON report."""

import json
import subprocess
import sys

import numpy as np
import pytest
import serial

from tpugen.compiler import compile_gemm
from tpugen.fpga.host.board_link import BoardLink
from tpugen.fpga.host.serial_link import encode_frame
from tpugen.fpga.protocol import FrameType
from tpugen.hdl.config import Config
from tpugen.tb.simboard import SimulatedBoardTop

#: The same board as tests/test_board_e2e.py (one Verilator build for both).
CFG = Config(rows=4, cols=4, ub_rows=256, acc_rows=128)
PARAMS = {"clk_freq": 4e6, "baud": 1e6, "max_payload": 1024, "timeout_bits": 40}
TIMEOUT = 120


@pytest.fixture(scope="module")
def board():
    with SimulatedBoardTop(CFG, sim="verilator", **PARAMS) as b:
        yield b


def tpugen_run(port, *args):
    return subprocess.run([sys.executable, "-m", "tpugen.cli", "run", "--port", port,
                           "--timeout", str(TIMEOUT), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def half_sent_frame(port, cut):
    """What a host killed mid-transfer leaves: the first ``cut`` bytes of a PROGRAM frame."""
    frame = encode_frame(FrameType.PROGRAM, bytes([1]) + bytes(8) * 50)
    raw = serial.serial_for_url(port, timeout=0.05)
    try:
        raw.write(frame[:cut])
        raw.flush()
    finally:
        raw.close()


@pytest.mark.parametrize("cut", [200, 3])
def test_link_resynchronises_after_a_half_sent_frame(board, cut):
    """The next host's first request right after such a frame (within the board's idle
    timeout) works. Without resynchronisation it failed: ERROR TIMEOUT for a cut of 200 bytes
    (the request became part of the stale frame), TOO_LONG for 3 (its bytes became the stale
    frame's length)."""
    rng = np.random.default_rng(cut)
    a, b = rng.integers(-128, 128, (9, 6)), rng.integers(-128, 128, (6, 5))
    gemm = compile_gemm(CFG, a, b)
    half_sent_frame(board.port, cut)
    with BoardLink(board.port, timeout=TIMEOUT) as link:
        link.identify(CFG)
        result = link.run(gemm.program)
    assert np.array_equal(gemm.decode(result.host_out), a @ b)


def test_run_the_users_operands(board, tmp_path):
    """``tpugen run --a A.npy --b B.npy --out C.npy --json``: the exact product, in int32."""
    rng = np.random.default_rng(2)
    a, b = rng.integers(-128, 128, (9, 6)), rng.integers(-128, 128, (6, 5))
    np.save(tmp_path / "A.npy", a.astype(np.int8))
    np.save(tmp_path / "B.npy", b.astype(np.int16))
    r = tpugen_run(board.port, "--a", tmp_path / "A.npy", "--b", tmp_path / "B.npy", "--out",
                   tmp_path / "C.npy", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["passed"] and report["array"] == {"rows": 4, "cols": 4}
    assert report["shape"] == {"m": 9, "k": 6, "n": 5} and report["cycles"] > 0
    c = np.load(tmp_path / "C.npy")
    assert c.dtype == np.int32 and np.array_equal(c, a @ b)


def test_run_a_program_file(board, tmp_path):
    rng = np.random.default_rng(4)
    a, b = rng.integers(-128, 128, (5, 7)), rng.integers(-128, 128, (7, 6))
    gemm = compile_gemm(CFG, a, b)
    gemm.program.save(tmp_path / "p.json")
    r = tpugen_run(board.port, "--program", tmp_path / "p.json", "--out", tmp_path / "h.npy")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "4 x 4 array" in lines[0] and lines[-1] == "PASS"
    # The host-out beats (long WRITE_HOSTs split by the board's plan give the same beats).
    assert np.array_equal(gemm.decode(np.load(tmp_path / "h.npy")), a @ b)
    # A program for another config is named before anything runs.
    other = compile_gemm(Config(rows=2, cols=2), [[1]], [[1]]).program
    other.save(tmp_path / "q.json")
    r = tpugen_run(board.port, "--program", tmp_path / "q.json")
    assert r.returncode == 2 and "--program" in r.stderr and "r2c2" in r.stderr, r.stderr
