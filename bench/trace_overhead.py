"""What tracing costs: a GEMM on the compiled Verilator harness with and without ``--trace``.

Runs the same prepared GEMM (compiled once, outside the timing) on the ``verilator`` backend,
alternately without and with a tracer, ``--reps`` times each, and prints the best wall and CPU
seconds of each (CPU: this process and its children, so other load on the machine skews it
less), the overhead, the trace's records and the JSON file's size. The traced time includes
everything a user of ``--trace`` waits for: the harness sampling the engines every cycle,
reading its records, rebuilding the timeline and writing the JSON. The issue's target: at most
10 % more wall time for a 1024^3 GEMM on 16 x 16, a trace file below 100 MB.

    python bench/trace_overhead.py                          # 1024^3 on 16 x 16 (a few minutes)
    python bench/trace_overhead.py --size 256 --rows 8      # quicker
    python bench/trace_overhead.py --png build/gemm1024.png # also draw the timeline
"""

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tpugen.accelerator import Accelerator
from tpugen.hdl.config import Config
from tpugen.sim.trace import Trace


def cpu_seconds() -> float:
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def timed_run(acc: Accelerator, job, trace_path: Path | None) -> dict:
    tracer = Trace(f"{job.shape[0]}^3 GEMM") if trace_path else None
    acc.backend.tracer = tracer
    t0, c0 = time.monotonic(), cpu_seconds()
    acc.execute(job)
    size = tracer.write_json(trace_path) if tracer else 0
    out = {"wall": time.monotonic() - t0, "cpu": cpu_seconds() - c0, "bytes": size,
           "cycles": acc.last.result.cycles, "tracer": tracer}
    if tracer:
        run = tracer.runs[0]
        out["records"] = run.records
        out["events"] = len(tracer.events())
    acc.backend.tracer = None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024, help="M = K = N")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--png", help="also draw the traced run's timeline to this PNG")
    args = ap.parse_args(argv)
    cfg = Config(rows=args.rows, cols=args.rows)
    rng = np.random.default_rng(1)
    n = args.size
    a, b = rng.integers(-128, 128, (n, n)), rng.integers(-128, 128, (n, n))
    acc = Accelerator(cfg, "verilator")
    acc.backend.build()
    job = acc.prepare(a, b)
    plain, traced = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        for _ in range(args.reps):
            plain.append(timed_run(acc, job, None))
            traced.append(timed_run(acc, job, path))
            print(f"  run: {plain[-1]['wall']:.2f} s ({plain[-1]['cpu']:.2f} s CPU) plain, "
                  f"{traced[-1]['wall']:.2f} s ({traced[-1]['cpu']:.2f} s CPU) traced",
                  file=sys.stderr, flush=True)
    best = {k: min(r[k] for r in plain) for k in ("wall", "cpu")}
    bt = {k: min(r[k] for r in traced) for k in ("wall", "cpu")}
    t = traced[-1]
    print(f"# tracing a {n} x {n} x {n} GEMM on {args.rows} x {args.rows} "
          f"({t['cycles']:,} cycles, {len(job.compiled.program):,} instructions), best of "
          f"{args.reps}")
    print("| | wall s | CPU s |")
    print("| --- | --- | --- |")
    print(f"| without --trace | {best['wall']:.2f} | {best['cpu']:.2f} |")
    print(f"| with --trace | {bt['wall']:.2f} | {bt['cpu']:.2f} |")
    print(f"| overhead | {100 * (bt['wall'] / best['wall'] - 1):+.1f} % | "
          f"{100 * (bt['cpu'] / best['cpu'] - 1):+.1f} % |")
    print(f"trace: {t['records']:,} state records from the harness, {t['events']:,} events, "
          f"{t['bytes'] / 1e6:.1f} MB of JSON")
    print("runs (wall / CPU s): plain " + ", ".join(f"{r['wall']:.1f} / {r['cpu']:.1f}"
                                                   for r in plain)
          + "; traced " + ", ".join(f"{r['wall']:.1f} / {r['cpu']:.1f}" for r in traced))
    if args.png:
        from tpugen.sim.trace_plot import plot
        plot(t["tracer"], args.png)
        print(f"timeline: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
