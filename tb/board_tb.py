"""The host's side of a ``tpugen_board`` (``fpga.gateware.top.BoardTop``'s Verilog) in cocotb: the
host's USB-UART on ``rx`` / ``tx`` and a frame-level testbench.

``UartHost`` is the cocotb adapter of the host-UART model ``tb.uart_model`` (the one the
Amaranth simulations use too; independent of ``fpga.gateware.uart``): bits timed by the simulator's
clock-independent timers from the bit rate alone, like a USB-UART's. ``BoardTB`` adds the clock,
the reset and frames (``fpga.host``). ``tb.test_board`` tests a board with them and
``tb.board_serve`` serves one on a pty.
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, Timer

from tpugen.fpga.gateware.top import BoardParameters
from tpugen.fpga.host.serial_link import Frame, FrameParser, encode_frame
from tpugen.tb.uart_model import UartModel

__all__ = ["UartHost", "BoardTB", "board_parameters_from_env"]


def _after(seconds: float) -> Timer:
    return Timer(round(seconds * 1e12), unit="ps")


class UartHost:
    """The host's 8N1 UART on a ``tpugen_board``'s ``rx`` / ``tx`` (``tb.uart_model``).

    ``send`` drives ``rx``; ``monitor`` (start it with ``cocotb.start_soon``) decodes ``tx``
    into ``received`` (framing errors count in ``errors``); ``rate_error`` makes the host's
    bit rate off by that fraction.
    """

    def __init__(self, dut, baud: float, *, rate_error: float = 0.0):
        self.dut = dut
        self.uart = UartModel(baud, rate_error=rate_error)
        dut.rx.value = 1

    @property
    def received(self) -> bytearray:
        return self.uart.received

    @property
    def errors(self) -> int:
        return self.uart.errors

    def _set_rx(self, level: int):
        self.dut.rx.value = level

    async def send(self, data: bytes, **kwargs):
        """Send ``data`` (``kwargs``: ``UartModel.schedule``'s ``gap_bits``, ``bad_stop``,
        ``stop_bits``)."""
        await self.uart.send(data, self._set_rx, _after, **kwargs)

    async def monitor(self):
        tx = self.dut.tx
        await self.uart.monitor(lambda: FallingEdge(tx), _after, lambda: int(tx.value))

    async def wait_bits(self, bits: float):
        """Let ``bits`` bit-times pass."""
        await _after(bits * self.uart.bit)


def board_parameters_from_env(name: str = "TPUGEN_BOARD") -> BoardParameters:
    """The ``BoardParameters`` the Verilog was generated with, from the JSON in ``$name``."""
    return BoardParameters.from_dict(json.loads(os.environ[name]))


class BoardTB:
    """Clock, reset, the host UART and a frame parser for a ``tpugen_board`` top built with
    ``params``."""

    def __init__(self, dut, params: BoardParameters):
        if not isinstance(params, BoardParameters):
            raise TypeError(f"params must be BoardParameters, not {params!r}")
        self.dut = dut
        self.params = params
        self.config = params.config
        self.uart = UartHost(dut, params.baud)
        self.parser = FrameParser()
        self.seen = 0
        self.frames = []

    async def start(self):
        period_ps = round(1e12 / self.params.clk_freq)
        cocotb.start_soon(Clock(self.dut.clk, period_ps, unit="ps").start())
        cocotb.start_soon(self.uart.monitor())
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 4)

    def poll(self) -> list:
        new = bytes(self.uart.received[self.seen:])
        self.seen += len(new)
        self.frames += self.parser.feed(new)
        return self.frames

    async def receive(self, *, within_bits: float = 200_000) -> Frame:
        """The next reply frame (fails after ``within_bits`` bit-times without one)."""
        want = len(self.frames) + 1
        waited = 0
        while len(self.poll()) < want:
            assert waited < within_bits, f"no reply within {within_bits} bit-times"
            await self.uart.wait_bits(20)
            waited += 20
        return self.frames[want - 1]

    async def quiet(self, bits: float) -> list:
        n = len(self.frames)
        await self.uart.wait_bits(bits)
        return self.poll()[n:]

    async def request(self, ftype: int, payload: bytes = b"", *,
                      raw: bytes | None = None) -> Frame:
        """Send a frame (or ``raw`` bytes) and return the reply ``Frame``."""
        await self.uart.send(encode_frame(ftype, payload) if raw is None else raw)
        return await self.receive()
