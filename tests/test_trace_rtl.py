"""Traces from the compiled Verilator harness (``sim.trace.from_states``) against the run: per
engine the busy cycles in the trace equal the hardware counters, the instructions appear once
each in program order on the engines the ISA gives them, the JSON loads with ``json`` and has
the trace-event fields; and the traffic counted from the program (``sim.traffic``) equals what
the RTL did."""

import json

import numpy as np
import pytest
from test_trace import _gemm_program, check_trace_json

from tpugen import cli
from tpugen.backends.harness import HarnessBackend
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.program import Program
from tpugen.sim.trace import TRACKS, Trace
from tpugen.sim.trace_model import ENGINE, executed_words
from tpugen.sim.traffic import program_traffic

CFG = Config(rows=4, cols=4)
#: With a weight memory and a program memory: tests/test_resident_rtl.py's (one build for both).
CFG_MEM = Config(rows=4, cols=4, ub_rows=64, acc_rows=64, weight_tiles=48, program_words=256,
                 quant_sets=8)
TRACK_OF = {0: {"host-in", "weight load"}, 1: {"matmul"}, 2: {"activate"}, 3: {"host-out"}}


_BACKENDS = {}


def _backend(config):
    if config not in _BACKENDS:
        _BACKENDS[config] = HarnessBackend(config)
    return _BACKENDS[config]


@pytest.fixture(scope="module")
def backend():
    return _backend(CFG)


def _traced(backend, program, **kw):
    tracer = Trace("test")
    backend.tracer = tracer
    try:
        result = backend.run(program, **kw)
    finally:
        backend.tracer = None
    assert len(tracer.runs) == 1
    return result, tracer.runs[0], tracer


def _mixed_program() -> Program:
    """Every engine, the quantization path, a WRITE_HOST from UB, READ_COUNTERS and a dropped
    instruction."""
    rng = np.random.default_rng(5)
    p = Program(CFG)
    p.read_host(0, rng.integers(-128, 128, (6, 4)))
    p.read_weights(rng.integers(-128, 128, (2, 4, 4)))
    from test_trace import QuantParams
    p.read_quant(0, [QuantParams(bias=np.zeros(4, dtype=np.int64), multiplier=1 << 30,
                                 shift=-3, out_zp=0, act_min=-128, act_max=127)])
    p.matmul(0, 0, 6, new_tile=True)
    p.matmul(0, 0, 6, accumulate=True, new_tile=True)
    p.activate(0, 8, 6, qset=0)
    p.write_host(8, 6)
    p.raw(isa.encode(isa.Op.MATMUL, src=0, dst=0, n=0))          # dropped at issue
    p.nop()
    p.write_host(0, 3, from_acc=True)
    p.read_counters()
    return p


def _resident_program() -> Program:
    """Weight memory and program memory: tiles stored, then a stored body CALLed (the core runs
    the body's words after the CALL word; the STORE's words are not run)."""
    rng = np.random.default_rng(6)
    body = Program(CFG_MEM)
    body.load_weights(0, 1).matmul(0, 0, 6, new_tile=True)
    body.load_weights(1, 1).matmul(0, 0, 6, accumulate=True, new_tile=True)
    body.write_host(0, 6, from_acc=True)
    p = Program(CFG_MEM)
    p.store_weights(0, rng.integers(-128, 128, (2, 4, 4)))
    p.read_host(0, rng.integers(-128, 128, (6, 4)))
    p.store_program(0, body).call(0, len(body)).call(3, 2).sync()
    return p


CASES = {
    "gemm": lambda: _gemm_program(),
    "gemm_int8": lambda: _gemm_program(out="int8"),
    "mixed": _mixed_program,
    "resident": _resident_program,
}


@pytest.mark.parametrize("stalls", [(0.0, 0.0, 0.0), (0.2, 0.3, 0.3)],
                         ids=["full_rate", "stalls"])
