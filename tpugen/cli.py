"""The ``tpugen`` command line."""

import argparse
import os
import sys
from pathlib import Path

from tpugen.fpga.boards import get_board
from tpugen.fpga.build import TOPS, ProgressPrinter, bitstream_path, build_board, build_dir
from tpugen.fpga.flash import flash
from tpugen.fpga.listing import list_boards
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.config import Config

from . import __version__
from .backends import BACKENDS, SIMULATORS
from .board_run import run_on_board
from .demo import run_demo
from .generate import write_verilog
from .simulate import run_sim
from .tflite.infer import add_infer_parser

__all__ = ["main"]


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise CLIError(message)


def _cell(text):
    try:
        i, j = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be ROW,COL, not {text!r}") from None
    return (i, j)


def _config(args) -> Config:
    """The Config from ``--config`` (JSON) with ``--rows``/``--cols``/... overriding it."""
    base = {}
    if getattr(args, "config", None):
        path = Path(args.config)
        if not path.is_file():
            raise CLIError(f"--config: no such file {str(path)!r}")
        base = Config.from_json(path.read_text()).to_dict()
    for field in ("rows", "cols", "acc_width", "operand"):
        value = getattr(args, field, None)
        if value is not None:
            base[field] = value
    return Config(**base)


def _add_shape(p, *, required=False, default=None):
    p.add_argument("--rows", type=int, required=required, default=default,
                   help="array rows R (1..256)")
    p.add_argument("--cols", type=int, required=required, default=default,
                   help="array columns C (1..256)")
    p.add_argument("--acc-width", dest="acc_width", type=int, help="accumulator bits (16..64)")
    p.add_argument("--operand", help="operand type (int8)")
    p.add_argument("--config", help="a config.json to start from")


def cmd_verilog(args):
    if args.config is None and (args.rows is None or args.cols is None):
        raise CLIError("--rows and --cols are required (or --config)")
    cfg = _config(args)
    files = write_verilog(cfg, Path(args.output), top=args.top, fault=args.debug_fault_cell)
    for f in files:
        print(f)
    return 0


def cmd_sim(args):
    cfg = _config(args)
    return run_sim(cfg, m=args.m, k=args.k, n=args.n, relu=args.relu, backend=args.backend,
                   seed=args.seed, waves=args.waves, fault=args.debug_fault_cell)


def cmd_run(args):
    return run_on_board(args.port, m=args.m, k=args.k, n=args.n, baud=args.baud,
                        seed=args.seed, timeout=args.timeout)


def _board_config(args, board) -> Config:
    """The board's Config, or ``--config``'s, with ``--rows`` / ``--cols`` applied (the
    activation lanes kept within the columns)."""
    base = board.config.to_dict()
    if args.config:
        path = Path(args.config)
        if not path.is_file():
            raise CLIError(f"--config: no such file {str(path)!r}")
        base = Config.from_json(path.read_text()).to_dict()
    for field in ("rows", "cols"):
        value = getattr(args, field)
        if value is not None:
            base[field] = value
    if args.cols is not None:
        base["act_lanes"] = min(base["act_lanes"], args.cols)
    return Config(**base)


def cmd_build(args):
    if args.list:
        print(list_boards())
        return 0
    if not args.board:
        raise CLIError("--board is required (or --list)")
    board = get_board(args.board)
    cfg = _board_config(args, board)
    out_dir = Path(args.output) if args.output else build_dir(board, cfg, args.top)
    report = build_board(board, cfg, args.freq, out_dir=out_dir, progress=ProgressPrinter(),
                         top=args.top, dsp_blocks=args.dsp_blocks, seed=args.seed)
    print(file=sys.stderr)
    print(report.summary())
    if report.critical_path:
        print(report.critical_path)
    print(f"bitstream: {report.bitstream}")
    return 0


def cmd_flash(args):
    board = get_board(args.board)
    bitstream = args.bitstream or bitstream_path(board, build_dir(board))
    print(flash(board, bitstream))
    return 0


def cmd_demo(args):
    cfg = _config(args)
    return run_demo(cfg, sim=args.sim, fault=args.debug_fault_cell, seed=args.seed)


