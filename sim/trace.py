"""Engine timelines of runs, as Chrome / Perfetto trace-event JSON.

A ``Trace`` collects runs (``RunTrace``: one program's run) and writes them with ``write_json``
(and ``tpugen.sim.trace_plot.plot`` draws them). Runs are laid end to end on one time axis, one
microsecond of the trace per clock cycle. Where a run comes from:

- **the compiled Verilator harness** (``from_states``): the harness samples the core's probe
  port (``hdl.controller.PROBE_LAYOUT``: the instruction word in the issue register, each
  engine's busy flag, the issue strobe, the wait reasons of the instruction held in the issue
  register, the array's input and host-in stalls, the MATMUL drain) and the host-out and
  command streams every cycle in C++, and writes the cycles in which that state changed, and
  each issue with its word (``tb.verilator_harness.read_trace``). The timeline is rebuilt from
  those records alone, cycle-exact: instruction ``k`` is the ``k``-th issue (the core issues
  in order: the program's words, or for a CALL the program memory's words it runs); its
  engine is the one whose busy flag rises in the next cycle (an engine starts the cycle after
  its instruction issues), and its slice lasts while that flag stays up. No rise: an
  instruction that needs no engine (NOP, PROGRAM, a dropped one).
- **the golden model** (``tpugen.sim.trace_model``): the model's schedule, an estimate.
- **a board** (``tpugen.backends.board``): the link's frames, timed on the host.

Tracks (``TRACKS``): the program (one span per run, named after the program or the network's
layers), the command stream (the host holding back commands), the controller's issue register
(its waits: which interlock, ``WAIT_TEXT``), host-in, weight load (READ_WEIGHTS, STORE_WEIGHTS
and LOAD_WEIGHTS on the host-in engine), matmul, the MATMUL drain, activate, host-out, and the
link. Each slice's ``args`` hold the instruction's index and fields, its busy cycles and,
inside it, the stream waits (host-in data not there, the host not taking host-out beats) as
child slices. Repeated instructions merge (``merge``): slices on one track of the same op,
flags and ``n`` whose gaps are at most ``MERGE_GAP`` cycles become one slice whose
``args.instructions`` lists them all, so a 1024^3 GEMM's trace stays a few MB.
"""

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.controller import PROBE_LAYOUT, PROBE_WAITS
from tpugen.sim.program import Program

__all__ = ["PROBE_STATE_LO", "HOST_OUT_WAIT_BIT", "CMD_WAIT_BIT", "STATE_BITS", "ENGINES", "TRACKS",
           "WAIT_TEXT", "MERGE_GAP", "Job", "RunTrace", "Trace", "from_states", "engine_track",
           "LinkTrace"]

#: The probe's bits that make a state word (all but the instruction word): from this offset.
PROBE_STATE_LO = PROBE_LAYOUT["busy"].offset
#: The harness's state bits: the probe's from ``PROBE_STATE_LO`` on, then a host-out beat waits
#: for the host's ready, then the host holds back a command it has (command-stream stalls).
HOST_OUT_WAIT_BIT = PROBE_LAYOUT.size - PROBE_STATE_LO
CMD_WAIT_BIT = HOST_OUT_WAIT_BIT + 1
STATE_BITS = HOST_OUT_WAIT_BIT + 2

#: The engines in the probe's ``busy`` bit order.
ENGINES = ("host-in", "matmul", "activate", "host-out")

#: The host-in engine's ops shown on the weight-load track.
_WEIGHT_OPS = {int(op) for op in isa.Op if "WEIGHTS" in op.name}

#: Track ids (``tid``) and names, in display order.
TRACKS = {0: "program", 1: "command stream", 2: "issue (controller)", 3: "host-in",
          4: "weight load", 5: "matmul", 6: "MATMUL drain", 7: "activate", 8: "host-out",
          9: "link"}
_TID = {name: tid for tid, name in TRACKS.items()}

