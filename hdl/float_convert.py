"""Binary32 to an operand float format (bf16, fp8_e4m3, fp8_e5m2), with an optional ReLU.

Contract (``from_fp32`` and ``FloatConvert``): ``y`` = the bits of ``x`` (binary32 bits) in
``fmt``:
  - ReLU first when ``relu`` is high: ``x > 0 ? x : +0.0``; a NaN stays a NaN, -0 becomes +0.
  - A binary32 subnormal reads as a zero of its sign.
  - Round to nearest, ties to even.
  - bf16: overflow rounds to infinity, infinities stay, a NaN gives the NaN 0x7FC0 (its sign).
  - fp8 (both): satfinite: infinities and values beyond the largest finite value give that
    value of their sign (e4m3 0x7E / 0xFE = 448, e5m2 0x7B / 0xFB = 57344); a NaN gives a NaN
    of its sign (e4m3 0x7F / 0xFF, e5m2 0x7E / 0xFE); results in the fp8 subnormal range round
    to fp8 subnormals or to a zero of the input's sign.

``FloatConvert`` ports: ``x`` ``In(32)``, ``relu`` ``In(1)``; ``y`` ``Out(fmt.width)``.
``latency``: 0 combinational, 1 ``y`` registered (one cycle after ``x``, ``relu``).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import OperandType
from tpugen.hdl.float_parts import check_float_type, check_latency, shift_right_sticky

__all__ = ["from_fp32", "FloatConvert"]


def from_fp32(m: Module, x: Value, fmt: OperandType, relu) -> Value:
    """The ``fmt`` bits of binary32 ``x`` (ReLU first when ``relu``, a 1-bit Value or a bool),
    combinational logic added to ``m`` (outside any control block). See the module docstring."""
    check_float_type(fmt)
    x, relu = Value.cast(x), Value.cast(relu)
    e_bits, m_bits, bias = fmt.exponent, fmt.mantissa, fmt.bias
    top = (1 << e_bits) - 1
    satfinite = fmt.width == 8                      # the OCP fp8 formats saturate
    if fmt.specials == "ieee":
        emax, max_code = top - 1, ((top - 1) << m_bits) | ((1 << m_bits) - 1)
        nan_code, inf_code = (top << m_bits) | (1 << (m_bits - 1)), top << m_bits
    else:                                           # "fn": no infinities, S.1..1.1..1 is NaN
        emax, max_code = top, (top << m_bits) | ((1 << m_bits) - 2)
        nan_code = inf_code = (top << m_bits) | ((1 << m_bits) - 1)
    over_code = max_code if satfinite else inf_code

    sx, ex, fx = x[31], x[23:31], x[:23]
    nan = (ex == 0xFF) & (fx != 0)
    inf = (ex == 0xFF) & (fx == 0)
    sign = sx & ~(relu & ~nan)                      # ReLU: a result that is not NaN is >= +0
    zero = (ex == 0) | (relu & sx)                  # DAZ; ReLU of x <= 0 (not NaN)

    # The target's biased exponent; below 1 the value is in the target's subnormal range.
    et_lo, et_hi = 1 - 127 + bias, 254 - 127 + bias
    et = Signal(range(min(et_lo, 0), max(et_hi, emax) + 1), name="cvt_exp")
    m.d.comb += et.eq(ex - 127 + bias)
    # hidden bit, the kept fraction, round bit, sticky bit
    sig = Cat(fx[:22 - m_bits].any(), fx[22 - m_bits], fx[23 - m_bits:], Const(1))
    if fmt.subnormals and et_lo < 1:
        # Shift right into the subnormal range; m_bits + 3 shifts everything out.
        shift = Mux(et >= 1, 0, Mux(et <= -(m_bits + 2), m_bits + 3, 1 - et))
        sig = shift_right_sticky(sig, shift[:(m_bits + 3).bit_length()])
        exp_field = Mux(et >= 1, et[:e_bits], 0)
    else:
        exp_field = et[:e_bits]
    lsb, rnd, sticky = sig[2], sig[1], sig[0]
    # A carry out of the fraction raises the exponent (subnormal to normal, or to overflow).
    code = Signal(e_bits + m_bits + 1, name="cvt_code")
    m.d.comb += code.eq(Cat(sig[2:m_bits + 2], exp_field) + (rnd & (sticky | lsb)))

    over = inf
    if et_hi > emax:
        over = over | (et > emax)
    if satfinite:
        over = over | (code > max_code)             # bf16: the carry gives inf_code itself
    underflow = Const(0)
    if not fmt.subnormals and et_lo < 1:
        underflow = et < 1                          # (no such format yet)

    y = Signal(fmt.width, name="converted")
    mag_bits = e_bits + m_bits
    m.d.comb += y.eq(
        Mux(nan, Cat(Const(nan_code, mag_bits), sx),
            Mux(zero | underflow, Cat(Const(0, mag_bits), sign),
                Mux(over, Cat(Const(over_code, mag_bits), sign),
                    Cat(code[:mag_bits], sign)))))
    return y


class FloatConvert(wiring.Component):
    """``y`` = binary32 ``x`` in ``fmt``, ReLU first when ``relu`` (see the module docstring).

    Ports: ``x`` ``In(32)``, ``relu`` ``In(1)``; ``y`` ``Out(fmt.width)``. ``latency``: 0
    combinational, 1 ``y`` registered (one cycle after ``x``, ``relu``).
    """

    def __init__(self, fmt: OperandType, *, latency: int = 0):
        check_float_type(fmt)
        check_latency(latency, 1)
        self.fmt = fmt
        self.latency = latency
        super().__init__({"x": In(32), "relu": In(1), "y": Out(fmt.width)})

    def elaborate(self, platform):
        m = Module()
        y = from_fp32(m, self.x, self.fmt, self.relu)
        if self.latency:
            m.d.sync += self.y.eq(y)
        else:
            m.d.comb += self.y.eq(y)
        return m
