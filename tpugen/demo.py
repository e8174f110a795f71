"""``make demo``: generate the core, run a GEMM that is not a multiple of the array on a
simulator, compare it with NumPy, report."""

import time

from tpugen.hdl.config import Config

from .simulate import run_sim

__all__ = ["run_demo"]


def run_demo(config: Config, *, sim="verilator", fault=None, seed=1, m=100, k=70, n=50) -> int:
    """Run the demo GEMM; print the report; return 0 on PASS, 1 on FAIL."""
    t0 = time.monotonic()
    status = run_sim(config, m=m, k=k, n=n, backend=sim, seed=seed, fault=fault)
    print(f"  wall time    {time.monotonic() - t0:.1f} s")
    return status
