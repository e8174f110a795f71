"""Engine timelines (``sim.trace``): the state records' reconstruction on hand-made records, the
model's schedule (``sim.trace_model``), the trace-event JSON, the Gantt chart and the
``--trace`` / ``--timeline`` options (the RTL's traces: ``test_trace_rtl.py``)."""

import json

import numpy as np
import pytest

from tpugen import cli
from tpugen.compiler import compile_gemm
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.controller import PROBE_LAYOUT, PROBE_WAITS
from tpugen.sim import trace as tr
from tpugen.sim.program import Program
from tpugen.sim.requant import QuantParams
from tpugen.sim.trace_model import ENGINE, model_trace
from tpugen.sim.traffic import program_traffic

CFG = Config(rows=4, cols=4)
TRACK_OF = {0: {"host-in", "weight load"}, 1: {"matmul"}, 2: {"activate"}, 3: {"host-out"}}


def _gemm_program(m=20, k=12, n=9, cfg=CFG, out=None):
    rng = np.random.default_rng(3)
    a, b = rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (k, n))
    quant = {} if out is None else {"quant": QuantParams(
        bias=np.zeros(n, dtype=np.int64), multiplier=1 << 30, shift=-3, out_zp=0, act_min=-128,
        act_max=127)}
    return compile_gemm(cfg, a, b, out=out, **quant).program


def check_trace_json(doc: dict, program) -> dict:
    """The trace-event JSON ``doc`` of one run of ``program`` (a ``Program``, or the words the
    core ran): the standard fields, the slices' nesting per track, and every instruction
    exactly once, with its op, in program order per engine. Returns ``{track: [instruction
    indices]}``."""
    words = program.words() if isinstance(program, Program) else list(program)
    events = doc["traceEvents"]
    assert all({"name", "ph", "pid", "tid"} <= set(e) for e in events)
    slices = [e for e in events if e["ph"] == "X"]
    assert slices and all(isinstance(e["ts"], int) and e["dur"] >= 0 for e in slices)
    seen, per_track = [], {}
    for e in (e for e in events if e.get("cat") == "instruction"):
        assert "ts" in e and (e["ph"] == "i" or "dur" in e)
        ids = e["args"]["instructions"]
        assert len(ids) == e["args"]["count"]
        ops = {isa.decode(words[k])["op"] for k in ids}
        assert len(ops) == 1 and e["args"]["op"] == tr._op_name(ops.pop())
        seen += ids
        per_track.setdefault(tr.TRACKS[e["tid"]], []).extend(ids)
    assert sorted(seen) == list(range(len(words)))
    for ids in per_track.values():
        assert ids == sorted(ids)            # each engine runs its instructions in order
    by_tid = {}
    for e in slices:
        by_tid.setdefault(e["tid"], []).append(e)
    for tid, evs in by_tid.items():          # slices on one track nest or follow each other
        stack = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            assert not stack or e["ts"] + e["dur"] <= stack[-1], (tr.TRACKS[tid], e)
            stack.append(e["ts"] + e["dur"])
    return per_track


# --- the reconstruction from state records --------------------------------------------------
def _state(busy=(), issue=False, drop=False, held=False, feed=False, hi_wait=False,
           draining=False, waits=(), ho_wait=False, cmd_wait=False) -> int:
    o = {k: PROBE_LAYOUT[k].offset - tr.PROBE_STATE_LO
         for k in ("busy", "issue", "drop", "held", "feed", "hi_wait", "draining", "wait")}
    s = sum(1 << (o["busy"] + e) for e in busy)
    s |= issue << o["issue"] | drop << o["drop"] | held << o["held"] | feed << o["feed"]
    s |= hi_wait << o["hi_wait"] | draining << o["draining"]
    s |= sum(1 << (o["wait"] + PROBE_WAITS.index(w)) for w in waits)
    return s | ho_wait << tr.HOST_OUT_WAIT_BIT | cmd_wait << tr.CMD_WAIT_BIT


