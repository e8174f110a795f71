"""The activation unit's requantizer (``hdl.activation.ActivationUnit``, the parallel datapath)
against its spec, ``sim.requant``, as bounded model checks at its ports.

The spec is re-written here in Amaranth from ``sim.requant``'s formulas (TFLite's), not from
the datapath's: ``x = (acc + bias) mod 2**32``, ``x = (x * 2**max(e, 0)) mod 2**32``, gemmlowp's
``SaturatingRoundingDoublingHighMul`` (the product nudged by ``2**30`` or ``1 - 2**30`` by its
sign, then divided by ``2**31`` rounding toward zero; ``INT32_MIN * INT32_MIN`` saturates),
``RoundingDivideByPOT`` by ``max(-e, 0)`` (a remainder against a threshold: halves away from
zero), ``min(max(y + zp, act_min), act_max)``. The datapath computes other things (a floor
shift of the product plus ``2**30``, an add-then-shift rounding, a 10-bit window before the
zero point), so the check is of two formulations.

**Widths.** A 32 x 32 multiplier with both operands free is beyond the solver (a miter of two
multipliers), and so are the two 32-bit barrel shifters with every operand free (minutes without
an answer). So the checks are at reduced widths: the multiplier ``q`` is a constant of each
check (``REQUANT_MULTIPLIERS``: ``INT32_MIN``, the one that saturates, and the odd ``2**30 + 1``
and ``INT32_MAX`` of TFLite's range ``[2**30, 2**31)``), the accumulator and the bias have
``acc_bits`` free bits (sign-extended to 32), and the rest is free at its full width: every
shift -32..31 (left shifts that wrap included), the zero point and both bounds (``act_min >
act_max`` too). The parameter store is mapped to flip-flops in the netlist (``memory_map``: the
same behaviour; as an SMT array it hid that ``q`` is constant). Every rounding corner at full
width, other multipliers, and the serial datapath are checked by simulation
(``exhaustive.requant_corners``).

**The run.** One lane (``cols = 1``), one parameter set: the harness writes the set's twelve
READ_QUANT beats on ``qw`` (from its ``AnyConst`` values), then offers one row on ``i``, which is
taken at once; ``o`` is always ready (the pipeline's stalls are simulated, ``tests/
test_activation.py``). It asserts that one row comes out, ``latency`` cycles after it went in
(``activation_timing``), and that it is the spec's; a cover shows one.

**Mutants**: the spec rounding halves up instead of away from zero (a wrong expected value); the
datapath's "outside the window" flag tied to 0 in the netlist (``observe.Harness.mutate``).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cat, Const, Cover, Mux, Signal, signed

from tpugen.hdl.activation import ActivationUnit, activation_timing
from tpugen.hdl.config import Config
from tpugen.hdl.isa import (
    QUANT_BEATS,
    QUANT_BIAS_BEATS,
    QUANT_MAX_BEAT,
    QUANT_MIN_BEAT,
    QUANT_MULT_BEATS,
    QUANT_SHIFT_BEAT,
    QUANT_ZP_BEAT,
)
from tpugen.sim.requant import INT32_MAX, INT32_MIN
from tpugen.tb.formal.observe import Harness
from tpugen.tb.formal.stream_check import transfer

__all__ = ["REQUANT_MULTIPLIERS", "REQUANT_MUTANTS", "requant_harness", "requant_spec"]

#: The multipliers of the checks: the one that saturates, and odd ones of TFLite's range.
REQUANT_MULTIPLIERS = {"min": INT32_MIN, "half": (1 << 30) + 1, "max": INT32_MAX}
#: The mutants ``requant_harness`` builds.
REQUANT_MUTANTS = ("half_up", "no_window")


def requant_spec(m, acc, bias, q, e, zp, lo, hi, *, half_up: bool = False):
    """The spec's int8 result (``sim.requant.requantize_lanes`` of one lane) as an Amaranth
    value: all operands signed values (``acc``, ``bias``, ``q`` 32 bits, ``e`` 6, the rest 8)."""
    x0 = Signal(signed(32), name="spec_x0")
    m.d.comb += x0.eq((acc + bias)[:32])
    left = Mux(e[5], 0, e[:5])
    x = Signal(signed(32), name="spec_x")
    m.d.comb += x.eq((x0 << left)[:32])
    ab = Signal(signed(64), name="spec_ab")
    m.d.comb += ab.eq(x * q)
    nudged = Signal(signed(65), name="spec_nudged")
    m.d.comb += nudged.eq(ab + Mux(ab >= 0, 1 << 30, 1 - (1 << 30)))
    high = Signal(signed(65), name="spec_high")          # nudged / 2**31, toward zero
    m.d.comb += high.eq(Mux(nudged >= 0, nudged >> 31, -((-nudged) >> 31)))
    h = Signal(signed(32), name="spec_h")
    m.d.comb += h.eq(Mux((x == INT32_MIN) & (q == INT32_MIN), INT32_MAX, high))
    s = Signal(range(33), name="spec_s")
    m.d.comb += s.eq(Mux(e[5], -e, 0))
    mask = Signal(33, name="spec_mask")
    m.d.comb += mask.eq((Const(1, 34) << s) - 1)
    remainder = Signal(33, name="spec_rem")
    m.d.comb += remainder.eq(h.as_unsigned() & mask)
    threshold = Signal(34, name="spec_threshold")
    m.d.comb += threshold.eq((mask >> 1) + (0 if half_up else (h < 0)))
    y = Signal(signed(34), name="spec_y")
    m.d.comb += y.eq((h >> s) + (remainder > threshold))
    v = Signal(signed(35), name="spec_v")
    m.d.comb += v.eq(y + zp)
    clamped = Signal(signed(35), name="spec_clamped")
    m.d.comb += clamped.eq(Mux(v < lo, lo, v))
    out = Signal(signed(8), name="spec_out")
    m.d.comb += out.eq(Mux(clamped > hi, hi, clamped))
    return out


def requant_harness(multiplier: int = REQUANT_MULTIPLIERS["half"], *, mutant: str | None = None,
                    covers: bool = False, acc_bits: int = 12, shifts=range(-32, 32)):
    """The harness for the constant ``multiplier`` (an int32); see the module docstring.
    ``acc_bits``: the accumulator's and the bias's free bits (sign-extended to 32); ``shifts``:
    the shifts ``e`` allowed."""
    if mutant is not None and mutant not in REQUANT_MUTANTS:
        raise ValueError(f"mutant must be one of {REQUANT_MUTANTS}, not {mutant!r}")
    cfg = Config(rows=1, cols=1, operand="int8", acc_width=32, quant_sets=1)
    unit = ActivationUnit(cfg)
    h = Harness()
    m = h.m
    m.submodules.dut = unit
    h.transform("memory_map")     # the parameter store as flip-flops (an SMT array is slow)
    if mutant == "no_window":
        h.mutate("connect -set dut.y_out_0 1'b0")
    acc, bias = Signal(signed(32)), Signal(signed(32))
    m.d.comb += [acc.eq(AnyConst(signed(acc_bits))), bias.eq(AnyConst(signed(acc_bits)))]
    e = AnyConst(signed(6))
    m.d.comb += Assume((e >= shifts.start) & (e < shifts.stop))
    zp, lo, hi = AnyConst(signed(8)), AnyConst(signed(8)), AnyConst(signed(8))
    q = Const(multiplier, signed(32))

    # The set's beats, in order, one a cycle while ``qw`` takes them.
    beat = Signal(range(QUANT_BEATS + 1))
    byte = Signal(8)
    for k, b in enumerate(QUANT_BIAS_BEATS):
        with m.If(beat == b):
            m.d.comb += byte.eq(bias.as_unsigned().word_select(k, 8))
    for k, b in enumerate(QUANT_MULT_BEATS):
        with m.If(beat == b):
            m.d.comb += byte.eq(q.as_unsigned().word_select(k, 8))
    for b, value in ((QUANT_SHIFT_BEAT, Cat(e, e[5], e[5])), (QUANT_ZP_BEAT, zp),
                     (QUANT_MIN_BEAT, lo), (QUANT_MAX_BEAT, hi)):
        with m.If(beat == b):
            m.d.comb += byte.eq(value)
    m.d.comb += [unit.qw.valid.eq(beat != QUANT_BEATS), unit.qw.payload.set.eq(0),
                 unit.qw.payload.beat.eq(beat), unit.qw.payload.data[0].eq(byte)]
    m.d.sync += beat.eq(beat + transfer(unit.qw))

    # Then one row, taken at once; the result must come out ``latency`` cycles later
    # (``activation_timing``), and be the spec's.
    _, latency = activation_timing(cfg)
    sent, got = Signal(), Signal()
    wait = Signal(range(latency + 1))
    m.d.comb += [unit.i.valid.eq((beat == QUANT_BEATS) & ~sent),
                 unit.i.payload.row[0].eq(acc), unit.i.payload.qset.eq(0),
                 unit.o.ready.eq(1)]
    m.d.sync += sent.eq(sent | transfer(unit.i))
    with m.If(unit.i.valid & ~sent | sent & (wait != latency)):
        m.d.sync += wait.eq(wait + 1)
    spec = requant_spec(m, acc, bias, q, e, zp, lo, hi, half_up=mutant == "half_up")
    out = transfer(unit.o)
    m.d.comb += Assert(out == (wait == latency) & ~got, "the row out, at its time, once")
    with m.If(out):
        m.d.comb += Assert(unit.o.payload[0] == spec, "the row out is not the spec's")
        m.d.sync += got.eq(1)
    if covers:
        m.d.comb += Cover(out & (spec != zp))
    return h
