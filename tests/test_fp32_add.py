"""The binary32 adder against NumPy float32 addition (IEEE, round to nearest even) with the
contract's rules on top: subnormal inputs read as zeros of their sign, results below 2**-126
flushed to zeros of their sign; compared NaN-aware, otherwise bit for bit (signed zeros)."""

import numpy as np
import pytest
from amaranth.back import verilog
from float_helpers import assert_same, f32, flush32, simulate, simulate_pipelined
from helpers import assert_rejects

from tpugen.hdl.fp32_add import Fp32Add

#: binary32 specials (and their negations): zero, subnormals, smallest normals, one, the
#: largest finite, infinity, NaNs.
SPECIALS = [0x0000_0000, 0x0000_0001, 0x007F_FFFF, 0x0080_0000, 0x0080_0001, 0x0100_0000,
            0x3F80_0000, 0x3F80_0001, 0x3FFF_FFFF, 0x4B80_0000, 0x3380_0000, 0x7F00_0000,
            0x7F7F_FFFE, 0x7F7F_FFFF, 0x7F80_0000, 0x7F80_0001, 0x7FC0_0000]
SPECIALS += [v | 0x8000_0000 for v in SPECIALS]


def oracle(x, y) -> np.ndarray:
    """The bits of ``x + y`` by the contract: float32 addition between the flush rules."""
    with np.errstate(all="ignore"):
        s = flush32(flush32(f32(x)) + flush32(f32(y)))
    return s.astype(np.float32).view(np.uint32)


def check(x, y) -> None:
    got = simulate(Fp32Add(), {"x": x, "y": y}, "s")
    assert_same(got, oracle(x, y), "fp32", {"x": x, "y": y})


def bits(sign, exp, frac) -> np.ndarray:
    return (np.asarray(sign, np.uint64) << 31 | np.asarray(exp, np.uint64) << 23
            | np.asarray(frac, np.uint64))


def test_specials():
    x, y = np.meshgrid(SPECIALS, SPECIALS)
    check(x.ravel(), y.ravel())


def test_random_over_the_whole_range():
    rng = np.random.default_rng(1)
    n = 3000
    check(rng.integers(0, 1 << 32, n), rng.integers(0, 1 << 32, n))


def test_close_exponents_and_cancellation():
    rng = np.random.default_rng(2)
    n = 2000
    sx, sy = rng.integers(0, 2, n), rng.integers(0, 2, n)
    ex = rng.integers(1, 255, n)
    ey = (ex + rng.integers(-3, 4, n)).clip(1, 254)
    x = bits(sx, ex, rng.integers(0, 1 << 23, n))
    y = bits(sy, ey, rng.integers(0, 1 << 23, n))
    # x + -(x + k ulps): equal exponents, or one apart across a binade, cancelling to a few bits.
    base = bits(0, rng.integers(2, 254, n), rng.integers(0, 1 << 23, n))
    near = base + rng.integers(-4, 5, n).astype(np.uint64)
    edge = bits(0, rng.integers(2, 254, n), 0) + rng.integers(-4, 5, n).astype(np.uint64)
    s = rng.integers(0, 2, n).astype(np.uint64) << 31
    x = np.concatenate([x, base ^ s, bits(0, ex, 0) ^ s])
    y = np.concatenate([y, near ^ s ^ (1 << 31), edge ^ s ^ (1 << 31)])
    check(x, y)


def test_rounding_ties():
    """y's bits below x's last place are exactly one half (ties, both parities of x's last
    bit), or one half plus or minus one of y's last place."""
    rng = np.random.default_rng(3)
    n = 3000
    ex = rng.integers(30, 255, n)
    d = rng.integers(1, 26, n)                               # exponent difference
    x = bits(rng.integers(0, 2, n), ex, rng.integers(0, 1 << 23, n))
    frac = rng.integers(0, 1 << 23, n)
    low = np.minimum(d, 23)                                  # y bits below x's last place
    half = np.where(d <= 23, 1 << (low - 1), 0)
    frac = (frac >> low << low) + half + rng.choice([0, 0, 0, 1, -1], n) * (d <= 23)
    frac = frac.clip(0, (1 << 23) - 1)
    y = bits(rng.integers(0, 2, n), ex - d, frac)
    with np.errstate(over="ignore"):
        s64 = f32(x).astype(np.float64) + f32(y).astype(np.float64)    # exact
        r32 = s64.astype(np.float32)
    r64 = r32.astype(np.float64)
    tie = np.abs(s64 - r64) == np.abs(np.spacing(r32).astype(np.float64)) / 2
    up = np.abs(r64) > np.abs(s64)
    assert (tie & up).sum() > 200 and (tie & ~up).sum() > 200            # odd and even ties
    check(x, y)


def test_overflow_flush_and_far_apart():
    rng = np.random.default_rng(4)
    n = 1000
    same = rng.integers(0, 2, n)
    big = [bits(same, rng.integers(252, 255, n), rng.integers(0, 1 << 23, n)),
           bits(same, 254, (1 << 23) - rng.integers(1, 4, n))]
    # Opposite signs at the bottom of the range: differences below 2**-126 flush.
    small = [bits(0, rng.integers(1, 3, n), rng.integers(0, 1 << 23, n)),
             bits(1, rng.integers(1, 3, n), rng.integers(0, 1 << 23, n))]
    ex = rng.integers(27, 255, n)
    far = [bits(rng.integers(0, 2, n), ex, rng.integers(0, 1 << 23, n)),
           bits(rng.integers(0, 2, n), ex - rng.integers(26, ex.clip(max=90)), rng.integers(
               0, 1 << 23, n))]
    # A subnormal (read as zero) with anything.
    sub = [rng.integers(0, 1 << 32, n), bits(rng.integers(0, 2, n), 0, rng.integers(1, 1 << 23, n))]
    x = np.concatenate([big[0], small[0], far[0], sub[0], sub[1]])
    y = np.concatenate([big[1], small[1], far[1], sub[1], sub[0]])
    s = oracle(x, y)
    assert (s[:n] & 0x7FFF_FFFF == 0x7F80_0000).sum() > 300        # overflows
    flushed = (s[n:2 * n] & 0x7FFF_FFFF == 0).sum()
    assert flushed > 300 and flushed < n                            # flushes (and not all)
    check(x, y)


@pytest.mark.parametrize("latency", [0, 1])
def test_latency(latency):
    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 1 << 32, 200), rng.integers(0, 1 << 32, 200)
    dut = Fp32Add(latency=latency)
    if latency:
        got = simulate_pipelined(dut, {"x": x, "y": y}, "s", latency)
    else:
        got = simulate(dut, {"x": x, "y": y}, "s")
    assert_same(got, oracle(x, y), "fp32", {"x": x, "y": y})


def test_converts_to_verilog():
    text = verilog.convert(Fp32Add(latency=1), name="fp32_add")
    assert "module fp32_add" in text


def test_rejects_bad_arguments():
    assert_rejects(lambda: Fp32Add(latency=2), ValueError, r"latency must be in 0\.\.1, not 2")
    assert_rejects(lambda: Fp32Add(latency="1"), TypeError, "latency must be an integer, not '1'")
