# amaranth: UnusedElaboratable=no
"""The MAC cell's contract (``hdl.cell.Cell``) and fixed delay lines (``hdl.delay``), as
k-induction proofs.

Cell: the solver drives every input in every cycle. The harness keeps its own shadow and
active weights, updated by the rules of the docstring (``w_load`` writes the shadow; a cycle
with ``first_in`` uses the shadow and copies it to the active weight), and asserts, for every
cycle: ``ps_out = ps_in + a * w`` of the operands ``cell_pipeline`` cycles earlier (wrapped to
the partial sum's width), ``a_out`` and ``first_out`` the inputs of the cycle before. For float
operand types the proof stops at the multiplier's weight operand (the weight switch and the
flags): the miter of two binary32 adders does not close (k-induction ran for minutes), and the
arithmetic is checked on its own, exhaustively for fp8 (``exhaustive``). Invariants: the cell's
weight registers (probes, ``observe``) equal the harness's.

Delay line: a ring buffer in a memory (``delay`` of 16 cycles or more) gives each value exactly
``cycles`` cycles later; one value, picked by ``AnyConst``, is followed through the memory.

Mutants: the cell's own debug fault (``fault=True``: the product's lowest bit inverted); a wrong
expected value (the harness switches weights one cycle late).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, Signal, signed

from tpugen.hdl.cell import Cell
from tpugen.hdl.config import Config
from tpugen.hdl.delay import delay
from tpugen.tb.formal.observe import Harness

__all__ = ["CELL_MUTANTS", "cell_harness", "DelayLine", "delay_harness"]

#: The mutants ``cell_harness`` builds.
CELL_MUTANTS = ("fault", "late_switch")


def cell_harness(operand: str = "int4", pipeline: int = 0, *, mutant: str | None = None,
                 covers: bool = False):
    """The cell harness for ``operand`` with ``cell_pipeline = pipeline``; integer cells carry
    partial sums as wide as one product (the narrowest the array uses)."""
    if mutant is not None and mutant not in CELL_MUTANTS:
        raise ValueError(f"mutant must be one of {CELL_MUTANTS}, not {mutant!r}")
    acc = 32 if operand in ("bf16", "fp8_e4m3", "fp8_e5m2") else 16
    config = Config(rows=1, cols=1, operand=operand, acc_width=acc, cell_pipeline=pipeline)
    ot = config.operand_type
    ps_width = 32 if ot.is_float else ot.product_width
    cell = Cell(config, fault=mutant == "fault", ps_width=ps_width)
    h = Harness()
    m, dut = h.m, h.observe(cell)
    ow = ot.width
    for port in (cell.a_in, cell.first_in, cell.ps_in, cell.w_data, cell.w_load):
        m.d.comb += port.eq(AnySeq(len(port)))

    shadow, active = Signal(signed(ow)), Signal(signed(ow))
    w = Signal(signed(ow))
    late = mutant == "late_switch"
    m.d.comb += w.eq(active if late else Mux(cell.first_in, shadow, active))
    with m.If(cell.first_in):
        m.d.sync += active.eq(shadow)
    with m.If(cell.w_load):
        m.d.sync += shadow.eq(cell.w_data)

    a, wd = cell.a_in, w
    for k in range(pipeline):
        a_k, w_k = Signal(signed(ow), name=f"a_d{k}"), Signal(signed(ow), name=f"w_d{k}")
        m.d.sync += [a_k.eq(a), w_k.eq(wd)]
        a, wd = a_k, w_k
    ps_prev, a_prev, first_prev = Signal.like(cell.ps_out), Signal.like(cell.a_in), Signal()
    m.d.sync += [a_prev.eq(cell.a_in), first_prev.eq(cell.first_in)]
    if ot.is_float:
        # The multiplier's operands (the sum's miter of two binary32 adders does not close).
        m.d.comb += Assert(dut.probe("w", signed(ow)) == w, "the weight into the multiplier")
    else:
        m.d.sync += ps_prev.eq(cell.ps_in + a * wd)
        m.d.comb += Assert(cell.ps_out == ps_prev, "ps_out is not ps_in + a * w")
    m.d.comb += [
        Assert(cell.a_out == a_prev, "a_out is not a_in delayed"),
        Assert(cell.first_out == first_prev, "first_out is not first_in delayed"),
        Assert(dut.probe("w_shadow", signed(ow)) == shadow, "the shadow weight"),
    ]
    if not late:
        m.d.comb += Assert(dut.probe("w_active", signed(ow)) == active, "the active weight")
    if covers:
        # A tile switch with a shadow write in the same cycle, then a non-zero product.
        both = Signal()
        m.d.sync += both.eq(cell.first_in & cell.w_load)
        m.d.comb += Cover(both & (active != shadow) & (cell.a_in != 0) & (w != 0))
    return h


class DelayLine(Elaboratable):
    """``o`` is ``i`` delayed by ``cycles`` cycles, by ``hdl.delay.delay``."""

    def __init__(self, width: int, cycles: int):
        self.width, self.cycles = width, cycles
        self.i = Signal(width)
        self.o = Signal(width)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(delay(m, self.i, self.cycles, name="line"))
        return m


def delay_harness(cycles: int = 17, width: int = 4, *, mutant: str | None = None):
    """The delay line of ``cycles`` (16 or more: a ring buffer in a memory) and ``width`` bits.
    ``mutant="short"`` expects the value one cycle early (SBY must fail)."""
    line = DelayLine(width, cycles)
    h = Harness()
    m, dut = h.m, h.observe(line)
    m.d.comb += line.i.eq(AnySeq(width))
    ptr = dut.write_addr("line")        # the ring's pointer (the write address)
    depth = 1 << len(ptr)
    t = Signal(len(ptr) + 2)
    m.d.sync += t.eq(t + 1)
    k, d = AnyConst(len(t)), AnyConst(width)
    with m.If(t == k):
        m.d.comb += Assume(line.i == d)
    expect = cycles - 1 if mutant == "short" else cycles
    age = Signal(len(t))          # cycles since the last cycle with t == k
    m.d.comb += age.eq(t - k)
    since = Signal(range(depth + 1))   # cycles run so far, saturating at the ring's depth
    with m.If(since != depth):
        m.d.sync += since.eq(since + 1)
    with m.If((age == expect) & (age <= since)):
        m.d.comb += Assert(line.o == d, "the value out is not the value in, delayed")
    m.d.comb += Assert(ptr == t[:len(ptr)])
    with m.If((age >= 1) & (age < depth) & (age <= since)):
        m.d.comb += Assert(dut.peek(k[:len(ptr)], "line") == d)
    return h
