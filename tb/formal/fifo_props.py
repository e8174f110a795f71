# amaranth: UnusedElaboratable=no
"""The weight FIFO's contract (``hdl.weight_fifo.WeightFIFO``), as a k-induction proof.

The solver drives ``w_in`` (any beats, within the stream rules) and ``w_out.ready`` (any value).
The harness counts the beats in and out (``W``-bit counters, enough to tell the beats in flight
apart) and follows one beat: ``AnyConst`` picks its number ``K`` and its payload ``D``. It
asserts:

- **order kept, nothing lost or duplicated**: the ``K``-th beat out is ``D``, the ``K``-th beat
  in (for every ``K`` and ``D``, hence for every beat);
- **count correct**: ``level`` is the beats in minus the beats out, at most ``storage``;
- **no overflow**: ``w_in.ready`` is high exactly while ``level < storage``; **no underflow**:
  ``w_out.valid`` only with ``level > 0``;
- the stream rules on ``w_out`` (``stream_check``).

Invariants on the FIFO's own registers (white-box, ``observe``): the ring pointers (its
memory's port addresses) and its count of rows held (a probe) agree with ``level``, and the
followed beat, while queued, is in the ring row the read pointer says (read through a
proof-only port of the memory), on the read register or in the holding register.

Mutants (each must make SBY fail, ``MUTANTS``): a wrapper that swallows the third beat offered
(acknowledged, never written); one that inverts a bit of the third beat out; a wrong
expected value (``ready`` asserted to fall one beat
early); a wrapper that drops ``w_out.valid`` for a cycle while a beat waits.
"""

from __future__ import annotations

from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cover, Module, Mux, Signal, Value
from amaranth.lib import stream

from tpugen.hdl.config import Config
from tpugen.hdl.weight_fifo import WeightFIFO
from tpugen.tb.formal.observe import Harness
from tpugen.tb.formal.stream_check import (
    free_sink,
    free_source,
    stream_rules,
    transfer,
)

__all__ = ["MUTANTS", "fifo_config", "weight_fifo_harness"]

#: The mutants ``weight_fifo_harness`` builds (each one change; SBY must find it).
MUTANTS = ("drop_beat", "corrupt_third", "ready_early", "valid_glitch")


def fifo_config(rows: int = 2, depth: int = 1) -> Config:
    """A small FIFO: ``depth`` tiles of ``rows`` beats, one 4-bit lane a beat."""
    return Config(rows=rows, cols=1, operand="int4", weight_fifo_depth=depth)


def _mod_add(a, b, n: int):
    """``(a + b) mod n`` for ``a, b < n``."""
    s = a + b
    return Mux(s >= n, s - n, s)