#: What each wait reason of the probe (``hdl.controller.PROBE_WAITS``) means.
WAIT_TEXT = {
    "engine": "its engine is busy",
    "hi_ub": "UB rows a READ_HOST writes",
    "av_ub": "UB rows an ACTIVATE writes",
    "mm_ub": "UB rows a MATMUL reads",
    "ho": "rows a WRITE_HOST reads",
    "mm_acc": "ACC rows of a running MATMUL",
    "av_acc": "ACC rows / read port of an ACTIVATE",
    "drain": "MATMUL results still on their way to the ACC",
    "quant": "the parameter sets (READ_QUANT / ACTIVATE)",
    "quiet": "everything before it to finish (SYNC / READ_COUNTERS)",
}

#: Slices of the same kind on one track with gaps of at most this many cycles merge.
MERGE_GAP = 16

_OFF = {name: PROBE_LAYOUT[name].offset - PROBE_STATE_LO for name in
        ("busy", "issue", "drop", "held", "feed", "hi_wait", "draining", "wait")}
_BUSY, _ISSUE, _DROP = 0xF << _OFF["busy"], 1 << _OFF["issue"], 1 << _OFF["drop"]
_HELD, _FEED, _HI_WAIT = 1 << _OFF["held"], 1 << _OFF["feed"], 1 << _OFF["hi_wait"]
_DRAIN, _WAIT_LO = 1 << _OFF["draining"], _OFF["wait"]
_WAIT_MASK = ((1 << len(PROBE_WAITS)) - 1) << _WAIT_LO
_HO_WAIT, _CMD_WAIT = 1 << HOST_OUT_WAIT_BIT, 1 << CMD_WAIT_BIT


def engine_track(engine: int | None, op: int) -> str:
    """The track of an instruction of ``op`` on ``engine`` (an index into ``ENGINES``)."""
    if engine is None:
        return "issue (controller)"
    if engine == 0:
        return "weight load" if op in _WEIGHT_OPS else "host-in"
    return ENGINES[engine]


_OP_NAMES = {int(op): op.name for op in isa.Op}


def _op_name(op: int) -> str:
    return _OP_NAMES.get(op, f"op {op}")


@functools.lru_cache(maxsize=1 << 16)
def _decoded(word: int) -> tuple:
    """``isa.decode(word)`` as ``(op, flags, n, items)`` (cached: a trace decodes each word a
    few times)."""
    f = isa.decode(word)
    return f["op"], f["flags"], f.get("n"), tuple(f.items())


@dataclass
class Job:
    """One instruction on its track: ``index`` in the program, ``word``, cycles ``start`` ..
    ``end`` (exclusive), ``feed`` (cycles an activation vector entered the array: MATMUL),
    ``waits`` (``[kind, start, end]``: the streams it waited for), ``dropped``."""

    index: int
    word: int
    track: str
    start: int
    end: int
    feed: int = 0
    waits: list = field(default_factory=list)
    dropped: bool = False

    @property
    def fields(self) -> dict:
        f = dict(_decoded(self.word)[3])
        f["op"] = _op_name(f["op"])
        return f


@dataclass
class RunTrace:
    """One program's run: ``jobs`` (every instruction, program order), ``issue_waits`` (``[index,
    start, end, reasons]``: the instruction held in the issue register and why, ``WAIT_TEXT``
    keys), ``drains`` and ``cmd_waits`` (``[start, end]``), ``feed`` (``[start, end]`` of the
    cycles the array took a vector), ``cycles`` (the run's length), ``totals`` (cycles per kind:
    ``busy_<engine>``, ``array_busy``, ``host_in_stall``, ``host_out_stall``, ``cmd_wait``,
    ``held``, ``draining``; ``issued``, ``dropped``), ``counters`` (the hardware's, when
    known), ``source`` (``rtl``, ``model``, ``board``) and ``name``."""

    name: str
    source: str
    cycles: int
    jobs: list
    issue_waits: list = field(default_factory=list)
    drains: list = field(default_factory=list)
    cmd_waits: list = field(default_factory=list)
    feed: list = field(default_factory=list)
    totals: dict = field(default_factory=dict)
    counters: dict = field(default_factory=dict)
    link: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    loose_waits: dict = field(default_factory=dict)
    records: int = 0


