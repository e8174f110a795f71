"""cocotb: serve a ``tpugen_board`` (``fpga.gateware.top.BoardTop``'s Verilog) on a pseudo-terminal
until told to stop; ``tb.simboard.SimulatedBoardTop`` runs this module (``SERVE_MODULE``) with its
parameters in ``$TPUGEN_SIMBOARD`` (``SERVE_ENV``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb

from tpugen.fpga.gateware.top import BoardParameters
from tpugen.tb.board_tb import BoardTB
from tpugen.tb.ptyserver import PtyServer
from tpugen.tb.simboard import SERVE_ENV

#: Bit-times the board runs between polls of the pty while the host sends nothing.
POLL_BITS = 10


@cocotb.test()
async def simboard_serve(dut):
    """Serve the board on a new pty until the stop file appears or the parent goes."""
    spec = json.loads(os.environ[SERVE_ENV])
    tb = BoardTB(dut, BoardParameters.from_dict(spec["board"]))
    await tb.start()
    with PtyServer() as pty:
        tmp = spec["port_file"] + ".tmp"
        Path(tmp).write_text(pty.port)
        os.replace(tmp, spec["port_file"])

        def stop() -> bool:
            return os.path.exists(spec["stop_file"]) or os.getppid() != spec["parent"]

        await pty.pump(tb.uart.send, lambda: tb.uart.wait_bits(POLL_BITS), tb.uart.received,
                       stop, busy=lambda: bool(int(dut.led_busy.value)))
