"""The golden model's schedule of a program, as a timeline (``tpugen.sim.trace.RunTrace``).

The golden model (``sim.machine``) has no time; this is the schedule the controller's rules
give with ideal engines (an estimate, not the RTL: ``tpugen sim --backend verilator --trace``
gives the cycle-exact timeline). Instructions issue in program order, at most one a cycle, the
engine starting the cycle after; an instruction issues when

- its engine (``ENGINE``: host-in, matmul, activate, host-out) is free,
- no in-flight instruction of another engine touches its rows in a conflicting way
  (``hdl.isa.conflict``: read after write, write after read, write after write) and, for the
  ACC rows a MATMUL writes, its results have left the array (``array_latency`` cycles after it
  ends: the drain),
- READ_QUANT and ACTIVATE do not overlap (the parameter sets), and SYNC / READ_COUNTERS wait
  for everything before them to finish, then 2 cycles (the hardware's ``quiet`` flag).

An engine takes one beat or row a cycle, with no stalls: READ_HOST ``n`` cycles, READ_WEIGHTS
``n * R``, READ_QUANT ``12 n``, MATMUL ``n + 2``, ACTIVATE ``n * ceil(C / act lanes)``,
WRITE_HOST ``n``, SYNC 1, READ_COUNTERS ``COUNTER_BEATS``. An instruction the word alone makes
illegal (``isa.static_cause``) is dropped at issue (one with host data keeps the host-in engine
for its beats). PROGRAM words need no engine; a STORE's words are not run, a CALL runs the
program memory's words after it (``executed_words``).
"""

from tpugen.hdl import isa
from tpugen.hdl.array import array_latency
from tpugen.hdl.config import Config
from tpugen.sim.program import Program
from tpugen.sim.trace import ENGINES, Job, RunTrace, engine_track

__all__ = ["ENGINE", "duration", "executed_words", "model_trace"]

Op = isa.Op
#: The engine (index into ``tpugen.sim.trace.ENGINES``) of each op; others need none.
ENGINE = {Op.READ_HOST: 0, Op.READ_WEIGHTS: 0, Op.READ_QUANT: 0, Op.STORE_WEIGHTS: 0,
          Op.LOAD_WEIGHTS: 0, Op.MATMUL: 1, Op.ACTIVATE: 2, Op.WRITE_HOST: 3, Op.SYNC: 3,
          Op.READ_COUNTERS: 3}
#: The wait reason (``tpugen.sim.trace.WAIT_TEXT``) of a conflict with an op's job, by buffer.
_REASON = {(Op.READ_HOST, isa.Buffer.UB): "hi_ub", (Op.ACTIVATE, isa.Buffer.UB): "av_ub",
           (Op.ACTIVATE, isa.Buffer.ACC): "av_acc", (Op.MATMUL, isa.Buffer.UB): "mm_ub",
           (Op.MATMUL, isa.Buffer.ACC): "mm_acc", (Op.WRITE_HOST, isa.Buffer.UB): "ho",
           (Op.WRITE_HOST, isa.Buffer.ACC): "ho"}
#: Cycles from the last engine's end to a SYNC / READ_COUNTERS issue.
QUIET = 2
#: The matmul engine's cycles beyond its n rows.
MATMUL_OVERHEAD = 2


