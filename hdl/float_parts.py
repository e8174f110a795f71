"""Pieces the float units share: argument checks, a leading-zero count, a sticky right shift.

All helpers build combinational logic only; those that take a ``Module`` add unconditional
``m.d.comb`` assignments, so call them outside any ``m.If`` / ``m.Switch`` block.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value

from tpugen.hdl.config import OperandType

__all__ = ["check_float_type", "check_latency", "leading_zeros", "shift_right_sticky",
           "QNAN32", "INF32"]

#: The binary32 NaN the units produce (quiet, positive).
QNAN32 = 0x7FC0_0000
#: The bits of binary32 +infinity (``| 1 << 31`` for -infinity).
INF32 = 0x7F80_0000


def check_float_type(fmt) -> None:
    """``TypeError`` unless ``fmt`` is a float ``OperandType``."""
    if not isinstance(fmt, OperandType) or not fmt.is_float:
        raise TypeError(f"fmt must be a float OperandType, not {fmt!r}")


def check_latency(latency, hi: int) -> None:
    """``TypeError`` / ``ValueError`` unless ``latency`` is an integer in ``0..hi``."""
    if not isinstance(latency, int) or isinstance(latency, bool):
        raise TypeError(f"latency must be an integer, not {latency!r}")
    if not 0 <= latency <= hi:
        raise ValueError(f"latency must be in 0..{hi}, not {latency!r}")


def _lzc_tree(bits: Value) -> tuple[Value, Value]:
    """(count, all_zero) of ``bits`` (a power-of-two width >= 2); count is valid when any bit
    is set (all ones when none is)."""
    if len(bits) == 2:
        return ~bits[1], ~(bits[0] | bits[1])
    half = len(bits) // 2
    lo_count, lo_zero = _lzc_tree(bits[:half])
    hi_count, hi_zero = _lzc_tree(bits[half:])
    return Cat(Mux(hi_zero, lo_count, hi_count), hi_zero), hi_zero & lo_zero


def leading_zeros(m: Module, v: Value, name: str = "lz") -> tuple[Signal, Signal]:
    """``(count, zero)``: the leading zeros of ``v`` (a binary tree of 2-way muxes) and whether
    ``v`` is all zero; ``count`` is only meaningful when ``zero`` is low."""
    v = Value.cast(v)
    width = 2
    while width < len(v):
        width *= 2
    count, zero = _lzc_tree(Cat(Const(0, width - len(v)), v))
    count_sig = Signal(len(count), name=f"{name}_count")
    zero_sig = Signal(name=f"{name}_zero")
    m.d.comb += [count_sig.eq(count), zero_sig.eq(zero)]
    return count_sig, zero_sig


def shift_right_sticky(v: Value, amount: Value) -> Value:
    """``v >> amount`` with the bits shifted out ORed into bit 0 (the sticky bit of a rounding
    datapath); ``amount`` may exceed ``len(v)`` (then everything is sticky)."""
    v, amount = Value.cast(v), Value.cast(amount)
    lost = Cat(v[i] & (amount > i) for i in range(len(v))).any()
    shifted = (v >> amount)[:len(v)]
    return shifted | lost
