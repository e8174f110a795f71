"""Averages on the requantizer: a TFLite int8 average over ``count`` values as one ACTIVATE.

TFLite's int8 AVERAGE_POOL_2D (``reference_integer_ops::AveragePool``) sums the window's
in-bounds values (raw int8, no zero point: input and output share their quantization) and
divides by their count rounding to nearest, ties away from zero (``(acc + count / 2) / count``
for a positive sum, ``(acc - count / 2) / count`` else, C++ integer division), then clamps to
the fused activation's bounds. On tpugen the sum is a window walk with identity tiles (a
pixel outside the plane adds the pad lane, 0), and the division is the activation unit's
requantization with bias 0 and zero point 0: ``rounding_divide_by_pot(srdhm(acc << max(e, 0),
q), max(-e, 0))``. A normalized multiplier (``q`` in 2**30..2**31 - 1) needs a right shift
after the high multiply, and those two roundings in a row miss TFLite's for most counts (an odd
count's sums round to a tie in between); a left shift with a small ``q`` rounds once, with 31
bits of precision, which is exact for every sum an int8 window makes. ``average_quant``
searches the shifts and multipliers and checks every sum, so a parameter set it returns is
exact and the caller runs anything else on the host.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from tpugen.sim.requant import QuantParams, requantize_lanes

__all__ = ["tflite_average", "average_quant"]

#: Multipliers tried on each side of the nearest one, per shift.
_SPREAD = 16


def _count(count) -> int:
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 1 << 16:
        raise ValueError(f"count must be an integer in 1..65536, not {count!r}")
    return count


def tflite_average(sums: np.ndarray, count: int) -> np.ndarray:
    """TFLite's rounded average of ``sums`` over ``count`` values (before the clamp)."""
    count = _count(count)
    s = np.asarray(sums, dtype=np.int64)
    half = count // 2
    # C++ division truncates toward zero
    return np.where(s > 0, (s + half) // count, -((-s + half) // count))


@cache
def _search(count: int, lo: int, hi: int) -> tuple[int, int] | None:
    sums = np.arange(count * lo, count * hi + 1, dtype=np.int64)
    want = tflite_average(sums, count)
    for e in range(1, -32, -1):
        # q / 2**31 * 2**e = 1 / count
        nearest = round(2 ** (31 - e) / count)
        for q in sorted(range(nearest - _SPREAD, nearest + _SPREAD + 1),
                        key=lambda v: abs(v - nearest)):
            if not 1 <= q < 1 << 31:
                continue
            got = requantize_lanes(sums, 0, q, e, 0, -(1 << 31), (1 << 31) - 1)
            if np.array_equal(got, want):
                return q, e
    return None


def average_quant(count: int, act_min: int = -128, act_max: int = 127, *,
                  lo: int = -128, hi: int = 127) -> QuantParams | None:
    """The parameter set that turns the sum of ``count`` operands in ``lo..hi`` into TFLite's
    clamped average, exactly for every such sum; ``None`` when no multiplier does."""
    count = _count(count)
    for name, v in (("lo", lo), ("hi", hi)):
        if not isinstance(v, int) or not -128 <= v <= 127:
            raise ValueError(f"{name} must be an integer in -128..127, not {v!r}")
    if lo > hi:
        raise ValueError(f"lo must be at most hi, not {lo} > {hi}")
    found = _search(count, lo, hi)
    if found is None:
        return None
    q, e = found
    return QuantParams(bias=0, multiplier=q, shift=e, out_zp=0, act_min=act_min,
                       act_max=act_max)
