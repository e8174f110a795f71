"""Amaranth-simulator helpers for the host link.

``uart_write``, ``UARTMonitor`` and ``HostSide`` put the host's USB-UART (``tb.uart_model``,
independent of ``fpga.gateware.uart``) on a design's pins; ``HostSide`` also parses the reply
frames. ``InsideStub`` stands in for the core bridge behind a ``LinkEndpoint``. ``SimulatedBoard``
puts a
design with UART pins behind a pseudo-terminal (``tb.ptyserver``), so that host tools
(``fpga.host.serial_link.Link``) can talk to the gateware without a board; ``SimulatedEndpoint``
(``python -m tpugen.tb.linksim``) is a ``LinkEndpoint`` with an ``InsideStub`` served that way.
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time

from amaranth.sim import Simulator

from tpugen.fpga.gateware.link_endpoint import LinkEndpoint
from tpugen.fpga.host.serial_link import FrameParser
from tpugen.fpga.protocol import reply_type
from tpugen.sim.amaranth_streams import Sink, Source
from tpugen.tb.ptyserver import PtyServer
from tpugen.tb.uart_model import UartModel

__all__ = ["uart_write", "UARTMonitor", "HostSide", "InsideStub", "SimulatedBoard",
           "SimulatedEndpoint"]

#: Bit-times the simulated board runs between polls of the pty while the host sends nothing.
POLL_BITS = 10


async def uart_write(ctx, pin, data: bytes, baud: float, *, rate_error: float = 0.0,
                     **kwargs):
    """Send ``data`` on ``pin`` as 8N1 at ``baud * (1 + rate_error)`` (``UartModel``; ``kwargs``:
    ``gap_bits``, ``bad_stop``, ``stop_bits`` of ``UartModel.schedule``)."""
    await UartModel(baud, rate_error=rate_error).send(
        data, lambda level: ctx.set(pin, level), ctx.delay, **kwargs)


class UARTMonitor:
    """Watch a UART line and collect the bytes (``data``) and framing errors (``errors``), as
    ``UartModel.monitor`` decodes them at ``baud * (1 + rate_error)``.

    Add ``monitor.run`` as a background testbench.
    """

    def __init__(self, pin, baud: float, *, rate_error: float = 0.0):
        self.pin = pin
        self.uart = UartModel(baud, rate_error=rate_error)

    @property
    def data(self) -> bytearray:
        return self.uart.received

    @property
    def errors(self) -> int:
        return self.uart.errors

    async def run(self, ctx):
        await self.uart.monitor(lambda: ctx.negedge(self.pin), ctx.delay,
                                lambda: ctx.get(self.pin))


class HostSide:
    """The host's end of a simulated link: bytes out on ``rx_pin``, frames in from ``tx_pin``,
    both at ``baud * (1 + rate_error)``.

    Add ``host.monitor.run`` as a background testbench; then, inside a testbench, ``send``
    bytes and ``receive`` reply frames (parsed with ``fpga.host.serial_link.FrameParser``).
    """

    def __init__(self, rx_pin, tx_pin, baud: float, *, rate_error: float = 0.0):
        self.rx_pin = rx_pin
        self.baud = baud
        self.monitor = UARTMonitor(tx_pin, baud, rate_error=rate_error)
        self.parser = FrameParser()
        self._seen = 0
        self.frames = []

    async def send(self, ctx, data: bytes, **kwargs):
        """Send ``data`` (``kwargs``: ``gap_bits``, ``bad_stop``, ``stop_bits``)."""
        await self.monitor.uart.send(data, lambda level: ctx.set(self.rx_pin, level),
                                     ctx.delay, **kwargs)

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

    For each request it takes the payload from ``req`` (a ``tpugen.sim.amaranth_streams.Sink``:
    ``ready`` stalled with probability ``stall``), calls ``answer(type, length, payload) ->
    (reply_type,
    reply_bytes)``, then offers the reply on ``rsp`` (a ``Source``: offers withheld with
    probability ``stall``, and held once made, by the stream rules). ``delay`` cycles pass between
    the request and the reply. ``requests`` records ``(type, length, payload)``.
    """

    def __init__(self, dut, answer, *, stall: float = 0.0, delay: int = 0, seed: int = 0):
        self.dut = dut
        self.answer = answer
        self.stall = stall
        self.delay = delay
        self.seed = seed
        self.requests = []

    async def run(self, ctx):
        req, rsp = self.dut.req, self.dut.rsp
        cycle = 0
        for k in itertools.count():
            sink = Sink(req, p_stall=self.stall, seed=self.seed, stream=2 * k, name="req")
            while not (sink.items and sink.items[-1]["last"]):
                sink.drive(ctx)
                sink.sample(ctx, cycle)
                await ctx.tick()
                cycle += 1
            ctx.set(req.ready, 0)
            payload = bytes(b["data"] for b in sink.items if not b["empty"])
            ftype, length = sink.items[-1]["type"], sink.items[-1]["length"]
            self.requests.append((ftype, length, payload))
            if self.delay:
                await ctx.tick().repeat(self.delay)
                cycle += self.delay
            rtype, reply = self.answer(ftype, length, payload)
            beats = [{"data": b, "type": rtype, "length": len(reply),
                      "last": i == len(reply) - 1, "empty": 0}
                     for i, b in enumerate(reply)] or [
                {"data": 0, "type": rtype, "length": 0, "last": 1, "empty": 1}]
            source = Source(rsp, beats, p_stall=self.stall, seed=self.seed, stream=2 * k + 1,
                            name="rsp")
            while not source.done:
                source.drive(ctx)
                source.sample(ctx, cycle)
                await ctx.tick()
                cycle += 1
            source.stop(ctx)