def _bits(mask: int):
    k = 0
    while mask:
        if mask & 1:
            yield k
        mask >>= 1
        k += 1


def _extend(spans: list, start: int, end: int) -> None:
    """Append ``[start, end]`` to ``spans``, joining the last one when it ends at ``start``."""
    if spans and spans[-1][1] == start:
        spans[-1][1] = end
    else:
        spans.append([start, end])


def _extend_with(spans: list, start: int, end: int, *extra) -> None:
    """``_extend`` of ``[start, end, *extra]``: joined only when ``extra`` is the same."""
    if spans:
        last = spans[-1]
        if last[1] == start and tuple(last[2:]) == extra:
            last[1] = end
            return
    spans.append([start, end, *extra])


_BITS4 = [[e for e in range(4) if m >> e & 1] for m in range(16)]


@functools.lru_cache(maxsize=4096)
def _state_info(st: int) -> tuple:
    """What a state word says, decoded once per distinct state: ``(busy mask, busy engines,
    issue, drop, held, reasons, feed, hi_wait, ho_wait, cmd_wait, draining)``."""
    busy = (st & _BUSY) >> _OFF["busy"]
    reasons = tuple(PROBE_WAITS[b] for b in range(len(PROBE_WAITS)) if st >> (_WAIT_LO + b) & 1)
    return (busy, _BITS4[busy], bool(st & _ISSUE), bool(st & _DROP), bool(st & _HELD), reasons,
            bool(st & _FEED), bool(st & _HI_WAIT), bool(st & _HO_WAIT), bool(st & _CMD_WAIT),
            bool(st & _DRAIN))


def from_states(program: Program, cycles: np.ndarray, states: np.ndarray, end_cycle: int, *,
                words: np.ndarray | None = None, name: str = "program",
                counters: dict | None = None) -> RunTrace:
    """A run's timeline from the harness's state records (module docstring): ``cycles[i]``
    (ascending) is the cycle from which the state is ``states[i]`` (``STATE_BITS`` bits), up to
    the next record, and ``words[i]`` the instruction word in the issue register then (the
    harness writes a record for each issue). Without ``words``, the k-th issue is ``program``'s
    k-th word. The run ends in ``end_cycle``."""
    program_words = program.words()
    record_words = None if words is None else np.asarray(words, dtype=np.uint64).tolist()
    n_words = len(program_words)
    ends = np.append(np.asarray(cycles[1:], dtype=np.int64), end_cycle + 1).tolist()
    starts = np.asarray(cycles, dtype=np.int64).tolist()
    states = np.asarray(states, dtype=np.int64).tolist()
    jobs, issue_waits, drains, cmd_waits, feed = [], [], [], [], []
    current = [None] * len(ENGINES)
    loose = {0: [], 3: []}           # stream waits with no job on their engine
    busy_cycles = [0] * len(ENGINES)
    n_feed = n_hi = n_ho = n_cmd = n_held = n_drain = n_dropped = 0
    problems = []
    issued, last_issue = 0, None      # last_issue: (index, cycle) of the latest issue
    pbusy = 0
    ISSUE = "issue (controller)"

    for i, (c0, c1, st) in enumerate(zip(starts, ends, states, strict=True)):
        n = c1 - c0
        if n <= 0:
            continue
        (busy, on, issue, drop, held, reasons, f_feed, f_hi, f_ho, f_cmd,
         f_drain) = _state_info(st)
        if busy != pbusy:
            for e in _BITS4[pbusy & ~busy]:
                if current[e] is not None:
                    current[e].end = c0
                    current[e] = None
            for e in _BITS4[busy & ~pbusy]:
                if last_issue is None or last_issue[1] != c0 - 1:
                    problems.append(f"cycle {c0}: the {ENGINES[e]} engine started with no "
                                    f"issue the cycle before")
                    continue
                job = jobs[last_issue[0]]
                job.track, job.start = engine_track(e, _decoded(job.word)[0]), c0
                current[e] = job
            pbusy = busy
        if issue:
            for k in range(issued, issued + n):
                t = c0 + k - issued
                if record_words is not None:
                    w = record_words[i]
                else:
                    w = program_words[k] if k < n_words else 0
                jobs.append(Job(k, w, ISSUE, t, t, dropped=drop))
            issued += n
            if drop:
                n_dropped += n
            last_issue = (issued - 1, c1 - 1)
        if held:
            _extend_with(issue_waits, c0, c1, issued, reasons)
            n_held += n
        for e in on:
            busy_cycles[e] += n
            if current[e] is not None:
                current[e].end = c1
        if f_feed:
            n_feed += n
            _extend(feed, c0, c1)
            if current[1] is not None:
                current[1].feed += n
        if f_hi:
            n_hi += n
            owner = current[0]
            _extend_with(owner.waits if owner is not None else loose[0], c0, c1,
                         "host-in data")
        if f_ho:
            n_ho += n
            owner = current[3]
            _extend_with(owner.waits if owner is not None else loose[3], c0, c1,
                         "host takes host-out")
        if f_cmd:
            n_cmd += n
            _extend(cmd_waits, c0, c1)
        if f_drain:
            n_drain += n
            _extend(drains, c0, c1)
    totals = {**{f"busy_{e}": busy_cycles[k] for k, e in enumerate(ENGINES)},
              "array_busy": n_feed, "host_in_stall": n_hi, "host_out_stall": n_ho,
              "cmd_wait": n_cmd, "held": n_held, "draining": n_drain, "issued": issued,
              "dropped": n_dropped}
    if record_words is None and issued != n_words:
        problems.append(f"{issued} instructions issued, the program has {n_words}")
    run = RunTrace(name=name, source="rtl", cycles=end_cycle + 1, jobs=jobs,
                   issue_waits=issue_waits, drains=drains, cmd_waits=cmd_waits, feed=feed,
                   totals=totals, counters=dict(counters or {}), problems=problems)
    run.loose_waits = {ENGINES[e]: w for e, w in loose.items()}
    run.records = len(starts)
    return run


