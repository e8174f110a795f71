"""``tpugen demo`` (``make demo``): generate the core, run a GEMM that is not a multiple of the
array on a simulator, compare it with NumPy, report."""

from tpugen.accelerator import Accelerator, prepare_gemm
from tpugen.hdl.config import Config
from tpugen.simulate import random_operands, sim_gemm

__all__ = ["DEMO_SHAPE", "run_demo"]

#: The demo's GEMM, M x K x N: no dimension a multiple of the default 8 x 8 array.
DEMO_SHAPE = (100, 70, 50)


def run_demo(config: Config, *, sim="verilator", fault=None, seed=1, shape=DEMO_SHAPE,
             out=print) -> int:
    """Run the demo GEMM (progress on standard error); print the report; return 0 on PASS,
    1 on FAIL."""
    a, b = random_operands(config, *shape, seed)
    job = prepare_gemm(config, a, b)
    acc = Accelerator(config, sim, fault=fault)
    report = sim_gemm(acc, job, seed=seed, command="demo")
    report.emit(out=out)
    return 0 if report.passed else 1
