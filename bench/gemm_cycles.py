"""Cycle counts of GEMMs on the core (RTL simulation), against the ideal and SCALE-Sim's model.

For each configuration, all shapes run in one simulator process (Verilator by default). The
first is the default ``Config`` buffers (ub_rows 1024, acc_rows 512) on a 16 x 16 array, whose
256^3 GEMM must stay within 3 % of ideal; then larger buffers, 8 x 8, a non-square array and a
GEMM far larger than the buffers (40 x 5000 x 9 on 4 x 4). Prints a table of total cycles
(first command beat to last result beat, host never stalling), ideal cycles ceil(M*K*N / (R*C)),
the SCALE-Sim weight-stationary estimate ceil(K/R)*ceil(N/C)*(2R+C+M-2)-1, and the ratios;
writes build/bench/cycles.png (utilization against M).

    python bench/gemm_cycles.py [--backend verilator|icarus|amaranth] [--quick]
                           [--operand int8,int4,bf16,fp8_e4m3,fp8_e5m2]

``--operand`` runs the plan once per operand type listed (random operands of each: integers
over the range, floats as ``tpugen.simulate.random_operands`` makes them); the results are
checked bit for bit against the golden model.
"""

import argparse
import sys
import time

import numpy as np

from tpugen.backends import get_backend
from tpugen.compiler import compile_gemm
from tpugen.hdl.config import Config
from tpugen.sim.cache import build_root
from tpugen.sim.float_golden import same_bits
from tpugen.sim.ideal_cycles import ideal_cycles, scalesim_cycles
from tpugen.sim.reference import gemm_reference
from tpugen.simulate import random_operands


def plan(quick):
    """(config, [(M, K, N)]) per configuration; the M sweep feeds the plot."""
    sweep = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    default = Config(rows=16, cols=16)
    shapes_default = [(256, 256, 256), (512, 512, 512), (100, 70, 50)]
    big = Config(rows=16, cols=16, ub_rows=8192, acc_rows=1024)
    shapes16 = [(256, 256, 256), (16, 256, 256), (1, 256, 256), (100, 70, 50)]
    shapes16 += [(m, 128, 128) for m in sweep if (m, 128, 128) not in shapes16]
    small = Config(rows=8, cols=8, ub_rows=4096, acc_rows=1024)
    shapes8 = [(64, 64, 64), (8, 64, 64), (1, 64, 64), (100, 70, 50)]
    shapes8 += [(m, 64, 64) for m in sweep if (m, 64, 64) not in shapes8]
    wide = Config(rows=4, cols=12, ub_rows=4096, acc_rows=1024)
    shapesw = [(64, 64, 64), (4, 64, 64), (1, 64, 64)]
    streamed = Config(rows=4, cols=4)
    if quick:
        return [(small, shapes8[:4])]
    return [(default, shapes_default), (big, shapes16), (small, shapes8), (wide, shapesw),
            (streamed, [(40, 5000, 9)])]


def _buffers(cfg):
    """The buffer sizes as the table shows them: ``ub/acc`` rows."""
    return f"{cfg.ub_rows}/{cfg.acc_rows}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="verilator", choices=["verilator", "icarus", "amaranth"])
    ap.add_argument("--quick", action="store_true", help="one small array, four shapes")
    ap.add_argument("--operand", default="int8",
                    help="comma-separated operand types to run the plan with (default int8)")
    args = ap.parse_args()
    out_dir = build_root() / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'operand':>8} {'array':>7} {'UB/ACC':>9} {'M x K x N':>15} {'cycles':>8} "
          f"{'ideal':>8} {'SCALE-Sim':>9} {'cyc/ideal':>9} {'cyc/SCALE':>9} {'util %':>7}  check")
    runs = [(cfg.replace(operand=op), shapes) for op in args.operand.split(",")
            for cfg, shapes in plan(args.quick)]
    for cfg, shapes in runs:
        progs, refs = [], []
        for m, k, n in shapes:
            a, b = random_operands(cfg, m, k, n, int(rng.integers(1 << 31)))
            cg = compile_gemm(cfg, a, b)
            progs.append(cg)
            refs.append(gemm_reference(cfg, a, b))
        t0 = time.monotonic()
        results = get_backend(args.backend, cfg).run_many([p.program for p in progs])
        wall = time.monotonic() - t0
        for (m, k, n), cg, ref, res in zip(shapes, progs, refs, results, strict=True):
            got = cg.decode(res.host_out)
            same = (same_bits(got.view(np.uint32), ref.view(np.uint32)).all()
                    if got.dtype == np.float32 else np.array_equal(got, ref))
            ok = not res.mismatches and same
            r, c = cfg.rows, cfg.cols
            row = {"operand": cfg.operand, "array": f"{r}x{c}", "buffers": _buffers(cfg),
                   "m": m, "k": k, "n": n,
                   "cycles": res.cycles,
                   "ideal": ideal_cycles(cfg, m, k, n), "scalesim": scalesim_cycles(cfg, m, k, n),
                   "ok": ok}
            rows.append(row)
            print(f"{cfg.operand:>8} {row['array']:>7} {row['buffers']:>9} "
                  f"{f'{m} x {k} x {n}':>15} {res.cycles:8d} "
                  f"{row['ideal']:8d} {row['scalesim']:9d} "
                  f"{res.cycles / row['ideal']:9.3f} {res.cycles / row['scalesim']:9.3f} "
                  f"{100 * row['ideal'] / res.cycles:7.1f}  {'PASS' if ok else 'FAIL'}",
                  flush=True)
        print(f"  ({len(shapes)} GEMMs on {args.backend} in {wall:.0f} s)")
    target = [x for x in rows if x["array"] == "16x16" and (x["m"], x["k"], x["n"]) ==
              (256, 256, 256)]
    for t in target:
        within = t["cycles"] <= 1.03 * t["ideal"]
        print(f"256^3 on 16x16 ({t['operand']}), UB/ACC rows {t['buffers']}: "
              f"{t['cycles']} cycles = "
              f"{100 * (t['cycles'] / t['ideal'] - 1):.2f} % over ideal "
              f"({'within' if within else 'OUTSIDE'} the 3 % target; SCALE-Sim's model says "
              f"{t['scalesim']})")
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
    first = rows[0]["operand"] if rows else None
    for array, buffers in sorted({(x["array"], x["buffers"]) for x in rows}):
        sweep = [x for x in rows if (x["array"], x["buffers"]) == (array, buffers)
                 and x["k"] == x["n"] and x["operand"] == first]
        if len(sweep) > 2:
            label = f"{array} (UB/ACC {buffers})"
            pts = sorted((x["m"], x["ideal"] / x["cycles"]) for x in sweep)
            ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], "o-", label=label)
            sim_pts = sorted((x["m"], x["ideal"] / x["scalesim"]) for x in sweep)
            ax.plot([p[0] for p in sim_pts], [100 * p[1] for p in sim_pts], ":",
                    label=f"{label} SCALE-Sim model")
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
