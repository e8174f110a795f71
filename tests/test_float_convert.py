"""The binary32 -> operand-format conversion against ml_dtypes (round to nearest even) with the
contract's rules on top: ReLU first, binary32 subnormals read as zero, fp8 satfinite (clamp to
the largest finite value before converting). Vectors: every fp8 value and every midpoint
between neighbours (and one binary32 step either side), the saturation limits, specials, bf16
midpoints at random exponents, random binary32 patterns; each with ReLU off and on."""

import numpy as np
import pytest
from amaranth.back import verilog
from float_helpers import (
    DTYPES,
    FLOAT_TYPES,
    UINTS,
    assert_same,
    decode,
    f32,
    flush32,
    simulate,
    simulate_pipelined,
)
from helpers import assert_rejects

from tpugen.hdl.config import OPERAND_TYPES
from tpugen.hdl.float_convert import FloatConvert

#: binary32 specials: zero, subnormals, the smallest normals, one, the largest finite, inf, NaNs.
SPECIALS32 = [0x0000_0000, 0x0000_0001, 0x007F_FFFF, 0x0080_0000, 0x0080_0001, 0x3F80_0000,
              0x7F7F_FFFF, 0x7F80_0000, 0x7F80_0001, 0x7FC0_0000, 0x7FFF_FFFF]


def oracle(x, relu, name: str) -> np.ndarray:
    """The bits of ``x`` (binary32 bits) converted by the contract, from NumPy and ml_dtypes."""
    fmt = FLOAT_TYPES[name]
    v = flush32(f32(x))
    keep = np.isnan(v) | (v > 0) | ~np.asarray(relu, bool)
    v = np.where(keep, v, np.float32(0))
    if fmt.width == 8:                                       # satfinite
        v = np.clip(v, -fmt.max_finite, fmt.max_finite)
    with np.errstate(all="ignore"):
        return v.astype(np.float32).astype(DTYPES[name]).view(UINTS[fmt.width])


def check(name: str, x, relu) -> None:
    dut = FloatConvert(FLOAT_TYPES[name])
    got = simulate(dut, {"x": x, "relu": relu}, "y")
    assert_same(got, oracle(x, relu, name), name, {"x": x, "relu": relu})


def with_neighbours(values) -> np.ndarray:
    """binary32 bits of ``values`` (exact in binary32) and of the binary32 numbers next to them,
    with both signs."""
    v = np.asarray(values, np.float64).astype(np.float32)
    v = np.concatenate([v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(0))])
    b = v.view(np.uint32).astype(np.uint64)
    return np.concatenate([b, b | 1 << 31])


def both_relu(x) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, np.uint64)
    return np.concatenate([x, x]), np.repeat([0, 1], len(x))


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_rounding_boundaries_and_limits(name):
    fmt = FLOAT_TYPES[name]
    values = decode(np.arange(1 << (fmt.width - 1)), name)   # every non-negative code
    values = np.unique(values[np.isfinite(values)])
    mids = (values[:-1] + values[1:]) / 2
    top = fmt.max_finite
    step = top - values[-2]
    limits = [top + step / 2, top + step, 2 * top, 2.0 ** 127, values[1] / 2, values[1] / 4,
              2.0 ** -126, 2.0 ** -100]
    x = np.concatenate([with_neighbours(np.concatenate([values, mids, limits])), SPECIALS32,
                        np.asarray(SPECIALS32, np.uint64) | 1 << 31])
    check(name, *both_relu(x))


def test_bf16_rounding_boundaries_and_limits():
    rng = np.random.default_rng(16)
    codes = rng.integers(0x0080, 0x7F7F, 400)                 # normal, positive
    values = decode(codes, "bf16")
    mids = (values + decode(codes + 1, "bf16")) / 2
    top = decode([0x7F7F], "bf16")[0]
    limits = [top, top + 2.0 ** 119, 2.0 ** -126, 2.0 ** 127]  # 2**119: half a step above max
    x = np.concatenate([with_neighbours(np.concatenate([values, mids, limits])), SPECIALS32,
                        np.asarray(SPECIALS32, np.uint64) | 1 << 31])
    check("bf16", *both_relu(x))


@pytest.mark.parametrize("name", sorted(FLOAT_TYPES))
def test_random(name):
    rng = np.random.default_rng(len(name))
    n = 2000
    x = rng.integers(0, 1 << 32, n)                           # the whole exponent range
    # Exponents in and around the format's range, low bits often a tie.
    fmt = FLOAT_TYPES[name]
    lo, hi = 127 - fmt.bias - fmt.mantissa - 3, 127 + (1 << fmt.exponent) - fmt.bias + 2
    e = rng.integers(max(lo, 0), min(hi, 255), n)
    frac = rng.integers(0, 1 << 23, n)
    frac = np.where(rng.random(n) < 0.5, frac >> 15 << 15 | 1 << 14, frac)
    y = (rng.integers(0, 2, n) << 31 | e << 23 | frac).astype(np.uint64)
    check(name, np.concatenate([x, y]), rng.integers(0, 2, 2 * n))


@pytest.mark.parametrize("name", ["bf16", "fp8_e5m2"])
def test_latency(name):
    rng = np.random.default_rng(7)
    x, relu = rng.integers(0, 1 << 32, 200), rng.integers(0, 2, 200)
    got = simulate_pipelined(FloatConvert(FLOAT_TYPES[name], latency=1), {"x": x, "relu": relu},
                             "y", 1)
    assert_same(got, oracle(x, relu, name), name, {"x": x, "relu": relu})


@pytest.mark.parametrize("name", sorted(FLOAT_TYPES))
def test_converts_to_verilog(name):
    text = verilog.convert(FloatConvert(FLOAT_TYPES[name], latency=1), name="float_convert")
    assert "module float_convert" in text


def test_rejects_bad_arguments():
    bf16 = FLOAT_TYPES["bf16"]
    assert_rejects(lambda: FloatConvert(OPERAND_TYPES["int4"]), TypeError,
                   "fmt must be a float OperandType, not OperandType")
    assert_rejects(lambda: FloatConvert(bf16, latency=2), ValueError,
                   r"latency must be in 0\.\.1, not 2")
    assert_rejects(lambda: FloatConvert(bf16, latency=None), TypeError,
                   "latency must be an integer, not None")