@pytest.mark.parametrize("case", list(CASES))
def test_trace_equals_the_run(tmp_path, case, stalls):
    program = CASES[case]()
    result, run, tracer = _traced(_backend(program.config), program, stalls=stalls, seed=3)
    assert not result.mismatches and run.problems == []
    c = result.counters
    path = tmp_path / "t.json"
    tracer.write_json(path)
    with open(path) as f:
        doc = json.load(f)                      # the standard module reads it
    runs = executed_words(program)              # the program's words (CALLs expanded)
    per_track = check_trace_json(doc, runs)     # fields, nesting, each instruction once
    events = [e for e in doc["traceEvents"] if e.get("cat") in ("instruction", "wait")]

    def args_sum(key, cat="instruction"):
        return sum(e["args"].get(key, 0) for e in events if e["cat"] == cat)

    # Per engine, the busy cycles in the trace equal the hardware's counters.
    assert args_sum("array_cycles") == c["array_busy"] == run.totals["array_busy"]
    # Stream waits: child slices of the instruction that waited (or alone on the engine's
    # track when none ran), and summed in the instruction's args.
    hi_wait, ho_wait = (sum(e["args"]["cycles"] for e in events if e["name"] == f"waits: {k}")
                        for k in ("host-in data", "host takes host-out"))
    assert args_sum("wait host-in data") <= hi_wait and args_sum(
        "wait host takes host-out") <= ho_wait
    assert hi_wait == c["host_in_stall"] == run.totals["host_in_stall"]
    assert ho_wait == c["host_out_stall"] == run.totals["host_out_stall"]
    assert run.cycles == c["cycles"]
    if stalls == (0.0, 0.0, 0.0):
        assert c["host_in_stall"] == c["host_out_stall"] == 0
    # Each engine's busy cycles: the slices' sums equal the per-cycle totals.
    for k, engine in enumerate(("host-in", "matmul", "activate", "host-out")):
        tracks = {tid for tid, name in TRACKS.items() if name in TRACK_OF[k]}
        assert sum(e["args"]["busy_cycles"] for e in events if e["cat"] == "instruction"
                   and e["tid"] in tracks) == run.totals[f"busy_{engine}"]
    # Instruction count and order equal the program's; each op on the ISA's engine.
    assert len(run.jobs) == len(runs) == c["retired"]
    assert [j.word for j in run.jobs] == runs
    for j in run.jobs:
        f = isa.decode(j.word)
        engine = ENGINE.get(f["op"]) if not j.dropped else (
            0 if isa.has_host_data(f["op"]) else None)
        assert j.track in (TRACK_OF[engine] if engine is not None else {"issue (controller)"})
    assert sum(map(len, per_track.values())) == len(runs)
    issue_order = [w[2] for w in run.issue_waits]
    assert issue_order == sorted(issue_order)


@pytest.mark.parametrize("case", ["gemm", "gemm_int8", "mixed"])
def test_traffic_equals_the_rtl(backend, case):
    """``sim.traffic``'s counts from the program alone equal the RTL's: MATMUL rows (UB rows
    the array reads) the ARRAY_BUSY counter, host-in beats the host-in engine's busy cycles
    less its stalls (one beat a cycle), host-out beats the beats the harness took, executed
    instructions the RETIRED counter, ACTIVATE rows the activation engine's busy cycles."""
    program = CASES[case]()
    t = program_traffic(program)
    for stalls in ((0.0, 0.0, 0.0), (0.3, 0.3, 0.3)):
        result, run, _ = _traced(backend, program, stalls=stalls, seed=11)
        c = result.counters
        assert c["array_busy"] == t.matmul_rows
        assert run.totals["busy_host-in"] - c["host_in_stall"] == t.host_in_beats
        assert len(result.host_out) == t.host_out_beats
        assert c["retired"] == t.instructions
        activate_rows = sum(isa.decode(j.word)["n"] for j in run.jobs
                            if j.track == "activate")
        assert activate_rows == t.acc_read_rows - sum(
            isa.decode(j.word)["n"] for j in run.jobs
            if isa.decode(j.word)["op"] == isa.Op.WRITE_HOST
            and isa.decode(j.word)["flags"] & isa.Flag.FROM_ACC)
        assert run.totals["busy_activate"] >= activate_rows


def test_sim_verilator_trace_and_timeline(capsys, tmp_path):
    status = cli.main(["sim", "--backend", "verilator", "--rows", "4", "--cols", "4", "--m",
                       "24", "--k", "16", "--n", "12", "--trace", str(tmp_path / "t.json"),
                       "--timeline", str(tmp_path / "t.png"), "--json"])
    out = capsys.readouterr().out
    assert status == 0
    report = json.loads(out)
    with open(tmp_path / "t.json") as f:
        doc = json.load(f)
    run = doc["otherData"]["runs"][0]
    assert run["source"] == "rtl" and run["counters"] == report["counters"]
    assert run["totals"]["array_busy"] == report["counters"]["array_busy"]
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow      # a board build of its own and every UART bit simulated (make test-slow)
def test_run_on_the_simulated_board_traces_the_link(tmp_path):
    import subprocess
    import sys

    from test_board_run import CFG as BOARD_CFG
    from test_board_run import PARAMS

    from tpugen.tb.simboard import SimulatedBoardTop
    with SimulatedBoardTop(BOARD_CFG, sim="verilator", **PARAMS) as board:
        out = subprocess.run(
            [sys.executable, "-m", "tpugen.cli", "run", "--port", board.port, "--timeout",
             "120", "--m", "9", "--k", "6", "--n", "5", "--trace", str(tmp_path / "t.json"),
             "--timeline", str(tmp_path / "t.png"), "--json"],
            capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    with open(tmp_path / "t.json") as f:
        doc = json.load(f)
    link = [e for e in doc["traceEvents"] if e.get("cat") == "link"]
    assert len(link) >= 2            # the CONTROL reset and the PROGRAM frames
    assert sum(e["args"]["bytes_out"] + e["args"]["bytes_in"] for e in link) > 0
    assert doc["otherData"]["runs"][0]["counters"] == report["counters"]
    assert report["trace"]["file"] == str(tmp_path / "t.json")
    assert (tmp_path / "t.png").stat().st_size > 0
