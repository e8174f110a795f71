"""``tpugen flash``: program a board with its bitstream."""

from pathlib import Path

from tpugen.cli.options import named_board
from tpugen.cli.user_errors import CLIError
from tpugen.fpga.flow.bitstream import bitstream_path, build_dir
from tpugen.fpga.flow.boards import BOARDS
from tpugen.fpga.flow.flash import flash

__all__ = ["add_parser", "cmd_flash"]


def add_parser(sub):
    f = sub.add_parser("flash", help="program a board with its bitstream")
    f.add_argument("--board", required=True,
                   help=f"board name: {', '.join(BOARDS)} (see tpugen build --list)")
    f.add_argument("--bitstream",
                   help="bitstream file (default: that of tpugen build --board BOARD)")
    f.set_defaults(func=cmd_flash)


def cmd_flash(args):
    brd = named_board(args.board)
    if args.bitstream:
        path = Path(args.bitstream)
        if not path.is_file():
            raise CLIError(f"--bitstream {args.bitstream}: " + (
                "is a directory" if path.is_dir() else "no such file"))
    else:
        path = bitstream_path(brd, build_dir(brd))
        if not path.is_file():
            raise CLIError(f"no --bitstream given, and `tpugen build --board {brd.name}` has "
                           f"not made one at {path}: build it first or give --bitstream FILE")
    print(flash(brd, path))
    return 0
