"""The host's USB-UART as a simulation model: one definition of its bit timing, for the Amaranth
simulator (``tb.linksim``) and for cocotb (``tb.board_tb``).

Independent of ``fpga.gateware.uart`` (which it checks): bits are timed from the bit rate alone
(optionally off by a rate error), in seconds, so they land anywhere between clock edges, as an
asynchronous line's do. The model does no waiting itself: each simulator's adapter hands it
three primitives (wait some seconds, wait for the line's falling edge, read or set the line) and
awaits its coroutines, so the timing and the decoding rules are written once.

Transmitting (``send``): 8N1, LSB first, each bit one bit-time of ``baud * (1 + rate_error)``;
``gap_bits`` idle bit-times after every stop bit; ``bad_stop`` sends every stop bit as 0 (the
line is left high after the last byte); ``stop_bits`` stretches the stop bit.

Receiving (``monitor``): after each falling edge of the line, the start bit is sampled half a
bit-time later (high there: a glitch, ignored), then each data bit and the stop bit one bit-time
after the previous sample, all measured from the falling edge; a stop bit of 0 counts in
``errors`` and the byte is dropped, else the byte goes to ``received``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from numbers import Real

__all__ = ["UartModel"]


class UartModel:
    """The far end of a UART line: 8N1 at ``baud * (1 + rate_error)`` (see the module doc).

    ``received`` holds the bytes the monitor decoded, ``errors`` counts its framing errors.
    """

    def __init__(self, baud: float, *, rate_error: float = 0.0):
        if isinstance(baud, bool) or not isinstance(baud, Real) or not baud > 0:
            raise ValueError(f"baud must be a positive number, not {baud!r}")
        if (isinstance(rate_error, bool) or not isinstance(rate_error, Real)
                or not -0.5 < rate_error < 0.5):
            raise ValueError(f"rate_error must be a number in (-0.5, 0.5), not {rate_error!r}")
        self.baud = baud
        self.rate_error = rate_error
        #: Seconds of one bit.
        self.bit = 1.0 / (baud * (1.0 + rate_error))
        self.received = bytearray()
        self.errors = 0

    def schedule(self, data: bytes, *, gap_bits: float = 0.0, bad_stop: bool = False,
                 stop_bits: float = 1.0) -> list[tuple[int, float]]:
        """The line levels that send ``data``: ``(level, seconds)`` pairs, each level held for
        its seconds (the last pair, ``(1, 0.0)``, leaves the line idle)."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"data must be bytes, not {data!r}")
        for name, v in (("gap_bits", gap_bits), ("stop_bits", stop_bits)):
            if isinstance(v, bool) or not isinstance(v, Real) or v < 0:
                raise ValueError(f"{name} must be a non-negative number, not {v!r}")
        out = []
        for byte in bytes(data):
            out += [(0, self.bit)] + [((byte >> i) & 1, self.bit) for i in range(8)]
            out.append((0 if bad_stop else 1, self.bit * stop_bits))
            if gap_bits:
                out.append((1, self.bit * gap_bits))
        out.append((1, 0.0))
        return out

    async def send(self, data: bytes, set_line: Callable[[int], None],
                   delay: Callable[[float], Awaitable], **kwargs) -> None:
        """Drive ``data`` onto the line: ``set_line(level)`` sets it, ``await delay(seconds)``
        lets simulated time pass. ``kwargs`` go to ``schedule``."""
        for level, seconds in self.schedule(data, **kwargs):
            set_line(level)
            if seconds:
                await delay(seconds)

    async def monitor(self, falling_edge: Callable[[], Awaitable],
                      delay: Callable[[float], Awaitable], line: Callable[[], int]) -> None:
        """Decode the line forever (run it in the background): ``await falling_edge()`` waits
        for the line to fall, ``await delay(seconds)`` lets time pass, ``line()`` reads it."""
        while True:
            await falling_edge()
            await delay(self.bit / 2)
            if line():
                continue                  # a glitch, not a start bit
            byte = 0
            for i in range(8):
                await delay(self.bit)
                byte |= line() << i
            await delay(self.bit)
            if line():
                self.received.append(byte)
            else:
                self.errors += 1
