"""The binary32 adder of a MAC cell (the accumulation of float products).

Contract (``fp32_add`` and ``Fp32Add``): ``s = x + y`` on IEEE binary32 bit patterns with
  - round to nearest, ties to even;
  - subnormal inputs read as zeros of their sign (DAZ), and a result below 2**-126 in magnitude
    is a zero of its sign (flush; for normal inputs such a result is exact, so flushing before
    or after rounding is the same);
  - signed zeros as IEEE 754: x + (-x) = +0, -0 + -0 = -0, +0 + -0 = +0;
  - overflow gives an infinity, inf + -inf the NaN 0x7FC00000, a NaN input the same NaN.

Datapath: the operands are swapped so that ``|a| >= |b|``; ``b``'s significand is aligned with
one right shifter keeping guard, round and sticky bits; a 28-bit add or subtract; one left
shifter normalizes by a leading-zero count (a carry out is the zero-count 0 case); RNE rounding
adds one to exponent and fraction together (a carry into the exponent is right, up to infinity).

``Fp32Add`` ports: ``x``, ``y`` ``In(32)``; ``s`` ``Out(32)``. ``latency``: 0 combinational,
1 ``s`` registered (one cycle after ``x``, ``y``).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.float_parts import INF32, QNAN32, check_latency, leading_zeros, shift_right_sticky

__all__ = ["fp32_add", "Fp32Add"]


def fp32_add(m: Module, x: Value, y: Value) -> Value:
    """The binary32 bits of ``x + y``, combinational logic added to ``m`` (outside any control
    block). See the module docstring for the rules."""
    x, y = Value.cast(x), Value.cast(y)
    sx, sy = x[31], y[31]
    x_special, y_special = x[23:31] == 0xFF, y[23:31] == 0xFF
    x_nan, y_nan = x_special & (x[:23] != 0), y_special & (y[:23] != 0)
    x_inf, y_inf = x_special & (x[:23] == 0), y_special & (y[:23] == 0)
    sub = sx ^ sy

    # a: the operand of larger magnitude, b: the other.
    a, b = Signal(32, name="add_a"), Signal(32, name="add_b")
    x_big = x[:31] >= y[:31]
    m.d.comb += [a.eq(Mux(x_big, x, y)), b.eq(Mux(x_big, y, x))]
    ea, eb = a[23:31], b[23:31]
    # a's hidden bit is taken as 1: if ea == 0 both read as zero and the result is a zero.
    # b, when subnormal or zero, contributes nothing (DAZ).
    sig_a = Cat(Const(0, 3), a[:23], Const(1))                     # 27 bits: sig, G, R, S
    sig_b = Mux(eb == 0, 0, Cat(Const(0, 3), b[:23], Const(1)))
    aligned = Signal(27, name="add_aligned")
    m.d.comb += aligned.eq(shift_right_sticky(sig_b, (ea - eb)[:8]))

    # |a| >= |b|, so a - b >= 0; the subtraction's carry out (always 1) is dropped.
    raw = sig_a + Mux(sub, ~aligned, aligned) + sub
    total = Signal(28, name="add_sum")
    m.d.comb += total.eq(Cat(raw[:27], raw[27] & ~sub))
    lz, total_zero = leading_zeros(m, total, name="add_lz")
    norm = Signal(28, name="add_norm")
    m.d.comb += norm.eq((total << lz)[:28])                         # leading one at bit 27

    exp = Signal(range(-32, 257), name="add_exp")                  # before rounding
    m.d.comb += exp.eq(ea + 1 - lz)
    lsb, rnd, sticky = norm[4], norm[3], norm[:3].any()
    rounded = Cat(norm[4:27], exp[:8]) + (rnd & (sticky | lsb))  # a carry may reach 0xFF: inf

    nan = x_nan | y_nan | (x_inf & y_inf & sub)
    inf = x_inf | y_inf | (exp > 254)
    exact_zero = (ea == 0) | total_zero                 # both zero, or x + (-x)
    s = Signal(32, name="sum")
    m.d.comb += s.eq(
        Mux(nan, QNAN32,
            Mux(inf, Cat(Const(INF32, 31), a[31]),
                Mux(exact_zero, Cat(Const(0, 31), sx & sy),
                    Mux(exp < 1, Cat(Const(0, 31), a[31]),
                        Cat(rounded[:31], a[31]))))))
    return s


class Fp32Add(wiring.Component):
    """``s = x + y`` in binary32 (see the module docstring).

    Ports: ``x``, ``y`` ``In(32)``; ``s`` ``Out(32)``. ``latency``: 0 combinational, 1 the sum
    registered (``s`` one cycle after ``x``, ``y``).
    """

    def __init__(self, *, latency: int = 0):
        check_latency(latency, 1)
        self.latency = latency
        super().__init__({"x": In(32), "y": In(32), "s": Out(32)})

    def elaborate(self, platform):
        m = Module()
        s = fp32_add(m, self.x, self.y)
        if self.latency:
            m.d.sync += self.s.eq(s)
        else:
            m.d.comb += self.s.eq(s)
        return m
