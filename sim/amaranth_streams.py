"""Drive and watch ``amaranth.lib.stream`` ports from async Amaranth testbenches.

The drivers keep and check the stream rules of ``tpugen.sim.stream_rules`` (the same for
cocotb in ``tpugen.tb.cocotb_streams``).

``Source`` offers its items in order and obeys the rules; while it offers nothing it drives a
random payload, so a DUT that samples the payload without ``valid`` is caught. ``Sink`` takes
beats with ``ready`` stalled at random, and checks the DUT's side of the rules (``valid`` does
not drop and the payload does not change while an offer waits). The stalls come from
``tpugen.sim.stalls.StallPattern`` (``p_stall``, ``seed``, ``stream``), as in every harness.

Use: call ``drive(ctx)`` of every source and sink, then ``sample(ctx, cycle)``, then
``await ctx.tick()``, every cycle (``run_streams`` does this until all are done).
"""

import random

from amaranth.hdl import Value
from amaranth.lib import data
from amaranth.sim import Simulator

from tpugen.sim.stalls import StallPattern
from tpugen.sim.stream_rules import StreamRuleError

__all__ = ["Source", "Sink", "StreamRuleError", "run_streams", "simulate", "payload_bits",
           "to_py"]


def payload_bits(port) -> Value:
    """The raw bits of a stream's payload (a ``View`` or a plain value)."""
    return Value.cast(port.payload)


def to_py(value):
    """A simulator value as plain Python: an ``int``, a list (``ArrayLayout``) or a dict
    (``StructLayout``) of them, nested."""
    if isinstance(value, data.Const):
        layout = value.shape()
        if isinstance(layout, data.ArrayLayout):
            return [to_py(value[i]) for i in range(layout.length)]
        return {name: to_py(value[name]) for name, _ in layout}
    return int(value)


class Source:
    """Offers ``items`` on the DUT's input stream ``port``, in order: payload values (a dict or
    list for a structured payload) or ints (the payload's raw bits).

    ``cycles`` records the cycle of each transfer, ``offers`` the cycle each item was first
    offered in; ``done`` is true when all were taken.
    """

    def __init__(self, port, items, *, p_stall=0.0, seed=0, stream=0, name="source"):
        self.port = port
        self.items = list(items)
        self.stalls = StallPattern(p_stall, seed, stream)
        self.junk = random.Random(seed * 7919 + stream)
        self.name = name
        self.index = 0
        self.offered = False
        self.cycles = []
        self.offers = []
        self._since = None

    @property
    def done(self) -> bool:
        return self.index == len(self.items)

    def drive(self, ctx):
        if not self.offered and not self.done:
            self.offered = not self.stalls.stall()
        ctx.set(self.port.valid, self.offered)
        if self.offered:
            item = self.items[self.index]
            ctx.set(payload_bits(self.port) if isinstance(item, int) else self.port.payload, item)
        else:
            bits = payload_bits(self.port)
            ctx.set(bits, self.junk.getrandbits(len(bits)) if len(bits) else 0)

    def sample(self, ctx, cycle):
        if self.offered and self._since is None:
            self._since = cycle
        if self.offered and ctx.get(self.port.ready):
            self.index += 1
            self.cycles.append(cycle)
            self.offers.append(self._since)
            self.offered = False
            self._since = None

    def stop(self, ctx):
        """Stop offering (after ``done``)."""
        ctx.set(self.port.valid, 0)


class Sink:
    """Takes ``count`` beats from the DUT's output stream ``port`` (``count=None``: any number)
    and checks the rules on the DUT's side. ``items`` are the payloads (plain Python values),
    ``cycles`` their transfer cycles."""

    def __init__(self, port, count=None, *, p_stall=0.0, seed=0, stream=1, name="sink"):
        self.port = port
        self.count = count
        self.stalls = StallPattern(p_stall, seed, stream)
        self.name = name
        self.items = []
        self.cycles = []
        self.ready = False
        self.pending = None       # raw payload bits of an offer not taken yet

    @property
    def done(self) -> bool:
        return self.count is not None and len(self.items) >= self.count

    def drive(self, ctx):
        self.ready = not self.stalls.stall()
        ctx.set(self.port.ready, self.ready)

    def sample(self, ctx, cycle):
        valid = ctx.get(self.port.valid)
        bits = ctx.get(payload_bits(self.port)) if valid else None
        if self.pending is not None:
            if not valid:
                raise StreamRuleError(f"{self.name}: valid dropped before the transfer "
                                      f"(cycle {cycle})")
            if bits != self.pending:
                raise StreamRuleError(f"{self.name}: payload changed before the transfer "
                                      f"(cycle {cycle})")
        if valid and self.ready:
            if self.done:
                raise StreamRuleError(f"{self.name}: beat {len(self.items)} is one too many "
                                      f"(cycle {cycle})")
            self.items.append(to_py(ctx.get(self.port.payload)))
            self.cycles.append(cycle)
            self.pending = None
        else:
            self.pending = bits if valid else None


async def run_streams(ctx, sources=(), sinks=(), *, max_cycles=10_000, tail=8, start=0,
                      on_cycle=None):
    """Run cycles until every source is drained and every sink has its beats, then ``tail``
    more cycles in which the sinks stay ready and must see no further beat.

    ``on_cycle(ctx, cycle)`` (optional) runs after the drives, before the samples. Returns the
    cycle count at the end (``start`` plus the cycles run).
    """
    cycle = start
    while not (all(s.done for s in sources) and all(k.done for k in sinks)):
        if cycle - start >= max_cycles:
            raise TimeoutError(
                f"no progress after {max_cycles} cycles: "
                + ", ".join(f"{s.name} sent {s.index}/{len(s.items)}" for s in sources) + "; "
                + ", ".join(f"{k.name} got {len(k.items)}/{k.count}" for k in sinks))
        for s in (*sources, *sinks):
            s.drive(ctx)
        if on_cycle is not None:
            on_cycle(ctx, cycle)
        for s in (*sources, *sinks):
            s.sample(ctx, cycle)
        await ctx.tick()
        cycle += 1
    for s in sources:
        s.stop(ctx)
    for _ in range(tail):
        for k in sinks:
            ctx.set(k.port.ready, 1)
            if ctx.get(k.port.valid):
                raise StreamRuleError(f"{k.name}: an extra beat after the last one")
        await ctx.tick()
        cycle += 1
    return cycle


def simulate(dut, bench, vcd=None) -> None:
    """Run the async testbench ``bench`` on ``dut`` with a 100 MHz clock to its end, writing a
    VCD to ``vcd`` when that is given."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
