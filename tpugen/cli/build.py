"""``tpugen build``: a bitstream for a board (YoWASP tools from PyPI), or ``--list`` the
boards."""

import sys

from tpugen.cli.options import (
    make_config,
    named_board,
    nonneg_int,
    output_dir,
    positive_float,
    read_config,
    typed,
)
from tpugen.cli.user_errors import CLIError
from tpugen.fpga.flow.bitstream import (
    DEFAULT_TIMEOUT,
    TOPS,
    ProgressPrinter,
    build_board,
    build_dir,
)
from tpugen.fpga.flow.boards import BOARDS
from tpugen.fpga.flow.listing import list_boards
from tpugen.fpga.gateware.pll import core_clock
from tpugen.hdl.config import Config

__all__ = ["add_parser", "cmd_build"]


def add_parser(sub):
    b = sub.add_parser("build", help="build a bitstream for a board (YoWASP tools from PyPI)")
    b.add_argument("--board", help=f"board name: {', '.join(BOARDS)} (see --list)")
    b.add_argument("--list", action="store_true",
                   help="list the boards, their defaults and their measured builds")
    b.add_argument("--rows", type=int, help="array rows (default: the board's)")
    b.add_argument("--cols", type=int, help="array columns (default: the board's)")
    b.add_argument("--config", metavar="FILE",
                   help="a config.json (default: the board's config)")
    b.add_argument("--freq", type=positive_float("MHz"),
                   help="core clock in MHz (default: the board's)")
    b.add_argument("--top", choices=TOPS, default="board",
                   help="the whole board top (default), or the array alone between the pins "
                        "(to measure the array's own size and Fmax)")
    b.add_argument("--dsp-blocks", dest="dsp_blocks", type=nonneg_int,
                   help="DSP blocks the array may use (default: what the rest leaves); the "
                        "other products are Booth multipliers in LUTs")
    b.add_argument("--seed", type=nonneg_int,
                   help="nextpnr's placement seed (default: the board's)")
    b.add_argument("--timeout", type=positive_float("seconds"), default=DEFAULT_TIMEOUT,
                   metavar="SECONDS",
                   help=f"stop the tools after this long (default {DEFAULT_TIMEOUT:g} s)")
    b.add_argument("-o", "--output",
                   help="build directory (default build/fpga/<board>_<config>[_array])")
    b.set_defaults(func=cmd_build)


def _board_config(args, brd) -> Config:
    """The board's Config, or ``--config``'s, with ``--rows`` / ``--cols`` applied (the
    activation lanes kept within the columns)."""
    base = read_config(args.config) if args.config else brd.config.to_dict()
    given = typed(args, ("rows", "cols"))
    if "cols" in given and base.get("act_lanes"):
        base["act_lanes"] = min(base["act_lanes"], given["cols"])
    return make_config(base, given, args.config)


def cmd_build(args):
    if args.list:
        print(list_boards())
        return 0
    if not args.board:
        raise CLIError("--board is required (or --list)")
    brd = named_board(args.board)
    cfg = _board_config(args, brd)
    if args.freq is not None:
        try:
            core_clock(brd.family, brd.clk_in_mhz * 1e6, args.freq * 1e6)
        except ValueError as e:
            raise CLIError(f"--freq {args.freq:g}: {e}") from None
    out_dir = (output_dir(args.output, "-o/--output") if args.output
               else build_dir(brd, cfg, args.top))
    report = build_board(brd, cfg, args.freq, out_dir=out_dir, progress=ProgressPrinter(),
                         top=args.top, dsp_blocks=args.dsp_blocks, seed=args.seed,
                         timeout=args.timeout)
    print(file=sys.stderr)
    print(report.summary())
    if report.critical_path:
        print(report.critical_path)
    print(f"bitstream: {report.bitstream}")
    return 0
