"""Simulation speed of the generated core, per array size and harness; writes a PNG.

For each R x R array: the Verilator model's own clocking rate (the harness's ``--bare`` loop:
idle inputs, no harness work: the bound of any harness), the compiled harness running a GEMM of
about a million cycles (cycles per CPU second of its cycle loop, and the whole
``Accelerator.matmul``: compile, golden model, simulate, check, in wall and CPU seconds),
optionally the cocotb harness (its marginal rate between a small and a larger GEMM, per CPU
second), and the build time (first build, or the cached build's reuse). Rates are per CPU second
so that other processes on the machine do not skew them.

    python bench/simspeed.py                      # sizes 4 8 16
    python bench/simspeed.py --sizes 4 8 16 32 64 --cocotb 4 8 --rebuild --png build/simspeed.png
"""

import argparse
import resource
import shutil
import sys
import time

import numpy as np

from tpugen.accelerator import Accelerator
from tpugen.backends.cocotb_sim import CocotbBackend
from tpugen.backends.harness import HarnessBackend
from tpugen.compiler import compile_gemm
from tpugen.hdl.config import Config
from tpugen.sim.cache import build_root


def gemm_size(r: int, cycles: float = 1e6) -> int:
    """M = K = N of a GEMM of about ``cycles`` ideal cycles on an r x r array (<= 1024)."""
    n = int(round((cycles * r * r) ** (1 / 3) / r)) * r
    return max(r, min(1024, n))


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (not skewed by other load)."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def measure(r: int, *, rebuild: bool, cocotb: bool, threads: int, log) -> dict:
    config = Config(rows=r, cols=r)
    backend = HarnessBackend(config, threads=threads)
    if rebuild:
        shutil.rmtree(build_root() / "verilator" / config.name, ignore_errors=True)
    t0 = time.monotonic()
    harness = backend.build()
    build_s = time.monotonic() - t0     # wall time: make runs on every core
    bare = harness.bare_rate(max(20_000, int(2e6 / r)))
    n = gemm_size(r)
    rng = np.random.default_rng(1)
    a, b = rng.integers(-128, 128, (n, n)), rng.integers(-128, 128, (n, n))
    acc = Accelerator(config, "verilator")
    acc.backend = backend
    t0, c0 = time.monotonic(), cpu_seconds()
    acc.matmul(a, b)
    wall, cpu = time.monotonic() - t0, cpu_seconds() - c0
    rep = acc.last
    if not rep.passed:
        raise SystemExit(f"{r}x{r}: the GEMM FAILED: {rep.lines()}")
    cycles, seconds = backend.last_sim_time[0]
    row = dict(size=r, build_s=build_s, cached=build_s < 5, bare=bare,
               harness=cycles / seconds, gemm=n, gemm_cycles=rep.cycles, wall=wall, cpu=cpu)
    if cocotb:
        # The marginal rate: a large and a tiny GEMM, so that the simulator's start-up and
        # cocotb's set-up cancel out; CPU time of the simulator processes.
        cb = CocotbBackend(config, "verilator")
        cb.build()
        spent = []
        for m in (r, 8 * r):
            p = compile_gemm(config, rng.integers(-128, 128, (m, m)),
                             rng.integers(-128, 128, (m, m))).program
            c0 = cpu_seconds()
            (res,) = cb.run_many([p])
            spent.append((res.cycles, cpu_seconds() - c0))
        (c1, s1), (c2, s2) = spent
        row["cocotb"] = (c2 - c1) / (s2 - s1)
    log(row)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--cocotb", type=int, nargs="*", default=[],
                    help="sizes at which to time the cocotb harness too")
    ap.add_argument("--rebuild", action="store_true", help="time first builds (drop caches)")
    ap.add_argument("--threads", type=int, default=1, help="Verilator --threads")
    ap.add_argument("--png", help="write a plot here")
    args = ap.parse_args(argv)
    rows = [measure(r, rebuild=args.rebuild, cocotb=r in args.cocotb, threads=args.threads,
                    log=lambda row: print(row, file=sys.stderr, flush=True))
            for r in args.sizes]
    print(f"{'array':>7} {'build s':>8} {'bare c/s':>10} {'harness c/s':>12} {'ratio':>6} "
          f"{'cocotb c/s':>11} {'GEMM':>6} {'cycles':>9} {'wall s':>7} {'CPU s':>6}")
    for x in rows:
        cb = f"{x['cocotb']:11.0f}" if "cocotb" in x else f"{'-':>11}"
        build = f"{x['build_s']:7.1f}" + ("c" if x["cached"] else " ")
        print(f"{x['size']:>3}x{x['size']:<3} {build} {x['bare']:10.0f} {x['harness']:12.0f} "
              f"{x['harness'] / x['bare']:6.2f} {cb} {x['gemm']:>5}^3 {x['gemm_cycles']:9d} "
              f"{x['wall']:7.1f} {x['cpu']:6.1f}")
    print("build s: first build, or 'c' when a cached build was reused (--rebuild to time "
          "first builds); harness c/s: the compiled harness's cycle loop on the GEMM; wall s / "
          "CPU s: the whole Accelerator.matmul (compile, golden model, simulate, check)")
    if args.png:
        import matplotlib  # deferred: only this plot needs it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        sizes = [x["size"] for x in rows]
        ax.plot(sizes, [x["bare"] for x in rows], "o-", label="Verilator model alone")
        ax.plot(sizes, [x["harness"] for x in rows], "s-", label="compiled harness")
        cs = [(x["size"], x["cocotb"]) for x in rows if "cocotb" in x]
        if cs:
            ax.plot(*zip(*cs, strict=True), "^-", label="cocotb harness")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{s}x{s}" for s in sizes])
        ax.set_xlabel("array")
        ax.set_ylabel("cycles per second")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
