# amaranth: UnusedElaboratable=no
"""The accumulator buffer's read-modify-write (``hdl.accumulator.AccumulatorBuffer``), as a
k-induction proof.

The solver makes any write requests (row, overwrite or accumulate, data two cycles later) and
reads, within the rules of the docstring, which the harness assumes: requests to one row at
least ``ACC_REPEAT_GAP`` cycles apart, no read of a row within ``ACC_WRITE_LATENCY`` cycles of
a request to it. The harness follows one row ``A`` (``AnyConst``): its model value is zero at
reset and becomes ``data`` (overwrite) or ``old + data`` lane by lane, wrapped to
``acc_width`` (accumulate), in the cycle a request's data comes. It asserts that a read of
``A`` returns the model's value the cycle after ``rd_en``, and that ``rd_data`` holds while
``rd_en`` is low. Invariant (white-box, ``observe``: a proof-only read port of the memory):
the memory's row ``A`` is the model's value.

Mutants: a broken assumption (requests to one row two cycles apart: the documented gap is
needed); a wrong expected value (an overwrite that keeps adding the old value).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Mux, Signal, Value

from tpugen.hdl.accumulator import ACC_REPEAT_GAP, AccumulatorBuffer
from tpugen.hdl.config import Config
from tpugen.tb.formal.observe import Harness

__all__ = ["ACC_MUTANTS", "accumulator_harness"]

#: The mutants ``accumulator_harness`` builds.
ACC_MUTANTS = ("gap2", "overwrite_adds")


def accumulator_harness(rows: int = 4, cols: int = 2, *, mutant: str | None = None,
                        covers: bool = False):
    """The harness for ``rows`` accumulator rows of ``cols`` 16-bit lanes."""
    if mutant is not None and mutant not in ACC_MUTANTS:
        raise ValueError(f"mutant must be one of {ACC_MUTANTS}, not {mutant!r}")
    config = Config(rows=1, cols=cols, operand="int4", acc_width=16, acc_rows=rows)
    acc = AccumulatorBuffer(config)
    h = Harness()
    m, dut = h.m, h.observe(acc)
    for port in (acc.wr_valid, acc.wr_addr, acc.wr_accumulate, acc.wr_data, acc.rd_en,
                 acc.rd_addr):
        v = Value.cast(port)
        m.d.comb += v.eq(AnySeq(len(v)))
    m.d.comb += Assume((acc.wr_addr < rows) & (acc.rd_addr < rows))

    # The requests of the last two cycles (the rules look back that far).
    gap = 2 if mutant == "gap2" else ACC_REPEAT_GAP
    past = [(acc.wr_valid, acc.wr_addr, acc.wr_accumulate)]
    for k in range(ACC_REPEAT_GAP - 1):
        v, a, x = Signal(name=f"req{k}_valid"), Signal.like(acc.wr_addr), Signal(name=f"req{k}_acc")
        m.d.sync += [v.eq(past[-1][0]), a.eq(past[-1][1]), x.eq(past[-1][2])]
        past.append((v, a, x))
    for v, a, _ in past[1:gap]:
        m.d.comb += Assume(~(acc.wr_valid & v & (a == acc.wr_addr)))
    for v, a, _ in past:
        m.d.comb += Assume(~(acc.rd_en & v & (a == acc.rd_addr)))

    # The followed row and its model value.
    row = AnyConst(len(acc.wr_addr))
    m.d.comb += Assume(row < rows)
    width = config.acc_width
    model = Signal(len(Value.cast(acc.wr_data)))
    v2, a2, x2 = past[2]
    lanes = []
    for j in range(cols):
        old = model[j * width:(j + 1) * width]
        new = Value.cast(acc.wr_data)[j * width:(j + 1) * width]
        keep = x2 | (mutant == "overwrite_adds")
        lanes.append(Mux(keep, old + new, new)[:width])
    with m.If(v2 & (a2 == row)):
        m.d.sync += model.eq(Cat(*lanes))

    reading, expect = Signal(), Signal.like(model)
    m.d.sync += [reading.eq(acc.rd_en & (acc.rd_addr == row)), expect.eq(model)]
    with m.If(reading):
        m.d.comb += Assert(Value.cast(acc.rd_data) == expect, "a read is not the model's row")
    was_en, data_before = Signal(), Signal.like(model)
    m.d.sync += [was_en.eq(acc.rd_en), data_before.eq(Value.cast(acc.rd_data))]
    started = Signal()
    m.d.sync += started.eq(1)
    with m.If(started & ~was_en):
        m.d.comb += Assert(Value.cast(acc.rd_data) == data_before, "rd_data changed unread")
    m.d.comb += Assert(dut.peek(row, "mem") == model)

    if covers:
        # Two accumulations into the followed row, then a read of a non-zero sum.
        hits = Signal(2)
        with m.If(v2 & x2 & (a2 == row) & (hits != 3)):
            m.d.sync += hits.eq(hits + 1)
        m.d.comb += Cover(reading & (hits == 2) & (expect != 0))
    return h