def test_from_states_rebuilds_the_engines_from_the_records():
    p = Program(CFG)
    p.read_host(0, np.ones((3, 4), dtype=np.int64))            # 0: host-in, 3 beats
    p.read_weights(np.ones((1, 4, 4), dtype=np.int64))        # 1: weight load
    p.nop()                                                    # 2: no engine
    p.matmul(0, 0, 3, new_tile=True)                           # 3: matmul
    p.sync()                                                   # 4: host-out
    records = [
        (0, 0),
        (2, _state(issue=True)),                               # 0 issues
        (3, _state(busy=[0], hi_wait=True, held=True, waits=["engine"])),  # 0 starts, 1 waits
        (4, _state(busy=[0], held=True, waits=["engine"])),
        (7, _state(held=True, waits=["engine"])),              # 0 done
        (8, _state(issue=True)),                               # 1 issues
        (9, _state(busy=[0], issue=True)),                     # 1 starts, 2 (NOP) issues
        (10, _state(busy=[0], held=True, waits=["hi_ub"])),    # 3 waits for the UB rows
        (13, _state(issue=True)),                              # 1 done at 13, 3 issues
        (14, _state(busy=[1], feed=True)),
        (17, _state(busy=[1])),
        (19, _state(draining=True, held=True, waits=["quiet"])),
        (22, _state(issue=True)),                              # 4 issues
        (23, _state(busy=[3], ho_wait=True)),
        (25, _state(busy=[3])),
        (26, 0),
    ]
    c, s = zip(*records, strict=True)
    run = tr.from_states(p, np.array(c), np.array(s), 29, name="hand")
    assert run.problems == []
    got = [(j.index, j.track, j.start, j.end) for j in run.jobs]
    assert got == [(0, "host-in", 3, 7), (1, "weight load", 9, 13),
                   (2, "issue (controller)", 9, 9), (3, "matmul", 14, 19),
                   (4, "host-out", 23, 26)]
    assert run.jobs[0].waits == [[3, 4, "host-in data"]]
    assert run.jobs[3].feed == 3 and run.jobs[4].waits == [[23, 25, "host takes host-out"]]
    assert run.issue_waits == [[3, 8, 1, ("engine",)], [10, 13, 3, ("hi_ub",)],
                               [19, 22, 4, ("quiet",)]]
    t = run.totals
    assert (t["busy_host-in"], t["busy_matmul"], t["busy_host-out"]) == (8, 5, 3)
    assert (t["array_busy"], t["host_in_stall"], t["host_out_stall"]) == (3, 1, 2)
    assert (t["issued"], t["held"], t["draining"], run.cycles) == (5, 11, 3, 30)
    doc = json.loads(json.dumps(_one_run_trace(run).to_dict()))
    check_trace_json(doc, p)


def _one_run_trace(run):
    t = tr.Trace("test")
    t.add(run)
    return t


def test_from_states_reports_what_it_cannot_place():
    p = Program(CFG).nop().nop()
    run = tr.from_states(p, np.array([0, 3]), np.array([0, _state(busy=[1])]), 5)
    assert len(run.problems) == 2         # an engine with no issue; 0 of 2 issued


# --- the model's schedule ---------------------------------------------------------------------
@pytest.mark.parametrize("out", [None, "int8"])
def test_model_schedule_runs_every_instruction_in_order(out):
    program = _gemm_program(out=out)
    run = model_trace(program, name="gemm")
    assert [j.index for j in run.jobs] == list(range(len(program)))
    assert [j.word for j in run.jobs] == program.words()
    traffic = program_traffic(program)
    assert run.totals["array_busy"] == traffic.matmul_rows
    assert run.totals["busy_host-in"] == traffic.host_in_beats
    for j in run.jobs:
        engine = ENGINE.get(isa.decode(j.word)["op"])
        assert j.track in (TRACK_OF[engine] if engine is not None else {"issue (controller)"})
    for track in {j.track for j in run.jobs} - {"issue (controller)"}:
        on = [j for j in run.jobs if j.track == track]
        assert all(a.end <= b.start for a, b in zip(on, on[1:], strict=False))   # in turn
    issues = [w[1] for w in run.issue_waits]
    assert issues == sorted(issues)
    doc = json.loads(json.dumps(_one_run_trace(run).to_dict()))
    check_trace_json(doc, program)


def test_merging_keeps_every_instruction_and_shrinks_the_trace():
    program = _gemm_program(64, 64, 64)
    run = model_trace(program)
    merged, plain = tr.Trace(), tr.Trace(merge=False)
    merged.add(run)
    plain.add(run)
    m, p = merged.to_dict(), plain.to_dict()
    check_trace_json(m, program)
    check_trace_json(p, program)
    assert len(m["traceEvents"]) < 0.8 * len(p["traceEvents"])
    assert max(e["args"]["count"] for e in m["traceEvents"] if e.get("cat") == "instruction") > 8
    sums = [sum(e["args"].get("busy_cycles", 0) for e in d["traceEvents"]
                if e.get("cat") == "instruction") for d in (m, p)]
    assert sums[0] == sums[1] == sum(j.end - j.start for j in run.jobs)


def test_runs_are_laid_end_to_end_and_labelled():
    t = tr.Trace("two")
    for _ in range(2):
        t.add(model_trace(_gemm_program(8, 8, 8)))
    t.label(["first", "second"])
    spans = [e for e in t.events() if e.get("cat") == "program"]
    assert [s["name"] for s in spans] == ["first", "second"]
    assert spans[1]["ts"] == spans[0]["ts"] + spans[0]["dur"]