# --- the trace-event JSON --------------------------------------------------------------------
def _slice(name, tid, ts, dur, args=None, cat="instruction") -> dict:
    ev = {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": tid}
    if args:
        ev["args"] = args
    return ev


def _merged_jobs(jobs: list, merge: bool) -> list[list[Job]]:
    """Jobs grouped per track: runs of the same op, flags and n with gaps <= MERGE_GAP."""
    groups, last = [], {}
    for job in sorted(jobs, key=lambda j: (j.start, j.index)):
        key = (*_decoded(job.word)[:3], job.dropped)
        prev = last.get(job.track)
        if (merge and prev is not None and prev[0] == key
                and job.start - prev[1][-1].end <= MERGE_GAP
                and prev[1][-1].end > prev[1][-1].start and job.end > job.start):
            prev[1].append(job)
            continue
        g = [job]
        groups.append(g)
        last[job.track] = (key, g)
    return groups


def _group_events(group: list[Job], offset: int) -> list[dict]:
    """The events of one slice of ``group`` (jobs merged by ``_merged_jobs``): the slice (or an
    instant for a job without cycles) and its stream waits as children."""
    first, lastj = group[0], group[-1]
    f = first.fields
    name = f["op"] + (" (dropped)" if first.dropped else "")
    if len(group) == 1:
        args = {"instructions": [first.index], "count": 1, **f,
                "busy_cycles": first.end - first.start}
        if f["op"] == "MATMUL":
            args["array_cycles"] = first.feed
        waits = first.waits
    else:
        name += f" x{len(group)}"
        args = {"instructions": [j.index for j in group], "count": len(group), **f,
                "busy_cycles": sum([j.end for j in group]) - sum([j.start for j in group]),
                "last": lastj.fields}
        if f["op"] == "MATMUL":
            args["array_cycles"] = sum([j.feed for j in group])
        waits = [w for j in group for w in j.waits]
    tid = _TID[first.track]
    if first.end == first.start and len(group) == 1:
        return [{"name": name, "cat": "instruction", "ph": "i", "s": "t",
                 "ts": offset + first.start, "pid": 1, "tid": tid, "args": args}]
    out = [_slice(name, tid, offset + first.start, lastj.end - first.start, args)]
    if not waits:
        return out
    for kind in sorted({w[2] for w in waits}):
        args[f"wait {kind}"] = sum(w[1] - w[0] for w in waits if w[2] == kind)
    merged = []
    for w in sorted(waits):
        if merged and merged[-1][2] == w[2] and w[0] - merged[-1][1] <= MERGE_GAP:
            merged[-1][1], merged[-1][3] = w[1], merged[-1][3] + w[1] - w[0]
        else:
            merged.append([w[0], w[1], w[2], w[1] - w[0]])
    for s, e, kind, cyc in merged:
        out.append(_slice(f"waits: {kind}", tid, offset + s, e - s, {"cycles": cyc}, "wait"))
    return out


def _spans_events(spans, tid, offset, name_of, args_of, cat) -> list[dict]:
    """Slices of ``spans`` (``[start, end, ...]``), those of one name with gaps of at most
    ``MERGE_GAP`` cycles merged."""
    out, merged = [], []
    for s in spans:
        name = name_of(s)
        if merged and merged[-1][3] == name and s[0] - merged[-1][2] <= MERGE_GAP:
            merged[-1][1].append(s)
            merged[-1][2] = s[1]
        else:
            merged.append([s, [s], s[1], name])
    for first, group, end, name in merged:
        out.append(_slice(name, tid, offset + first[0], end - first[0], args_of(group), cat))
    return out


def run_events(run: RunTrace, offset: int, *, merge: bool = True) -> list[dict]:
    """The trace events of ``run``, its cycle 0 at ``offset``."""
    ev = [_slice(run.name, _TID["program"], offset, run.cycles,
                 {"source": run.source, "cycles": run.cycles, "instructions": len(run.jobs),
                  **({"counters": run.counters} if run.counters else {}),
                  **({"problems": run.problems} if run.problems else {})}, "program")]
    for group in _merged_jobs(run.jobs, merge):
        ev += _group_events(group, offset)

    @functools.cache
    def wait_text(reasons):
        return "waits for " + (", ".join(WAIT_TEXT.get(r, r) for r in reasons) or "issue")

    def wait_name(w):
        return wait_text(w[3])

    def wait_args(group):
        ids = [w[2] for w in group]
        return {"instructions": [k for i, k in enumerate(ids) if not i or ids[i - 1] != k],
                "reasons": list(group[0][3]), "cycles": sum(w[1] - w[0] for w in group)}

    ev += _spans_events(run.issue_waits, _TID["issue (controller)"], offset, wait_name,
                        wait_args, "wait")
    ev += _spans_events(run.cmd_waits, _TID["command stream"], offset,
                        lambda s: "waits: host holds back commands",
                        lambda g: {"cycles": sum(s[1] - s[0] for s in g)}, "wait")
    ev += _spans_events(run.drains, _TID["MATMUL drain"], offset,
                        lambda s: "results to the accumulators",
                        lambda g: {"cycles": sum(s[1] - s[0] for s in g)}, "drain")
    for engine, spans in getattr(run, "loose_waits", {}).items():
        ev += _spans_events(spans, _TID[engine], offset, lambda s: f"waits: {s[2]}",
                            lambda g: {"cycles": sum(s[1] - s[0] for s in g)}, "wait")
    for s in run.link:
        ev.append(_slice(s["name"], _TID["link"], offset + s["start"], s["end"] - s["start"],
                         s.get("args"), "link"))
    return ev


class Trace:
    """Runs to write as one trace (module docstring): ``add(run)``; ``label(names)`` renames the
    runs added since ``mark()`` (a network's layers)."""

    def __init__(self, title: str = "tpugen", *, merge: bool = True):
        self.title = title
        self.merge = merge
        self.runs: list[RunTrace] = []
        self.next_name = None
        self._mark = 0

    def add(self, run: RunTrace) -> None:
        self.runs.append(run)

    def name(self, default: str) -> str:
        """The name of the next run: ``next_name`` (then cleared) or ``default``."""
        name, self.next_name = self.next_name, None
        return name or default

    def mark(self) -> None:
        self._mark = len(self.runs)

    def label(self, names) -> None:
        for run, name in zip(self.runs[self._mark:], names, strict=False):
            run.name = name

    def offsets(self) -> list[int]:
        out, t = [], 0
        for run in self.runs:
            out.append(t)
            t += run.cycles
        return out

    def events(self) -> list[dict]:
        meta = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                 "args": {"name": self.title}}]
        for tid, name in TRACKS.items():
            meta += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                      "args": {"name": name}},
                     {"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid,
                      "args": {"sort_index": tid}}]
        out = []
        for run, off in zip(self.runs, self.offsets(), strict=True):
            out += run_events(run, off, merge=self.merge)
        return meta + out

    def to_dict(self) -> dict:
        return {"traceEvents": self.events(),
                "otherData": {"tool": "tpugen", "title": self.title,
                              "time_unit": "1 us of the trace = 1 clock cycle",
                              "runs": [{"name": r.name, "source": r.source, "cycles": r.cycles,
                                        "totals": r.totals, "counters": r.counters}
                                       for r in self.runs]}}

    def write_json(self, path) -> int:
        """Write the trace-event JSON to ``path``; returns its size in bytes."""
        text = json.dumps(self.to_dict(), separators=(",", ":"))
        Path(path).write_text(text)
        return len(text)

    def summary(self) -> dict:
        """Totals over the runs (``RunTrace.totals`` summed; ``cycles``)."""
        out = {"runs": len(self.runs), "cycles": sum(r.cycles for r in self.runs)}
        for r in self.runs:
            for k, v in r.totals.items():
                out[k] = out.get(k, 0) + v
        return out