def build_parser():
    p = _Parser(prog="tpugen", description="Generate and verify a systolic-array accelerator.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    v = sub.add_parser("verilog", help="write the Verilog of an array or core")
    _add_shape(v)
    v.add_argument("-o", "--output", default="build/verilog", help="output directory")
    v.add_argument("--top", choices=["array", "core"], default="array",
                   help="the array alone, or the whole core (controller, buffers, array)")
    v.add_argument("--debug-fault-cell", type=_cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (to test the tests)")
    v.set_defaults(func=cmd_verilog)

    s = sub.add_parser("sim", help="run a random GEMM on a backend and check it against NumPy")
    _add_shape(s, default=8)
    for dim in ("m", "k", "n"):
        s.add_argument(f"--{dim}", type=int, required=True, help=f"GEMM dimension {dim.upper()}")
    s.add_argument("--relu", action="store_true",
                   help="requantize to int8 with ReLU (default: int32 results)")
    s.add_argument("--backend", choices=[b for b in BACKENDS if not BACKENDS[b].needs_port],
                   default="verilator",
                   help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()
                                  if not b.needs_port))
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--waves", metavar="FILE", help="write a waveform (VCD or FST) to FILE")
    s.add_argument("--debug-fault-cell", type=_cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (the run must then FAIL)")
    s.set_defaults(func=cmd_sim)

    r = sub.add_parser("run", help="run a random GEMM on a board over its UART link")
    r.add_argument("--port", required=True, help="serial device (or the simulated board's pty)")
    r.add_argument("--baud", type=int, default=DEFAULT_BAUD)
    for dim in ("m", "k", "n"):
        r.add_argument(f"--{dim}", type=int, required=True, help=f"GEMM dimension {dim.upper()}")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for a reply")
    r.set_defaults(func=cmd_run)

    b = sub.add_parser("build", help="build a bitstream for a board (YoWASP tools from PyPI)")
    b.add_argument("--board", help="board name (see --list)")
    b.add_argument("--list", action="store_true",
                   help="list the boards, their defaults and their measured builds")
    b.add_argument("--rows", type=int, help="array rows (default: the board's)")
    b.add_argument("--cols", type=int, help="array columns (default: the board's)")
    b.add_argument("--config", help="a config.json (default: the board's config)")
    b.add_argument("--freq", type=float, help="core clock in MHz (default: the board's)")
    b.add_argument("--top", choices=TOPS, default="board",
                   help="the whole board top (default), or the array alone between the pins "
                        "(to measure the array's own size and Fmax)")
    b.add_argument("--dsp-blocks", dest="dsp_blocks", type=int,
                   help="DSP blocks the array may use (default: what the rest leaves); the "
                        "other products are Booth multipliers in LUTs")
    b.add_argument("--seed", type=int, help="nextpnr's placement seed")
    b.add_argument("-o", "--output",
                   help="build directory (default build/fpga/<board>_<config>[_array])")
    b.set_defaults(func=cmd_build)

    f = sub.add_parser("flash", help="program a board with its bitstream")
    f.add_argument("--board", required=True, help="board name (see tpugen build --list)")
    f.add_argument("--bitstream",
                   help="bitstream file (default: that of tpugen build --board BOARD)")
    f.set_defaults(func=cmd_flash)

    d = sub.add_parser("demo", help="the main job: a 100 x 70 x 50 GEMM on the generated core, "
                                    "simulated, checked against NumPy, PASS/FAIL")
    _add_shape(d, default=8)
    d.add_argument("--sim", choices=[s for s in SIMULATORS if s != "amaranth"],
                   default="verilator")
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--debug-fault-cell", type=_cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (the demo must then FAIL)")
    d.set_defaults(func=cmd_demo)

    add_infer_parser(sub)
    return p


def main(argv=None):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args)
    except (CLIError, TypeError, ValueError) as e:
        if os.environ.get("TPUGEN_DEBUG"):
            raise
        print(f"tpugen: error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # missing tools and the like
        print(f"tpugen: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