def test_timeline_png(tmp_path):
    from tpugen.sim.trace_plot import plot, utilization
    t = tr.Trace("png")
    t.add(model_trace(_gemm_program()))
    plot(t, tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    x, array, engines = utilization(t, bins=10)
    width = t.runs[0].cycles / 10
    assert array.sum() * width == pytest.approx(t.runs[0].totals["array_busy"])
    assert engines["matmul"].sum() * width == pytest.approx(t.runs[0].totals["busy_matmul"])


# --- the command line ------------------------------------------------------------------------
def _run(capsys, *args):
    status = cli.main([str(a) for a in args])
    return status, capsys.readouterr()


def test_sim_model_trace_and_timeline(capsys, tmp_path):
    status, out = _run(capsys, "sim", "--backend", "model", "--rows", 4, "--cols", 4, "--m", 20,
                       "--k", 12, "--n", 9, "--trace", tmp_path / "t.json", "--timeline",
                       tmp_path / "t.png", "--json")
    assert status == 0
    report = json.loads(out.out)
    assert report["trace"]["file"] == str(tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["otherData"]["runs"][0]["source"] == "model"
    assert (tmp_path / "t.png").stat().st_size > 0


@pytest.mark.parametrize("args, message", [
    (["--trace", "t.txt"], "--trace t.txt: the file name must end in .json"),
    (["--timeline", "t.json"], "--timeline t.json: the file name must end in .png"),
    (["--backend", "icarus", "--trace", "t.json"], "the icarus backend gives no timeline"),
    (["--trace", "no/such/dir/t.json"], "does not exist"),
])
def test_trace_options_are_checked_first(capsys, args, message):
    status, out = _run(capsys, "sim", "--rows", 4, "--cols", 4, *args)
    assert status != 0 and message in out.err


def test_infer_trace_has_a_span_per_program_named_after_its_layers(capsys, tmp_path):
    from tpugen.tflite.writer import ModelWriter
    rng = np.random.default_rng(5)
    mw = ModelWriter()
    x = mw.input((1, 6, 6, 2), 0.05, 4)
    y = mw.conv2d(x, rng.integers(-127, 128, (3, 3, 3, 2)), rng.integers(-500, 500, 3),
                  rng.uniform(0.001, 0.02, 3), 0.04, -2, stride=2, padding="SAME",
                  activation="RELU")
    y = mw.fully_connected(y, rng.integers(-127, 128, (4, 27)), None, 0.01, 0.05, 0)
    (tmp_path / "m.tflite").write_bytes(mw.build(y))
    np.save(tmp_path / "x.npy", rng.integers(-128, 128, (1, 6, 6, 2)).astype(np.int8))
    status, out = _run(capsys, "infer", tmp_path / "m.tflite", "--input", tmp_path / "x.npy",
                       "--rows", 4, "--cols", 4, "--trace", tmp_path / "t.json")
    assert status == 0, out.err
    doc = json.loads((tmp_path / "t.json").read_text())
    spans = [e for e in doc["traceEvents"] if e.get("cat") == "program"]
    assert spans and all(s["name"].startswith("chain ") for s in spans)
    assert "trace        " in out.out
    status, out = _run(capsys, "infer", tmp_path / "m.tflite", "--input", tmp_path / "x.npy",
                       "--rows", 4, "--cols", 4, "--traffic")
    assert status == 0 and "MACs" in out.out and " nJ on chip" in out.out


def test_programs_traffic_adds_up():
    from tpugen.simulate import programs_traffic
    a, b = _gemm_program(8, 8, 8), _gemm_program(20, 12, 9)
    t = programs_traffic([a, b])
    ta, tb = program_traffic(a), program_traffic(b)
    assert t.macs == ta.macs + tb.macs and t.host_in_bytes == ta.host_in_bytes + tb.host_in_bytes
    assert t.instructions == len(a) + len(b) and t.rows == 4


def test_link_trace_times_each_frame_of_a_board_run():
    class FakeBoard:
        def request(self, ftype, payload=b""):
            return b"reply"

        def run(self, program):
            self.request(1, b"reset")
            self.request(2, b"program frame")
            return type("R", (), {"counters": {"cycles": 100, "array_busy": 10}})()

    board, t = FakeBoard(), tr.Trace("board")
    with tr.LinkTrace(board, {"clk_freq": 1e6}, t, Program(CFG)) as frames:
        result = board.run(None)
    frames.finish(result)
    assert "request" not in vars(board)             # the board's own method again
    (run,) = t.runs
    assert [s["args"]["bytes_out"] for s in run.link] == [5, 13]
    assert run.source == "board" and run.counters["array_busy"] == 10
    events = json.loads(json.dumps(t.to_dict()))["traceEvents"]
    assert sum(e.get("cat") == "link" for e in events) == 2
