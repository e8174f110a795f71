"""Drive and watch ``lib.stream`` interfaces from async Amaranth testbenches, with random stalls.

A *source* offers ``items`` on a DUT's input stream in order; in each cycle it withholds
``valid`` with probability ``p_stall`` (also retracting an offer that was not taken, which a
correct sink must tolerate) and drives a random payload while ``valid`` is low, so a DUT that
samples the payload without ``valid`` is caught. A *sink* takes ``count`` beats from a DUT's
output stream, withholding ``ready`` with probability ``p_stall``, and checks the stream rules
on the DUT's side: ``valid`` does not drop and the payload does not change while an offer waits.
"""

import gc
import random
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable, Value

__all__ = ["Source", "Sink", "run_streams", "payload_bits", "to_py", "assert_rejects"]


def assert_rejects(make, exc, match):
    """``make()`` raises ``exc`` matching ``match``. The component object that Amaranth created
    before ``__init__`` raised is collected here, so its "created but never used" warning
    (it never was elaborated) does not surface in a later test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(exc, match=match):
            make()
        gc.collect()


def payload_bits(port) -> Value:
    """The raw bits of a stream's payload (a ``View`` or a plain value)."""
    return Value.cast(port.payload)


def to_py(value):
    """A simulator value as plain Python: an ``int`` or a (nested) list of ints."""
    if isinstance(value, int):
        return value
    try:
        return [to_py(x) for x in value]
    except TypeError:
        return int(value)


class Source:
    def __init__(self, port, items, *, p_stall=0.3, rng=None, name="source"):
        self.port = port
        self.items = list(items)
        self.p_stall = p_stall
        self.rng = rng or random.Random(0)
        self.name = name
        self.index = 0
        self.offered = False
        self.cycles = []          # cycle of each transfer

    @property
    def done(self):
        return self.index == len(self.items)

    def drive(self, ctx):
        self.offered = not self.done and self.rng.random() >= self.p_stall
        ctx.set(self.port.valid, self.offered)
        if self.offered:
            ctx.set(self.port.payload, self.items[self.index])
        else:
            bits = payload_bits(self.port)
            ctx.set(bits, self.rng.getrandbits(len(bits)) if len(bits) else 0)

    def sample(self, ctx, cycle):
        if self.offered and ctx.get(self.port.ready):
            self.index += 1
            self.cycles.append(cycle)


class Sink:
    def __init__(self, port, count, *, p_stall=0.3, rng=None, name="sink"):
        self.port = port
        self.count = count
        self.p_stall = p_stall
        self.rng = rng or random.Random(1)
        self.name = name
        self.items = []
        self.cycles = []          # cycle of each transfer
        self.ready = False
        self.pending = None       # raw payload bits of an offer not taken yet

    @property
    def done(self):
        return len(self.items) >= self.count

    def drive(self, ctx):
        self.ready = self.rng.random() >= self.p_stall
        ctx.set(self.port.ready, self.ready)

    def sample(self, ctx, cycle):
        valid = ctx.get(self.port.valid)
        bits = ctx.get(payload_bits(self.port))
        if self.pending is not None:
            assert valid, f"{self.name}: valid dropped before the transfer (cycle {cycle})"
            assert bits == self.pending, (
                f"{self.name}: payload changed before the transfer (cycle {cycle})")
        if valid and self.ready:
            assert not self.done, f"{self.name}: beat {len(self.items)} is one too many"
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
        assert cycle - start < max_cycles, (
            "timeout: " + ", ".join(f"{s.name} sent {s.index}/{len(s.items)}" for s in sources)
            + "; " + ", ".join(f"{k.name} got {len(k.items)}/{k.count}" for k in sinks))
        for s in (*sources, *sinks):
            s.drive(ctx)
        if on_cycle is not None:
            on_cycle(ctx, cycle)
        for s in (*sources, *sinks):
            s.sample(ctx, cycle)
        await ctx.tick()
        cycle += 1
    for s in sources:
        ctx.set(s.port.valid, 0)
    for _ in range(tail):
        for k in sinks:
            ctx.set(k.port.ready, 1)
            assert not ctx.get(k.port.valid), f"{k.name}: an extra beat after the last one"
        await ctx.tick()
        cycle += 1
    return cycle
