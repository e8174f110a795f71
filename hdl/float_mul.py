"""The float multiplier of a MAC cell: two operands (bf16, fp8_e4m3, fp8_e5m2) to binary32.

Contract (``float_product`` and ``FloatMul``):
  Inputs are the bit patterns of two operands of one float ``OperandType``; the output is the
  IEEE binary32 bit pattern of their product.
  - bf16 subnormal encodings read as a zero of their sign; fp8 subnormals keep their value.
  - The product is exact (at most 16 significand bits fit binary32's 24).
  - A product below 2**-126 in magnitude is a zero whose sign is the xor of the signs; one at
    or above 2**128 is an infinity (only bf16 can reach either; fp8 products are always
    normal binary32 numbers or zero).
  - NaN x anything and infinity x 0 give the NaN 0x7FC00000; e4m3 has no infinities (S.1111.111
    is its only NaN).

``FloatMul`` ports: ``a``, ``b`` ``In(fmt.width)``; ``p`` ``Out(32)``. ``latency`` (cycles from
``a``, ``b`` to ``p``): 0 combinational; 1 ``p`` registered; 2 ``a`` and ``b`` registered too.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import OperandType
from tpugen.hdl.float_parts import INF32, QNAN32, check_float_type, check_latency, leading_zeros

__all__ = ["float_product", "FloatMul"]


def _decode(v: Value, fmt: OperandType):
    """(sign, exponent, significand, is_nan, is_inf, is_zero) of an operand's bits. The
    exponent is the biased field, 1 for fp8 subnormals; the significand has its hidden bit."""
    e_bits, m_bits = fmt.exponent, fmt.mantissa
    top = (1 << e_bits) - 1
    sign, exp, frac = v[e_bits + m_bits], v[m_bits:m_bits + e_bits], v[:m_bits]
    if fmt.specials == "ieee":
        nan = (exp == top) & (frac != 0)
        inf = (exp == top) & (frac == 0)
    else:                                           # "fn": only S.1..1.1..1 is NaN
        nan = (exp == top) & (frac == (1 << m_bits) - 1)
        inf = Const(0)
    if fmt.subnormals:
        zero = (exp == 0) & (frac == 0)
        sig = Cat(frac, exp != 0)
        exp = exp | (exp == 0)                      # subnormals: 0.f * 2**(1 - bias)
    else:
        zero = exp == 0                             # subnormals read as zero
        sig = Cat(frac, Const(1))
    return sign, exp, sig, nan, inf, zero


def float_product(m: Module, a: Value, b: Value, fmt: OperandType) -> Value:
    """The binary32 bits of ``a * b`` (operand bit patterns of ``fmt``), combinational logic
    added to ``m`` (outside any control block). See the module docstring for the rules."""
    check_float_type(fmt)
    a, b = Value.cast(a), Value.cast(b)
    m_bits, bias = fmt.mantissa, fmt.bias
    sa, ea, siga, nana, infa, zeroa = _decode(a, fmt)
    sb, eb, sigb, nanb, infb, zerob = _decode(b, fmt)

    pw = 2 * m_bits + 2                             # product significand bits
    prod = Signal(pw, name="prod")
    m.d.comb += prod.eq(siga * sigb)
    if fmt.subnormals:                              # fp8: up to pw - 1 leading zeros
        lz, _ = leading_zeros(m, prod, name="prod_lz")
        max_lz = pw - 1
    else:                                           # both normal: the top bit or the next
        lz = ~prod[pw - 1]
        max_lz = 1
    norm = (prod << lz)[:pw]                        # leading one at bit pw - 1

    # value = prod * 2**(ea + eb - 2 * bias - 2 * m_bits); leading one at pw - 1 - lz, so the
    # biased binary32 exponent is ea + eb + 128 - 2 * bias - lz.
    offset = 128 - 2 * bias
    emax = (1 << fmt.exponent) - 1 if fmt.specials == "fn" else (1 << fmt.exponent) - 2
    lo, hi = 2 + offset - max_lz, 2 * emax + offset
    exp32 = Signal(range(min(lo, 0), max(hi, 255) + 1), name="prod_exp")
    m.d.comb += exp32.eq(ea + eb + offset - lz)

    sign = sa ^ sb
    nan = nana | nanb | (infa & zerob) | (zeroa & infb)
    inf = infa | infb
    zero = zeroa | zerob
    if hi > 254:
        inf = inf | (exp32 > 254)
    if lo < 1:
        zero = zero | (exp32 < 1)
    frac32 = Cat(Const(0, 23 - (pw - 1)), norm[:pw - 1])
    p = Signal(32, name="product")
    m.d.comb += p.eq(
        Mux(nan, QNAN32,
            Mux(inf, Cat(Const(INF32, 31), sign),
                Mux(zero, Cat(Const(0, 31), sign),
                    Cat(frac32, exp32[:8], sign)))))
    return p


class FloatMul(wiring.Component):
    """``p`` = the binary32 product of ``a`` and ``b`` (see the module docstring).

    Ports: ``a``, ``b`` ``In(fmt.width)`` (bit patterns); ``p`` ``Out(32)``.
    ``latency``: 0 combinational; 1 the product registered (``p`` one cycle after ``a``, ``b``);
    2 the inputs registered as well (two cycles).
    """

    def __init__(self, fmt: OperandType, *, latency: int = 0):
        check_float_type(fmt)
        check_latency(latency, 2)
        self.fmt = fmt
        self.latency = latency
        super().__init__({"a": In(fmt.width), "b": In(fmt.width), "p": Out(32)})

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        if self.latency == 2:
            a, b = Signal.like(self.a, name="a_q"), Signal.like(self.b, name="b_q")
            m.d.sync += [a.eq(self.a), b.eq(self.b)]
        p = float_product(m, a, b, self.fmt)
        if self.latency >= 1:
            m.d.sync += self.p.eq(p)
        else:
            m.d.comb += self.p.eq(p)
        return m
