"""Amaranth-simulator helpers for the host link.

``uart_write`` and ``UARTMonitor`` model the far end of the line (a USB-UART) independently of
``fpga.uart``: bits are timed with ``ctx.delay`` from the bit rate alone (optionally off by a
rate error), so they land anywhere between clock edges, as an asynchronous line's do.
``HostSide`` sends bytes and parses reply frames on top of them, ``InsideStub`` stands in for the
core bridge behind a ``LinkEndpoint``, and ``SimulatedBoard`` (``python -m fpga.linksim``) puts a
simulated endpoint behind a pseudo-terminal, so that host tools (``fpga.host.Link``) can talk to
the gateware without a board.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import threading
import time
import tty

from amaranth.sim import Simulator

from .host import FrameParser
from .link import LinkEndpoint
from .protocol import reply_type

__all__ = ["uart_write", "UARTMonitor", "HostSide", "InsideStub", "SimulatedBoard"]


async def uart_write(ctx, pin, data: bytes, baud: float, *, rate_error: float = 0.0,
                     gap_bits: float = 0.0, bad_stop: bool = False, stop_bits: float = 1.0):
    """Send ``data`` on ``pin`` as 8N1 at ``baud * (1 + rate_error)``.

    ``gap_bits`` idle bit-times follow every byte's stop bit; ``bad_stop`` sends every stop bit
    as 0 (the line is left high after the last byte).
    """
    bit = 1.0 / (baud * (1.0 + rate_error))
    for byte in bytes(data):
        bits = [0] + [(byte >> i) & 1 for i in range(8)]
        for b in bits:
            ctx.set(pin, b)
            await ctx.delay(bit)
        ctx.set(pin, 0 if bad_stop else 1)
        await ctx.delay(bit * stop_bits)
        ctx.set(pin, 1)
        if gap_bits:
            await ctx.delay(bit * gap_bits)


class UARTMonitor:
    """Watch a UART line and collect the bytes (``data``) and framing errors (``errors``).

    Add ``monitor.run`` as a background testbench. Each byte is sampled in the middle of its bits
    measured from the start bit's falling edge, at ``baud * (1 + rate_error)``; a stop bit of 0
    counts as an error (the byte is not added to ``data``).
    """

    def __init__(self, pin, baud: float, *, rate_error: float = 0.0):
        self.pin = pin
        self.bit = 1.0 / (baud * (1.0 + rate_error))
        self.data = bytearray()
        self.errors = 0

    async def run(self, ctx):
        while True:
            await ctx.negedge(self.pin)
            await ctx.delay(self.bit / 2)
            if ctx.get(self.pin):
                continue                  # a glitch, not a start bit
            byte = 0
            for i in range(8):
                await ctx.delay(self.bit)
                byte |= ctx.get(self.pin) << i
            await ctx.delay(self.bit)
            if ctx.get(self.pin):
                self.data.append(byte)
            else:
                self.errors += 1


class HostSide:
    """The host's end of a simulated link: bytes out on ``rx_pin``, frames in from ``tx_pin``.

    Add ``host.monitor.run`` as a background testbench; then, inside a testbench, ``send``
    bytes and ``receive`` reply frames (parsed with ``fpga.host.FrameParser``).
    """

    def __init__(self, rx_pin, tx_pin, baud: float, *, rate_error: float = 0.0):
        self.rx_pin = rx_pin
        self.baud = baud
        self.rate_error = rate_error
        self.monitor = UARTMonitor(tx_pin, baud, rate_error=rate_error)
        self.parser = FrameParser()
        self._seen = 0
        self.frames = []

    async def send(self, ctx, data: bytes, **kwargs):
        kwargs.setdefault("rate_error", self.rate_error)
        await uart_write(ctx, self.rx_pin, data, self.baud, **kwargs)

    def poll(self) -> list:
        """Parse the bytes seen since the last call; returns all frames so far."""
        new = bytes(self.monitor.data[self._seen:])
        self._seen += len(new)
        self.frames += self.parser.feed(new)
        return self.frames

    async def receive(self, ctx, count: int = 1, *, within_bits: float = 20000) -> list:
        """Wait until ``count`` more frames have arrived (or ``within_bits`` bit-times passed)
        and return them (fewer on a timeout)."""
        want = len(self.frames) + count
        waited = 0.0
        step = 10.0
        while len(self.poll()) < want and waited < within_bits:
            await ctx.delay(step / self.baud)
            waited += step
        got = self.frames[want - count:want]
        return got

    async def quiet(self, ctx, bits: float) -> list:
        """Wait ``bits`` bit-times and return any frames that arrived meanwhile."""
        n = len(self.frames)
        await ctx.delay(bits / self.baud)
        return self.poll()[n:]


class InsideStub:
    """A stand-in for the core bridge behind a ``LinkEndpoint``: add ``run`` as a background
    testbench.

    For each request it takes the payload from ``req`` (with ``ready`` low in a random fraction
    ``stall`` of cycles), calls ``answer(type, length, payload) -> (reply_type, reply_bytes)``,
    then offers the reply on ``rsp`` (``valid`` withheld in a fraction ``stall`` of cycles).
    ``delay`` cycles pass between the request and the reply. ``requests`` records
    ``(type, length, payload)``.
    """

    def __init__(self, dut, answer, *, stall: float = 0.0, delay: int = 0, seed: int = 0):
        self.dut = dut
        self.answer = answer
        self.stall = stall
        self.delay = delay
        self.rng = random.Random(seed)
        self.requests = []

    async def run(self, ctx):
        req, rsp = self.dut.req, self.dut.rsp
        while True:
            payload = bytearray()
            while True:
                ready = self.rng.random() >= self.stall
                ctx.set(req.ready, ready)
                _, _, valid, beat = await ctx.tick().sample(req.valid, req.payload)
                if ready and valid:
                    if not beat.empty:
                        payload.append(beat.data)
                    if beat.last:
                        ftype, length = beat.type, beat.length
                        break
            ctx.set(req.ready, 0)
            self.requests.append((ftype, length, bytes(payload)))
            if self.delay:
                await ctx.tick().repeat(self.delay)
            rtype, reply = self.answer(ftype, length, bytes(payload))
            beats = [{"data": b, "type": rtype, "last": i == len(reply) - 1, "empty": 0}
                     for i, b in enumerate(reply)] or [
                {"data": 0, "type": rtype, "last": 1, "empty": 1}]
            i = 0
            while i < len(beats):
                valid = self.rng.random() >= self.stall
                ctx.set(rsp.valid, valid)
                ctx.set(rsp.payload, beats[i])
                _, _, ready = await ctx.tick().sample(rsp.ready)
                if valid and ready:
                    i += 1
            ctx.set(rsp.valid, 0)


class SimulatedBoard:
    """A ``LinkEndpoint`` in the Amaranth simulator behind a pseudo-terminal, for host tools.

    ``port`` is the pty's path: open it with ``fpga.host.Link(board.port)`` (any baud; the pty
    ignores it). Bytes the host writes are sent to the endpoint's ``rx`` as UART bits, and the
    endpoint's ``tx`` is decoded back into bytes for the host. The inside is an ``InsideStub``
    calling ``answer`` (default: RESULT = the request payload). The simulation runs in a thread
    from ``start()`` (or ``with``) to ``stop()``; it is slow (a few thousand clocks per second),
    so keep frames short and timeouts long.
    """

    def __init__(self, *, clk_freq: float = 4e6, baud: float = 1e6, answer=None, **endpoint):
        self.dut = LinkEndpoint(clk_freq, baud, **endpoint)
        self.clk_freq, self.baud = clk_freq, baud
        self.host = HostSide(self.dut.rx, self.dut.tx, baud)
        self.inside = InsideStub(self.dut, answer or self._echo)
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        self.port = os.ttyname(self._slave)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error = None

    @staticmethod
    def _echo(ftype, length, payload):
        return reply_type(ftype), payload

    async def _bridge(self, ctx):
        sent = 0
        while not self._stop.is_set():
            data = b""
            if select.select([self._master], [], [], 0)[0]:
                data = os.read(self._master, 4096)
            if data:
                await self.host.send(ctx, data)
            else:
                await ctx.delay(10 / self.baud)
            new = bytes(self.host.monitor.data[sent:])
            if new:
                os.write(self._master, new)
                sent += len(new)

    def _run(self):
        try:
            sim = Simulator(self.dut)
            sim.add_clock(1 / self.clk_freq)
            sim.add_testbench(self._bridge)
            sim.add_testbench(self.host.monitor.run, background=True)
            sim.add_testbench(self.inside.run, background=True)
            sim.run()
        except BaseException as e:  # reported by stop()
            self.error = e

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        os.close(self._master)
        os.close(self._slave)
        if self.error is not None:
            raise self.error

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv=None):
    """``python -m fpga.linksim``: serve a simulated board on a pty until interrupted."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--max-payload", type=int, default=64)
    args = parser.parse_args(argv)
    with SimulatedBoard(max_payload=args.max_payload, timeout_bits=200) as board:
        print(f"simulated board on {board.port} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