def duration(f: dict, config: Config) -> int:
    """Cycles the engine of decoded instruction ``f`` is busy (module docstring)."""
    op, n = f["op"], f.get("n", 0)
    if op == Op.MATMUL:
        return n + MATMUL_OVERHEAD
    if op == Op.ACTIVATE:
        return n * -(-config.cols // config.activation_lanes)
    if op == Op.LOAD_WEIGHTS:
        return n * config.rows
    if op in ENGINE:
        return max(1, isa.host_in_beats(f, config) + isa.host_out_beats(f, config))
    return 0


def executed_words(program: Program, pmem: dict | None = None) -> list[int]:
    """The words the core runs for ``program``, in order: a PROGRAM STORE's n words go into the
    program memory ``pmem`` (``{word index: word}``, kept across runs by the caller), a CALL
    runs its words from there (after the CALL word itself)."""
    pmem = {} if pmem is None else pmem
    out, store = [], None                     # store: [next index, words left]
    for word in program.words():
        if store is not None:
            pmem[store[0]] = word
            store[0] += 1
            store[1] -= 1
            if not store[1]:
                store = None
            continue
        out.append(word)
        f = isa.decode(word)
        if f["op"] != Op.PROGRAM or isa.static_cause(f, program.config) != isa.Cause.NONE:
            continue
        if f["flags"] & isa.Flag.TAG:
            continue
        if f["flags"] & isa.Flag.STORE:
            store = [f["dst"], f["n"]] if f["n"] else None
        else:
            out += [pmem.get(k, 0) for k in range(f["src"], f["src"] + f["n"])]
    return out


def model_trace(program: Program, *, name: str = "program", pmem: dict | None = None) -> RunTrace:
    """The model's schedule of ``program`` (module docstring; ``pmem``: the program memory,
    ``executed_words``)."""
    cfg = program.config
    drain = array_latency(cfg)
    free = [0] * len(ENGINES)                 # cycle each engine is free from
    inflight = []                             # (op, accesses, end, acc_free)
    jobs, waits = [], []
    totals = dict.fromkeys([f"busy_{e}" for e in ENGINES] + [
        "array_busy", "host_in_stall", "host_out_stall", "cmd_wait", "held", "draining",
        "issued", "dropped"], 0)
    drains, feed = [], []
    t = 0                                     # the earliest issue cycle of the next one
    last_end = 0
    for k, word in enumerate(executed_words(program, pmem)):
        f = isa.decode(word)
        op = f["op"]
        dropped = isa.static_cause(f, cfg) != isa.Cause.NONE
        engine = ENGINE.get(op) if not dropped else (0 if isa.has_host_data(op) else None)
        ready = {"issue": t}
        if engine is not None:
            ready["engine"] = free[engine]
        if not dropped:
            acc = isa.accesses(f, cfg)
            for j_op, j_acc, j_end, j_acc_free in inflight:
                if j_end <= t or ENGINE.get(j_op) == engine:
                    continue
                if isa.conflict(acc, j_acc):
                    buf = next(b for b, lo, hi, w in acc for b2, lo2, hi2, w2 in j_acc
                               if b == b2 and (w or w2) and lo < hi2 and lo2 < hi)
                    why = _REASON.get((Op(j_op), buf), "engine")
                    end = j_acc_free if (j_op == Op.MATMUL and buf == isa.Buffer.ACC) else j_end
                    if why == "mm_acc" and end > j_end:
                        why = "drain"
                    ready[why] = max(ready.get(why, 0), end)
            if op in (Op.READ_QUANT, Op.ACTIVATE):
                other = Op.ACTIVATE if op == Op.READ_QUANT else Op.READ_QUANT
                ready["quant"] = max([e for o, _, e, _ in inflight if o == other], default=0)
            if op in (Op.SYNC, Op.READ_COUNTERS):
                ready["quiet"] = max([last_end, *(a for *_, a in inflight)]) + QUIET
        issue = max(ready.values())
        if issue > t:
            reasons = tuple(r for r, v in ready.items() if v == issue and r != "issue")
            waits.append([t, issue, k, reasons])
            totals["held"] += issue - t
        t = issue + 1
        totals["issued"] += 1
        totals["dropped"] += dropped
        if engine is None:
            jobs.append(Job(k, word, "issue (controller)", issue, issue, dropped=dropped))
            continue
        start = issue + 1
        d = duration(f, cfg) if not dropped else max(1, isa.host_in_beats(f, cfg))
        end = start + d
        free[engine] = end + 1                # busy drops, then the next one can issue
        last_end = max(last_end, end)
        job = Job(k, word, engine_track(engine, op), start, end, dropped=dropped)
        totals[f"busy_{ENGINES[engine]}"] += d
        if op == Op.MATMUL and not dropped:
            job.feed = f["n"]
            totals["array_busy"] += f["n"]
            feed.append([start, start + f["n"]])
            drains.append([end, end + drain])
            totals["draining"] += drain
        jobs.append(job)
        if not dropped:
            inflight.append((op, isa.accesses(f, cfg), end,
                             end + drain if op == Op.MATMUL else end))
            inflight = [x for x in inflight if x[3] > issue]
    cycles = max([t, last_end, *(d[1] for d in drains)]) + 1
    run = RunTrace(name=name, source="model", cycles=cycles, jobs=jobs, issue_waits=[
        [s, e, k, r] for s, e, k, r in waits], drains=drains, feed=feed, totals=totals,
        counters={"retired": len(jobs)})
    return run
