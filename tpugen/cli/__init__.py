"""The ``tpugen`` command line.

Exit status: 0 PASS (or done); 1 FAIL (a result differs from the golden model) or a tool, build
or run failed; 2 a usage error; 130 interrupted (Ctrl-C).

Every command checks all of its arguments and reads its input files before it looks for a
tool, builds or simulates anything. A user's mistake is one line on standard error that names
the option or file and the bad value (``tpugen: error: --rows 0: rows must be in 1..256, not
0``); anything else (a bug) shows its traceback. ``TPUGEN_DEBUG=1`` shows the traceback of user
errors too.

One module per command (``verilog``, ``sim``, ``run``, ``build``, ``flash``, ``demo``,
``infer``, ``train``, ``clean``), each with its arguments (``add_parser``) and its handler
(``cmd_<name>``); what several share: ``user_errors`` (``CLIError``, the parser, the one-line
error), ``options`` (argument types, the shape options and ``--config``, files),
``gemm_options`` (the operands and requantization options of ``sim`` and ``run``), ``port``
(the board link of ``run`` and ``infer``).
"""

import os
import sys

from tpugen import __version__
from tpugen.cli import build, clean, demo, flash, infer, run, sim, train, verilog
from tpugen.cli.user_errors import CLIError, Parser, fail, join_negative, quiet_exit
from tpugen.sim.cache import BuildDirError, check_settings

__all__ = ["main", "build_parser", "CLIError"]

#: The commands, in the order ``tpugen --help`` lists them.
COMMANDS = (verilog, sim, run, build, flash, demo, infer, train, clean)


def build_parser():
    p = Parser(prog="tpugen", description="Generate and verify a systolic-array accelerator.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = bool(os.environ.get("TPUGEN_DEBUG"))
    try:
        args = build_parser().parse_args(join_negative(argv))
        check_settings()
        return args.func(args)
    except (CLIError, BuildDirError) as e:
        if debug:
            raise
        return fail(e, 2)
    except KeyboardInterrupt:
        if debug:
            raise
        quiet_exit()
        print("tpugen: interrupted", file=sys.stderr)
        return 130
    except MemoryError as e:
        if debug:
            raise
        return fail(f"out of memory: {e}", 2)
    except RuntimeError as e:  # a missing tool, a failed build or simulator run
        if debug or isinstance(e, NotImplementedError | RecursionError):
            raise
        return fail(e, 1)