class SimulatedBoard:
    """A design with UART pins (``rx``, ``tx``, idle high) in the Amaranth simulator, behind a
    pseudo-terminal, for host tools.

    ``port`` is the pty's path: open it with ``fpga.host.serial_link.Link(board.port)`` (any baud;
    the pty ignores it). Bytes the host writes are sent to ``dut.rx`` as UART bits at ``baud``, and
    ``dut.tx`` is decoded back into bytes for the host (``HostSide``; ``PtyServer.pump``).
    ``background``: more testbenches to run (e.g. an ``InsideStub``'s ``run``); ``busy``: a
    signal of the design that is high while it works on a request (the server then does not
    idle in real time). The simulation runs in a thread from ``start()`` (or ``with``) to
    ``stop()``; it is slow (a few thousand clocks per second), so keep frames short and
    timeouts long.
    """

    def __init__(self, dut, *, clk_freq: float, baud: float, background=(), busy=None):
        if not (hasattr(dut, "rx") and hasattr(dut, "tx")):
            raise TypeError(f"dut must have UART pins rx and tx, not {dut!r}")
        if isinstance(clk_freq, bool) or not isinstance(clk_freq, int | float) or clk_freq <= 0:
            raise ValueError(f"clk_freq must be a positive number (Hz), not {clk_freq!r}")
        self.dut = dut
        self.clk_freq, self.baud = clk_freq, baud
        self.host = HostSide(dut.rx, dut.tx, baud)
        self.background = tuple(background)
        self.busy = busy
        self.pty = PtyServer()
        self.port = self.pty.port
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error = None

    async def _serve(self, ctx):
        busy = (lambda: bool(ctx.get(self.busy))) if self.busy is not None else (lambda: False)
        await self.pty.pump(lambda data: self.host.send(ctx, data),
                            lambda: ctx.delay(POLL_BITS / self.baud),
                            self.host.monitor.data, self._stop.is_set, busy=busy)

    def _run(self):
        try:
            sim = Simulator(self.dut)
            sim.add_clock(1 / self.clk_freq)
            sim.add_testbench(self._serve)
            sim.add_testbench(self.host.monitor.run, background=True)
            for bench in self.background:
                sim.add_testbench(bench, background=True)
            sim.run()
        except BaseException as e:  # reported by stop()
            self.error = e

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.pty.close()
        if self.error is not None:
            raise self.error

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _echo(ftype, length, payload):
    return reply_type(ftype), payload


class SimulatedEndpoint(SimulatedBoard):
    """A ``LinkEndpoint(clk_freq, baud, **endpoint)`` behind a pty (``SimulatedBoard``), its
    inside an ``InsideStub`` (``inside``) calling ``answer`` (default: the reply echoes the
    request's payload)."""

    def __init__(self, *, clk_freq: float = 4e6, baud: float = 1e6, answer=None, **endpoint):
        dut = LinkEndpoint(clk_freq, baud, **endpoint)
        self.inside = InsideStub(dut, answer or _echo)
        super().__init__(dut, clk_freq=clk_freq, baud=baud, background=[self.inside.run])


def main(argv=None):
    """``python -m tpugen.tb.linksim``: serve a simulated link endpoint on a pty until
    interrupted."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    # Small: the Amaranth simulator is slow, and a frame this long takes seconds already.
    parser.add_argument("--max-payload", type=int, default=64)
    args = parser.parse_args(argv)
    with SimulatedEndpoint(max_payload=args.max_payload, timeout_bits=200) as board:
        print(f"simulated link endpoint on {board.port} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
