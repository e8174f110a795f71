"""Resident models on the simulated board (``tb.simboard``, Verilator): a model loads once and
later runs send only their inputs; a reconnecting host runs without a reload; another model's
load, a core reset and a load cut short are found, and the model reloads, never computes stale
(``tpugen.backends.board.BoardBackend(resident=True)``). Slow (``make test-slow``): a board
build of its own and every UART bit simulated, a few minutes; ``tests/test_resident_rtl.py``
checks the same programs on the core in the default suite."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tpugen.backends.board import BoardBackend
from tpugen.compiler.resident import make_resident
from tpugen.compiler.staging import compile_chain
from tpugen.fpga.host.board_link import BoardLink
from tpugen.fpga.host.frame_plan import link_bytes, plan_program
from tpugen.fpga.protocol import (
    OVERHEAD,
    REC_WORD_SIZE,
    RESULT_HEADER_SIZE,
    beat_record_size,
    result_beat_size,
)
from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.requant import QuantParams
from tpugen.tb.simboard import SimulatedBoardTop

CFG = Config(rows=4, cols=4, ub_rows=64, acc_rows=64, weight_tiles=48, program_words=160,
             quant_sets=8)
PARAMS = {"clk_freq": 4e6, "baud": 1e6, "max_payload": 1024, "timeout_bits": 40}
TIMEOUT = 120

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def board():
    with SimulatedBoardTop(CFG, sim="verilator", **PARAMS) as b:
        yield b


def _model(seed):
    rng = np.random.default_rng(seed)
    layers = []
    for k, n in ((20, 12), (12, 5)):
        q = QuantParams(bias=rng.integers(-500, 500, n), multiplier=np.full(n, 1 << 30),
                        shift=-6, out_zp=int(rng.integers(-5, 5)))
        layers.append((rng.integers(-128, 128, (k, n)), q))
    return layers


def _program(layers, seed):
    x = np.random.default_rng(100 + seed).integers(-128, 128, (1, 20))
    return compile_chain(CFG, x, layers).program


def _run(port, program):
    with BoardBackend(CFG, port, 1_000_000, timeout=TIMEOUT, resident=True) as backend:
        r = backend.run(program)
        return r, backend.last_loaded, backend.last_resident


def test_load_once_then_inputs_only(board):
    a = _model(1)
    with BoardBackend(CFG, board.port, 1_000_000, timeout=TIMEOUT, resident=True) as backend:
        runs = []
        for k in range(4):
            r = backend.run(_program(a, k))
            assert r.mismatches == [] and r.error == 0, r.mismatches
            runs.append((backend.last_loaded, r.bytes_to_board, r.bytes_from_board))
    rp = backend.last_resident
    assert [loaded for loaded, _, _ in runs] == [True, False, False, False]
    # after the load: one frame of one word (the CALL) and the input's beats; the CALL's
    # result: the output row and the SYNC beat
    inputs = -(-20 // CFG.rows)
    for _, sent, got in runs[1:]:
        assert sent == OVERHEAD + REC_WORD_SIZE + inputs * beat_record_size(CFG)
        assert got <= OVERHEAD + RESULT_HEADER_SIZE + 2 * result_beat_size(CFG)
    # the host's prediction of the bytes (tpugen.link_report) is what the board sent for the
    # load and the first run (the retired count in the SYNC beat decides its width)
    held = Machine(CFG)
    held.run(rp.load)
    limits = {"max_payload": 1024, "max_reply": backend.info["max_reply"]}
    load = link_bytes(plan_program(rp.load, **limits))
    call = link_bytes(plan_program(rp.call, state=held, **limits), reset=False)
    assert (load[0] + call[0], load[1] + call[1]) == runs[0][1:]
    assert runs[0][1] > rp.weight_bytes()


def test_reconnect_runs_without_reload_and_other_models_reload(board):
    a, b = _model(1), _model(2)
    r, loaded, _ = _run(board.port, _program(a, 7))
    assert r.mismatches == [] and r.error == 0
    r, loaded, _ = _run(board.port, _program(a, 8))      # a new connection, the same model
    assert r.mismatches == [] and not loaded
    r, loaded, _ = _run(board.port, _program(b, 9))      # another model
    assert r.mismatches == [] and loaded
    r, loaded, _ = _run(board.port, _program(a, 10))     # the first one again: reloaded
    assert r.mismatches == [] and loaded


def test_models_side_by_side_do_not_reload(board):
    """Two models in one connection: each loads once, then they alternate with no reload."""
    a, b = _model(4), _model(5)
    with BoardBackend(CFG, board.port, 1_000_000, timeout=TIMEOUT, resident=True) as backend:
        loads = []
        for k, layers in enumerate((a, b, a, b, a)):
            r = backend.run(_program(layers, 20 + k))
            assert r.mismatches == [] and r.error == 0, r.mismatches
            loads.append(backend.last_loaded)
    assert loads == [True, True, False, False, False]


@pytest.mark.parametrize("cut", ["reset", "cut_in_weights", "cut_in_program"])
def test_reset_or_cut_load_is_found_and_reloaded(board, cut):
    a = _model(3)
    r, _, rp = _run(board.port, _program(a, 11))
    assert r.mismatches == []
    with BoardLink(board.port, 1_000_000, TIMEOUT) as link:
        link.identify(CFG)
        if cut == "reset":
            link.control(reset=True)
        else:     # a load that stopped (a frame with a bad CRC is not acted upon: the same)
            steps = rp.load.steps
            store = next(i for i, s in enumerate(steps) if s.fields["op"] == 7 and
                         s.fields["flags"] == 1)
            k = 3 if cut == "cut_in_weights" else store + 5
            link.run(Program(CFG, steps[:k]))
    r, loaded, _ = _run(board.port, _program(a, 12))
    assert r.mismatches == [] and r.error == 0 and loaded


def test_make_resident_fits_this_board():
    rp = make_resident(_program(_model(1), 0))
    assert rp.streamed_tiles == 0 and rp.stored_words > 0


def test_tpugen_run_reports_the_resident_model(board, tmp_path):
    """``tpugen run`` twice with the same operands: the first connection loads the model, the
    second finds it on the board (its CHECK_TAG passes) and sends only the input."""
    rng = np.random.default_rng(8)
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, rng.integers(-128, 128, (3, 10)).astype(np.int8))
    np.save(b, rng.integers(-128, 128, (10, 6)).astype(np.int8))
    reports = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "tpugen.cli", "run", "--port", board.port,
                               "--baud", "1000000", "--timeout", str(TIMEOUT), "--a", str(a),
                               "--b", str(b), "--json"], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout))
    first, second = (r["resident"] for r in reports)
    assert first["loaded"] and not second["loaded"]
    assert first["weight_bytes"] == second["weight_bytes"] == 3 * 2 * 16   # 3 x 2 tiles
    assert reports[1]["bytes_to_board"] < reports[0]["bytes_to_board"] - first["weight_bytes"]
