"""The float multiplier against NumPy: the operands decoded by ml_dtypes, multiplied in float64
(exact), then the binary32 rules (bf16 subnormal inputs read as zero, flush below 2**-126,
infinity from 2**128). fp8: every operand pair; bf16: specials and random pairs."""

import numpy as np
import pytest
from amaranth.back import verilog
from float_helpers import (
    FLOAT_TYPES,
    MIN_NORMAL32,
    assert_same,
    decode,
    flush32,
    simulate,
    simulate_pipelined,
)
from helpers import assert_rejects

from tpugen.hdl.config import OPERAND_TYPES
from tpugen.hdl.float_mul import FloatMul

BF16 = FLOAT_TYPES["bf16"]

#: bf16 specials (and their negations): zero, subnormals, smallest normals, one, powers of two
#: near the product's flush and overflow limits, the largest finite, infinity, NaNs.
BF16_SPECIALS = [0x0000, 0x0001, 0x007F, 0x0080, 0x0081, 0x3F80, 0x3FC0, 0x3FFF, 0x1F80,
                 0x2000, 0x2040, 0x5F80, 0x5FFF, 0x6000, 0x7F00, 0x7F7F, 0x7F80, 0x7F81, 0x7FC0]
BF16_SPECIALS += [v | 0x8000 for v in BF16_SPECIALS]


def oracle(a, b, name: str) -> np.ndarray:
    """The binary32 bits of the products by the contract, from NumPy and ml_dtypes."""
    va, vb = decode(a, name), decode(b, name)
    if not FLOAT_TYPES[name].subnormals:
        va, vb = flush32(va), flush32(vb)        # bf16 subnormals read as zero
    with np.errstate(all="ignore"):
        p = flush32(va * vb)                      # exact in float64
        p = np.where(np.abs(p) >= 2.0 ** 128, np.copysign(np.inf, p), p)
    return p.astype(np.float32).view(np.uint32)


def check(name: str, a, b) -> None:
    dut = FloatMul(FLOAT_TYPES[name])
    got = simulate(dut, {"a": a, "b": b}, "p")
    assert_same(got, oracle(a, b, name), "fp32", {"a": a, "b": b})


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_every_pair(name):
    a, b = np.divmod(np.arange(1 << 16), 256)
    check(name, a, b)


def test_bf16_specials():
    a, b = np.meshgrid(BF16_SPECIALS, BF16_SPECIALS)
    check("bf16", a.ravel(), b.ravel())


def test_bf16_random():
    rng = np.random.default_rng(16)
    n = 4000
    a = rng.integers(0, 1 << 16, n)                # the whole exponent range, specials too
    b = rng.integers(0, 1 << 16, n)
    # Exponent sums near the flush limit (2**-126) and the overflow limit (2**128).
    ea = rng.integers(1, 255, n)
    eb = np.where(rng.random(n) < 0.5, 127 - ea + rng.integers(-3, 4, n),
                  381 - ea + rng.integers(-3, 2, n)).clip(1, 254)
    sa, sb = rng.integers(0, 2, n) << 15, rng.integers(0, 2, n) << 15
    a2 = sa | ea << 7 | rng.integers(0, 128, n)
    b2 = sb | eb << 7 | rng.integers(0, 128, n)
    a, b = np.concatenate([a, a2]), np.concatenate([b, b2])
    p = np.abs(decode(a, "bf16") * decode(b, "bf16"))
    assert ((p > 0) & (p < MIN_NORMAL32)).sum() > 200      # the vectors do reach the limits
    assert ((p >= MIN_NORMAL32) & (p < 2.0 ** -124)).sum() > 200
    assert (np.isfinite(p) & (p >= 2.0 ** 128)).sum() > 200
    check("bf16", a, b)


@pytest.mark.parametrize("latency", [1, 2])
@pytest.mark.parametrize("name", ["bf16", "fp8_e4m3"])
def test_latency(name, latency):
    rng = np.random.default_rng(latency)
    fmt = FLOAT_TYPES[name]
    a = rng.integers(0, 1 << fmt.width, 200)
    b = rng.integers(0, 1 << fmt.width, 200)
    got = simulate_pipelined(FloatMul(fmt, latency=latency), {"a": a, "b": b}, "p", latency)
    assert_same(got, oracle(a, b, name), "fp32", {"a": a, "b": b})


@pytest.mark.parametrize("name", sorted(FLOAT_TYPES))
def test_converts_to_verilog(name):
    text = verilog.convert(FloatMul(FLOAT_TYPES[name], latency=2), name="float_mul")
    assert "module float_mul" in text


def test_rejects_bad_arguments():
    assert_rejects(lambda: FloatMul(OPERAND_TYPES["int8"]), TypeError,
                   "fmt must be a float OperandType, not OperandType")
    assert_rejects(lambda: FloatMul("bf16"), TypeError,
                   "fmt must be a float OperandType, not 'bf16'")
    assert_rejects(lambda: FloatMul(BF16, latency=3), ValueError,
                   r"latency must be in 0\.\.2, not 3")
    assert_rejects(lambda: FloatMul(BF16, latency=True), TypeError,
                   "latency must be an integer, not True")
