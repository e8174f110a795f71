"""The command line's user errors: ``CLIError`` (one line on standard error, exit status 2), the
parser that turns argparse's own errors into it, and the printing of such a line."""

import argparse
import re
import sys
import warnings

from amaranth.hdl import UnusedElaboratable

__all__ = ["CLIError", "Parser", "join_negative", "quiet_exit", "fail"]


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """Errors become ``CLIError`` (one line); remembers which options take a value."""

    value_options: set = set()

    def error(self, message):
        raise CLIError(message)

    def add_argument(self, *names, **kw):
        if kw.get("action") in (None, "store") and names and names[0].startswith("-"):
            Parser.value_options.update(names)
        return super().add_argument(*names, **kw)


def join_negative(argv: list) -> list:
    """``--opt -1,0`` as ``--opt=-1,0``: argparse takes a value that starts with ``-`` and is
    not a plain number for an option, and would say "expected one argument"."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if (a in Parser.value_options and i + 1 < len(argv)
                and re.match(r"-[\d.]", argv[i + 1])):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def quiet_exit() -> None:
    """Components made before an error would warn "UnusedElaboratable" at exit: not news."""
    warnings.simplefilter("ignore", UnusedElaboratable)


def fail(message, status: int) -> int:
    """Print ``tpugen: error: MESSAGE`` (one line, standard error); return ``status``."""
    quiet_exit()
    print(f"tpugen: error: {message}", file=sys.stderr)
    return status