# --- a board's link ---------------------------------------------------------------------------
class LinkTrace:
    """``with LinkTrace(board, info, tracer, program) as frames: result = board.run(program)``
    then ``frames.finish(result)``: times each request frame of a ``BoardLink`` run on the host
    (its ``request`` wrapped for the run) and adds the run to ``tracer``, on the link track, in
    the board's clock cycles (``info["clk_freq"]``), with the board's counters."""

    def __init__(self, board, info: dict, tracer: Trace, program: Program):
        self.board, self.tracer, self.program = board, tracer, program
        self.clk = float(info.get("clk_freq") or 1e6)
        self.frames = []

    def __enter__(self):
        import time
        inner = self.board.request
        self.t0 = time.monotonic()

        def request(ftype, payload=b""):
            t = time.monotonic()
            reply = inner(ftype, payload)
            self.frames.append((t, time.monotonic(), int(ftype), len(payload), len(reply)))
            return reply

        self.board.request = request
        return self

    def __exit__(self, *exc):
        del self.board.request          # the class's method again
        return False

    def finish(self, result) -> None:
        def cyc(t):
            return int(round((t - self.t0) * self.clk))
        link = [{"name": f"frame {k}: type {ft}", "start": cyc(a), "end": max(cyc(b), cyc(a) + 1),
                 "args": {"frame": k, "type": ft, "bytes_out": n_out, "bytes_in": n_in,
                          "seconds": round(b - a, 6)}}
                for k, (a, b, ft, n_out, n_in) in enumerate(self.frames)]
        cycles = max([1, *(s["end"] for s in link)])
        counters = {k: int(v) for k, v in getattr(result, "counters", {}).items()}
        run = RunTrace(name=self.tracer.name("board run"), source="board", cycles=cycles,
                       jobs=[], link=link, counters=counters,
                       totals={"array_busy": counters.get("array_busy", 0),
                               "frames": len(link)})
        self.tracer.add(run)
