"""Cycle counts of GEMMs on the core (RTL simulation), against the ideal and SCALE-Sim's model.

For each array size, all shapes run in one simulator process (Verilator by default). Prints a
table of total cycles (first command beat to last result beat, host never stalling), ideal cycles
ceil(M*K*N / (R*C)), the SCALE-Sim weight-stationary estimate ceil(K/R)*ceil(N/C)*(2R+C+M-2)-1,
and the ratios; writes build/bench/cycles.png (utilization against M).

    python bench/cycles.py [--backend verilator|icarus|amaranth] [--quick]
"""

import argparse
import sys
import time

import numpy as np

from tpugen.backends import get_backend
from tpugen.hdl.config import Config
from tpugen.sim.cache import build_root
from tpugen.sim.compiler import compile_gemm, gemm_reference
from tpugen.sim.cycles import ideal_cycles, scalesim_cycles


def plan(quick):
    """(config, [(M, K, N)]) per array size; the M sweep feeds the plot."""
    sweep = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    big = Config(rows=16, cols=16, ub_rows=8192, acc_rows=1024)
    shapes16 = [(256, 256, 256), (16, 256, 256), (1, 256, 256), (100, 70, 50)]
    shapes16 += [(m, 128, 128) for m in sweep if (m, 128, 128) not in shapes16]
    small = Config(rows=8, cols=8, ub_rows=4096, acc_rows=1024)
    shapes8 = [(64, 64, 64), (8, 64, 64), (1, 64, 64), (100, 70, 50)]
    shapes8 += [(m, 64, 64) for m in sweep if (m, 64, 64) not in shapes8]
    wide = Config(rows=4, cols=12, ub_rows=4096, acc_rows=1024)
    shapesw = [(64, 64, 64), (4, 64, 64), (1, 64, 64)]
    if quick:
        return [(small, shapes8[:4])]
    return [(big, shapes16), (small, shapes8), (wide, shapesw)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="verilator", choices=["verilator", "icarus", "amaranth"])
    ap.add_argument("--quick", action="store_true", help="one small array, four shapes")
    args = ap.parse_args()
    out_dir = build_root() / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'array':>7} {'M x K x N':>15} {'cycles':>8} {'ideal':>8} {'SCALE-Sim':>9} "
          f"{'cyc/ideal':>9} {'cyc/SCALE':>9} {'util %':>7}  check")
    for cfg, shapes in plan(args.quick):
        progs, refs = [], []
        for m, k, n in shapes:
            a = rng.integers(-128, 128, (m, k))
            b = rng.integers(-128, 128, (k, n))
            cg = compile_gemm(cfg, a, b)
            progs.append(cg)
            refs.append(gemm_reference(cfg, a, b))
        t0 = time.monotonic()
        results = get_backend(args.backend, cfg).run_many([p.program for p in progs])
        wall = time.monotonic() - t0
        for (m, k, n), cg, ref, res in zip(shapes, progs, refs, results, strict=True):
            ok = not res.mismatches and np.array_equal(cg.decode(res.host_out), ref)
            r, c = cfg.rows, cfg.cols
            row = {"array": f"{r}x{c}", "m": m, "k": k, "n": n, "cycles": res.cycles,
                   "ideal": ideal_cycles(cfg, m, k, n), "scalesim": scalesim_cycles(cfg, m, k, n),
                   "ok": ok}
            rows.append(row)
            print(f"{row['array']:>7} {f'{m} x {k} x {n}':>15} {res.cycles:8d} "
                  f"{row['ideal']:8d} {row['scalesim']:9d} "
                  f"{res.cycles / row['ideal']:9.3f} {res.cycles / row['scalesim']:9.3f} "
                  f"{100 * row['ideal'] / res.cycles:7.1f}  {'PASS' if ok else 'FAIL'}",
                  flush=True)
        print(f"  ({len(shapes)} GEMMs on {args.backend} in {wall:.0f} s)")
    target = [x for x in rows if x["array"] == "16x16" and (x["m"], x["k"], x["n"]) ==
              (256, 256, 256)]
    if target:
        t = target[0]
        within = t["cycles"] <= 1.03 * t["ideal"]
        print(f"256^3 on 16x16: {t['cycles']} cycles = {100 * (t['cycles'] / t['ideal'] - 1):.2f}"
              f" % over ideal ({'within' if within else 'OUTSIDE'} the 3 % target; "
              f"SCALE-Sim's model says {t['scalesim']})")
    _plot(rows, out_dir)
    return 0 if all(x["ok"] for x in rows) else 1


def _plot(rows, out_dir):
    # matplotlib is a dev extra, deferred: the table is the result, the plot an extra.
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: skipped (matplotlib is not installed: pip install -e '.[dev]')")
        return
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for array in sorted({x["array"] for x in rows}):
        pts = sorted((x["m"], x["ideal"] / x["cycles"]) for x in rows
                     if x["array"] == array and x["k"] == x["n"])
        if len(pts) > 2:
            ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], "o-", label=array)
            sim_pts = sorted((x["m"], x["ideal"] / x["scalesim"]) for x in rows
                             if x["array"] == array and x["k"] == x["n"])
            ax.plot([p[0] for p in sim_pts], [100 * p[1] for p in sim_pts], ":",
                    label=f"{array} SCALE-Sim model")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M (rows of A)")
    ax.set_ylabel("utilization, % of ideal")
    ax.set_ylim(0, 105)
    ax.set_title("tpugen core: GEMM utilization against M (RTL cycles)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "cycles.png", dpi=100)
    print(f"plot: {out_dir / 'cycles.png'}")


if __name__ == "__main__":
    sys.exit(main())
