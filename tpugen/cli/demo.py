"""``tpugen demo``: the main job, a GEMM that is not a multiple of the array on the generated
core, simulated and checked against NumPy (``tpugen.demo``)."""

from tpugen.backends import SIMULATORS
from tpugen.cli.options import add_shape, cell, config, fault, nonneg_int
from tpugen.demo import DEMO_SHAPE, run_demo

__all__ = ["add_parser", "cmd_demo"]


def add_parser(sub):
    m, k, n = DEMO_SHAPE
    d = sub.add_parser("demo", help=f"the main job: a {m} x {k} x {n} GEMM on the generated "
                                    f"core, simulated, checked against NumPy, PASS/FAIL")
    add_shape(d, what="8")
    d.add_argument("--sim", choices=[s for s in SIMULATORS if s != "amaranth"],
                   default="verilator")
    d.add_argument("--seed", type=nonneg_int, default=1)
    d.add_argument("--debug-fault-cell", type=cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (the demo must then FAIL)")
    d.set_defaults(func=cmd_demo)


def cmd_demo(args):
    cfg = config(args)
    at = fault(args, cfg, args.sim)
    return run_demo(cfg, sim=args.sim, fault=at, seed=args.seed)
