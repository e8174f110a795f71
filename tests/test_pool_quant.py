"""Averages on the requantizer (``tpugen.compiler.pool_quant``): for every sum a window of int8
values can make, the parameter set found gives TFLite Micro's AVERAGE_POOL_2D output (the
interpreter, on one channel per sum) and the exact rational rounding."""

from fractions import Fraction

import numpy as np
import pytest

from tpugen.compiler.pool_quant import average_quant, tflite_average
from tpugen.sim.requant import requantize_lanes
from tpugen.tflite.oracle import run_tflite_micro
from tpugen.tflite.writer import ModelWriter


def _apply(q, sums):
    return requantize_lanes(sums, q.bias, q.multiplier, q.shift, q.out_zp, q.act_min,
                            q.act_max)


def _windows(k: int) -> tuple[np.ndarray, np.ndarray]:
    """One k x k window of int8 values per possible sum (as channels), and the sums."""
    count = k * k
    sums = np.arange(-128 * count, 127 * count + 1)
    base, extra = np.divmod(sums - -128 * count, count)
    values = np.full((count, len(sums)), -128, dtype=np.int64) + base
    values += np.arange(count)[:, None] < extra
    assert values.min() >= -128 and values.max() <= 127
    assert np.array_equal(values.sum(axis=0), sums)
    return values.reshape(k, k, len(sums)), sums


@pytest.mark.parametrize("k", [2, 3, 5, 7])
def test_every_sum_equals_tflite_micro(k):
    x, sums = _windows(k)
    mw = ModelWriter()
    t = mw.input((1, k, k, len(sums)), 0.1, 3)
    data = mw.build(mw.average_pool(t, k, k))
    want = run_tflite_micro(data, x[None].astype(np.int8), stacked=False).reshape(-1)
    q = average_quant(k * k)
    assert q is not None
    assert np.array_equal(_apply(q, sums), want)


@pytest.mark.parametrize("count", [1, 2, 4, 6, 9, 10, 25, 49, 64, 100, 125])
def test_exact_rounding(count):
    sums = np.arange(-128 * count, 127 * count + 1)
    q = average_quant(count, -100, 90)
    want = []
    for s in sums.tolist():
        f = Fraction(s, count)
        r = int(abs(f) + Fraction(1, 2)) * (1 if f >= 0 else -1)     # half away from zero
        want.append(min(max(r, -100), 90))
    assert _apply(q, sums).tolist() == want
    assert tflite_average(sums, count).tolist() == [
        int(abs(Fraction(s, count)) + Fraction(1, 2)) * (1 if s >= 0 else -1)
        for s in sums.tolist()]


def test_a_normalized_multiplier_would_miss():
    """Why the search uses a left shift: the normalized multiplier of 1/9 (shift -3) rounds
    twice and misses 255 of the 2,296 sums."""
    sums = np.arange(-128 * 9, 127 * 9 + 1)
    got = requantize_lanes(sums, 0, round(2 ** 34 / 9), -3, 0, -(1 << 31), (1 << 31) - 1)
    assert int((got != tflite_average(sums, 9)).sum()) == 255


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"^count must be an integer in 1\.\.65536, not 0$"):
        average_quant(0)
    with pytest.raises(ValueError, match=r"^lo must be at most hi, not 5 > 4$"):
        average_quant(3, lo=5, hi=4)