def weight_fifo_harness(config: Config, *, mutant: str | None = None, covers: bool = False):
    """The harness (see the module docstring); ``mutant`` one of ``MUTANTS``; ``covers`` adds
    the ``Cover`` statements (a full FIFO, a beat in and out in one cycle, the ring wrapped)."""
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"mutant must be one of {MUTANTS}, not {mutant!r}")
    fifo = WeightFIFO(config)
    h = Harness()
    m, dut = h.m, h.observe(fifo)
    storage, rows = fifo.storage, fifo.storage - 1
    beat_bits = len(Value.cast(fifo.w_in.payload))

    # The ports the harness sees: the FIFO's, or a mutant wrapper's.
    src = stream.Signature(fifo.beat_layout).flip().create(path=("src",))
    out = stream.Signature(fifo.beat_layout).create(path=("out",))
    _connect(m, fifo, src, out, mutant)
    free_source(m, src, "w_in")
    free_sink(m, out)
    stream_rules(m, out, "w_out")

    width = storage.bit_length() + 2
    n_in, n_out = Signal(width), Signal(width)
    take, give = transfer(src), transfer(out)
    m.d.sync += [n_in.eq(n_in + take), n_out.eq(n_out + give)]
    k, d = AnyConst(width), AnyConst(beat_bits)
    with m.If(src.valid & (n_in == k)):
        m.d.comb += Assume(Value.cast(src.payload) == d)
    level = fifo.level
    in_flight = Signal(width)
    m.d.comb += in_flight.eq(n_in - n_out)
    with m.If(give & (n_out == k)):
        m.d.comb += Assert(Value.cast(out.payload) == d, "a beat out is not the beat put in")
    m.d.comb += [
        Assert(level == in_flight, "level is not the beats in minus the beats out"),
        Assert(level <= storage, "level above the storage"),
        Assert(~out.valid | (level != 0), "a beat offered from an empty FIFO"),
    ]
    full = storage - 1 if mutant == "ready_early" else storage
    m.d.comb += Assert(src.ready == (level < full), "w_in.ready is not level < storage")

    # White-box invariants (what makes k-induction close).
    w_ptr, r_ptr = dut.write_addr("mem"), dut.read_addr("mem")
    held = dut.probe("held", range(rows + 1))
    on_port, kept = dut.probe("on_port", 1), dut.probe("kept", 1)
    port_data = dut.probe("port_data", beat_bits)
    outside = Signal(2)             # beats out of the ring: on the read port, held aside
    m.d.comb += [
        outside.eq(on_port + kept),
        Assert(held + outside == level),
        Assert(held <= rows),
        Assert(~kept | on_port, "a beat held aside with none on the port"),
        Assert(on_port | kept | (held <= 1), "the ring unread while it holds rows"),
        Assert(out.valid == (on_port | kept)),
        Assert((w_ptr < rows) & (r_ptr < rows)),
        Assert(w_ptr == _mod_add(r_ptr, Mux(held == rows, 0, held), rows)),
    ]
    off = Signal(width)
    m.d.comb += off.eq(k - n_out)
    queued = off < level
    row = Signal(len(r_ptr))
    m.d.comb += row.eq(_mod_add(r_ptr, (off - outside)[:len(r_ptr)], rows))
    peek = dut.peek(row, "mem")
    with m.If(queued & (off == 0) & (on_port | kept)):
        m.d.comb += Assert(Value.cast(fifo.w_out.payload) == d)
    with m.If(queued & (off == 1) & kept):
        m.d.comb += Assert(port_data == d)
    with m.If(queued & (off >= outside)):
        m.d.comb += Assert(peek == d)

    if covers:
        m.d.comb += [
            Cover(level == storage),
            Cover(take & give),
            Cover(n_out == storage + 2),
        ]
    return h


def _connect(m: Module, fifo: WeightFIFO, src, out, mutant) -> None:
    """Wire the harness's ``src`` and ``out`` ends to the FIFO, through a mutant if any."""
    i, o = fifo.w_in, fifo.w_out
    m.d.comb += i.payload.eq(src.payload)
    if mutant == "corrupt_third":
        # The third beat out has its lowest bit inverted.
        sent = Signal(2)
        with m.If(o.valid & o.ready & (sent != 3)):
            m.d.sync += sent.eq(sent + 1)
        m.d.comb += out.payload.eq(Value.cast(o.payload) ^ (sent == 2))
    else:
        m.d.comb += out.payload.eq(o.payload)
    if mutant == "drop_beat":
        # The third beat offered is acknowledged and never written.
        seen = Signal(2)
        drop = src.valid & (seen == 2)
        with m.If(src.valid & src.ready & (seen != 3)):
            m.d.sync += seen.eq(seen + 1)
        m.d.comb += [i.valid.eq(src.valid & ~drop), src.ready.eq(i.ready | drop)]
    else:
        m.d.comb += [i.valid.eq(src.valid), src.ready.eq(i.ready)]
    if mutant == "valid_glitch":
        # ``valid`` falls for one cycle while a beat has waited two cycles.
        waited = Signal(2)
        with m.If(o.valid & ~o.ready):
            m.d.sync += waited.eq(Mux(waited == 3, 3, waited + 1))
        with m.Else():
            m.d.sync += waited.eq(0)
        glitch = waited == 2
        m.d.comb += [out.valid.eq(o.valid & ~glitch), o.ready.eq(out.ready & ~glitch)]
    else:
        m.d.comb += [out.valid.eq(o.valid), o.ready.eq(out.ready)]
