"""``tpugen verilog``: write the Verilog of an array or a core."""

from tpugen.cli.options import add_shape, cell, config, fault, output_dir
from tpugen.cli.user_errors import CLIError
from tpugen.generate import write_verilog
from tpugen.sim.cache import build_root, entry_dir

__all__ = ["add_parser", "cmd_verilog"]


def add_parser(sub):
    v = sub.add_parser("verilog", help="write the Verilog of an array or core")
    add_shape(v, what="required")
    v.add_argument("-o", "--output", default=None,
                   help="output directory (default: verilog/ in the build directory, build/ "
                        "or $TPUGEN_BUILD_DIR, where `tpugen clean` removes it)")
    v.add_argument("--top", choices=["array", "core"], default="array",
                   help="the array alone, or the whole core (controller, buffers, array)")
    v.add_argument("--debug-fault-cell", type=cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (to test the tests)")
    v.set_defaults(func=cmd_verilog)


def cmd_verilog(args):
    if args.config is None and (args.rows is None or args.cols is None):
        raise CLIError("--rows and --cols are required (or --config)")
    cfg = config(args)
    at = fault(args, cfg)
    if args.output is None:
        out = entry_dir(build_root() / "verilog")
    else:
        out = output_dir(args.output, "-o/--output")
    for f in write_verilog(cfg, out, top=args.top, fault=at):
        print(f)
    return 0
