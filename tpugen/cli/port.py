"""The board link of ``tpugen run`` and ``tpugen infer --backend board``: ``--port`` checked
before anything runs, the link's errors as one line naming the port, and the one way both
commands reach a board: an ``Accelerator`` on the ``board`` backend (``--port``, ``--baud``,
``--timeout``) with the board's config (``tpugen.backends.board.identify_board``)."""

from importlib.util import find_spec
from pathlib import Path

import serial

from tpugen.accelerator import Accelerator
from tpugen.backends.board import identify_board
from tpugen.cli.options import positive_float, positive_int
from tpugen.cli.user_errors import CLIError
from tpugen.fpga.host.board_link import ConfigMismatch
from tpugen.fpga.host.serial_link import LinkError, LinkTimeout
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.config import Config

__all__ = ["add_link_options", "LINK_ERRORS", "check_port", "link_error", "board_config",
           "board_accelerator"]

#: What a board link raises for a board that is absent, silent, or not the one expected.
LINK_ERRORS = (LinkError, ConfigMismatch, serial.SerialException)


def add_link_options(p) -> None:
    """``--port``, ``--baud`` and ``--timeout`` of a command that may run on a board
    (``--backend board``)."""
    p.add_argument("--port", help="serial device of the board, or the simulated board's pty "
                                  "(--backend board)")
    p.add_argument("--baud", type=positive_int, default=DEFAULT_BAUD,
                   help="the board link's bit rate")
    p.add_argument("--timeout", type=positive_float("seconds"), default=30.0,
                   help="seconds to wait for each board reply")


def check_port(port: str) -> None:
    """``--port``: a device (or a pyserial URL), not a directory or a regular file."""
    if "://" in port:          # a pyserial URL (loop://, socket://...)
        scheme = port.split("://", 1)[0]
        if not scheme.isidentifier() or find_spec(f"serial.urlhandler.protocol_{scheme}") is None:
            raise CLIError(f"--port {port}: {scheme!r} is not a pyserial URL scheme (e.g. "
                           f"loop://, socket://HOST:PORT, rfc2217://HOST:PORT)")
        return
    path = Path(port)
    if not path.exists():
        raise CLIError(f"--port {port}: no such device")
    if path.is_dir():
        raise CLIError(f"--port {port}: is a directory, not a serial device")
    if path.is_file():
        raise CLIError(f"--port {port}: is a regular file, not a serial device")


def link_error(port, timeout, e) -> CLIError:
    """One of ``LINK_ERRORS`` as the user error naming ``--port``."""
    if isinstance(e, LinkTimeout):
        return CLIError(f"--port {port}: no reply within {timeout:g} s (is a tpugen board, or "
                        f"the simulated board, at this port?): {e}")
    if isinstance(e, serial.SerialException):
        return CLIError(f"--port {port}: cannot open it: {e}")
    return CLIError(f"--port {port}: {e}")


def board_config(args) -> Config:
    """The config of the board at ``--port`` (its ID reply)."""
    try:
        return identify_board(args.port, args.baud, timeout=args.timeout)
    except LINK_ERRORS as e:
        raise link_error(args.port, args.timeout, e) from None


def board_accelerator(args, cfg: Config) -> Accelerator:
    """The board at ``--port`` as an ``Accelerator`` of ``cfg`` (the link opens, and checks
    the board against ``cfg``, on the first run; ``close`` the backend after)."""
    accel = Accelerator(cfg, "board", port=args.port, baud=args.baud)
    accel.backend.timeout = args.timeout
    return accel
