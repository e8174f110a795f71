"""The requantization golden model (``sim.requant``): its pieces against independent big-integer
formulas, and whole layers against the TFLite Micro interpreter (the external oracle)."""

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from tflite_models import conv2d, fully_connected, run

from tpugen.sim.requant import (
    ACTIVATIONS,
    INT32_MAX,
    INT32_MIN,
    QuantParams,
    activation_bounds,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    requantize,
    rounding_divide_by_pot,
    srdhm,
)

EDGES = [INT32_MIN, INT32_MIN + 1, -(1 << 30), -12345, -2, -1, 0, 1, 2, 3, 12345, 1 << 30,
         INT32_MAX - 1, INT32_MAX]


def _srdhm_ref(a, b):
    """gemmlowp's definition with Python integers and C's truncating division."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    n = ab + nudge
    return int(Fraction(n, 1 << 31)) if n >= 0 else -int(Fraction(-n, 1 << 31))


def _rdbpot_ref(x, e):
    """x / 2**e rounded to nearest, ties away from zero, with exact fractions."""
    f = Fraction(x, 1 << e)
    r = math.floor(abs(f) + Fraction(1, 2))
    return r if f >= 0 else -r


def test_srdhm_edges_and_random():
    rng = random.Random(1)
    pairs = [(a, b) for a in EDGES for b in EDGES]
    pairs += [(rng.randint(INT32_MIN, INT32_MAX), rng.randint(INT32_MIN, INT32_MAX))
              for _ in range(3000)]
    a, b = np.array(pairs).T
    assert srdhm(a, b).tolist() == [_srdhm_ref(x, y) for x, y in pairs]
    assert srdhm(INT32_MIN, INT32_MIN) == INT32_MAX


def test_rounding_divide_by_pot():
    rng = random.Random(2)
    cases = [(x, e) for x in EDGES for e in (0, 1, 2, 5, 30, 31)]
    cases += [(rng.randint(INT32_MIN, INT32_MAX), rng.randint(0, 31)) for _ in range(3000)]
    cases += [(k * (1 << e) // 2, e) for k in range(-9, 10) for e in range(1, 31)]   # ties
    x, e = np.array(cases).T
    assert rounding_divide_by_pot(x, e).tolist() == [_rdbpot_ref(v, s) for v, s in cases]


def test_quantize_multiplier():
    assert quantize_multiplier(0.0) == (0, 0)
    assert quantize_multiplier(0.5) == (1 << 30, 0)
    assert quantize_multiplier(1.0) == (1 << 30, 1)
    assert quantize_multiplier(3.0) == (3 << 29, 2)
    # A mantissa that rounds up to 2**31 becomes 2**30 with the exponent one higher.
    just_below_one = 1.0 - 2.0 ** -40
    assert quantize_multiplier(just_below_one) == (1 << 30, 1)
    # Below 2**-31 flushes to zero; 2**31 and more too (every int32 shifts out).
    assert quantize_multiplier(2.0 ** -33) == (0, 0)
    assert quantize_multiplier(2.0 ** 31) == (0, 0)
    rng = random.Random(3)
    for _ in range(2000):
        real = rng.uniform(0, 4) * 2.0 ** rng.randint(-30, 20)
        q, e = quantize_multiplier(real)
        assert (1 << 30) <= q < (1 << 31) or q == 0
        assert abs(q * 2.0 ** (e - 31) - real) <= 2.0 ** (e - 32)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="real"):
            quantize_multiplier(bad)


def test_activation_bounds():
    assert activation_bounds("NONE", 0.1, 5) == (-128, 127)
    assert activation_bounds("RELU", 0.1, -3) == (-3, 127)
    assert activation_bounds("RELU6", 0.1, -100) == (-100, -40)
    assert activation_bounds("RELU6", 0.01, 0) == (0, 127)
    assert activation_bounds("RELU_N1_TO_1", 0.5, 0) == (-2, 2)
    assert activation_bounds("RELU_N1_TO_1", 0.4, 0) == (-3, 3)       # 2.5 rounds away
    with pytest.raises(ValueError, match="activation"):
        activation_bounds("TANH", 0.1, 0)


def test_left_shift_wraps_to_int32():
    """``acc * 2**e`` is wrapped to int32 before the high multiply (TFLite's int32 product)."""
    x = np.array([1 << 20, -(1 << 20), 3])
    got = multiply_by_quantized_multiplier(x, 1 << 30, 12)
    wrapped = [((v << 12) + (1 << 31)) % (1 << 32) - (1 << 31) for v in x.tolist()]
    assert got.tolist() == [_srdhm_ref(w, 1 << 30) for w in wrapped]


def test_params_validation():
    with pytest.raises(ValueError, match="shift"):
        QuantParams(shift=32)
    with pytest.raises(ValueError, match="act_min"):
        QuantParams(act_min=10, act_max=3)
    with pytest.raises(ValueError, match="same number of channels"):
        QuantParams(bias=[1, 2, 3], multiplier=[1, 2])
    with pytest.raises(TypeError, match="bias"):
        QuantParams(bias=[1.5])
    with pytest.raises(ValueError, match="multiplier"):
        QuantParams(multiplier=1 << 31)


def _layer_case(rng, *, per_channel, activation, n, k):
    s_in = float(rng.uniform(0.005, 0.2))
    zp_in = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    s_out = float(rng.uniform(0.01, 0.5))
    zp_out = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    if per_channel:
        s_w = rng.uniform(0.0005, 0.05, n)
        s_w[0] = s_out / s_in * 3.0          # a multiplier > 1: a left shift
    else:
        s_w = float(rng.uniform(0.0005, 0.05))
    bias = rng.integers(-(1 << 16), 1 << 16, n)
    bias[0] = INT32_MAX - 3                  # int32 wrap of acc + bias
    return s_in, zp_in, s_w, s_out, zp_out, bias


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected_matches_tflite_micro(activation, per_channel):
    rng = np.random.default_rng(hash((activation, per_channel)) % 2**32)
    for m, k, n in ((5, 17, 9), (1, 64, 3), (7, 3, 16)):
        s_in, zp_in, s_w, s_out, zp_out, bias = _layer_case(
            rng, per_channel=per_channel, activation=activation, n=n, k=k)
        w = rng.integers(-127, 128, (n, k))
        w[0, :] = 127                        # big sums
        x = rng.integers(-128, 128, (m, k))
        x[0, :] = -128
        model = fully_connected(w, bias, s_in, zp_in, s_w, s_out, zp_out, activation, m)
        expected = run(model, x)
        acc = (x - zp_in) @ w.T
        params = QuantParams.from_scales(s_in, s_w, s_out, bias=bias, out_zp=zp_out,
                                         activation=activation)
        got = requantize(acc, params)
        assert np.array_equal(got, expected), (
            f"{m}x{k}x{n}: first mismatch at {np.argwhere(got != expected)[:1].tolist()}")


def _im2col(x, kh, kw, stride, padding, zp):
    nb, h, w, c = x.shape
    if padding == "SAME":
        oh, ow = -(-h // stride), -(-w // stride)
        ph = max((oh - 1) * stride + kh - h, 0)
        pw = max((ow - 1) * stride + kw - w, 0)
        top, left = ph // 2, pw // 2
    else:
        oh, ow = (h - kh + stride) // stride, (w - kw + stride) // stride
        ph = pw = top = left = 0
    xp = np.full((nb, h + ph, w + pw, c), zp, dtype=np.int64)
    xp[:, top:top + h, left:left + w] = x
    cols = np.empty((nb, oh, ow, kh, kw, c), dtype=np.int64)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, :, i, j] = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride]
    return cols.reshape(nb * oh * ow, kh * kw * c), (nb, oh, ow)


@pytest.mark.parametrize("stride,padding", [(1, "SAME"), (2, "SAME"), (1, "VALID"),
                                            (2, "VALID")])
def test_conv2d_per_channel_matches_tflite_micro(stride, padding):
    rng = np.random.default_rng(stride * 10 + len(padding))
    for activation in ("NONE", "RELU6"):
        cin, cout, kh, kw = 3, 5, 3, 2
        in_shape = (2, 7, 6, cin)
        s_in, zp_in, s_w, s_out, zp_out, bias = _layer_case(
            rng, per_channel=True, activation=activation, n=cout, k=kh * kw * cin)
        w = rng.integers(-127, 128, (cout, kh, kw, cin))
        x = rng.integers(-128, 128, in_shape)
        model, out_shape = conv2d(w, bias, s_in, zp_in, s_w, s_out, zp_out, activation,
                                  in_shape, stride, padding)
        expected = run(model, x)
        cols, shape = _im2col(x, kh, kw, stride, padding, zp_in)
        acc = (cols - zp_in) @ w.reshape(cout, -1).T
        params = QuantParams.from_scales(s_in, s_w, s_out, bias=bias, out_zp=zp_out,
                                         activation=activation)
        got = requantize(acc, params).reshape(*shape, cout)
        assert got.shape == tuple(out_shape) == expected.shape
        assert np.array_equal(got, expected)


def test_round_half_away_is_c_round():
    """``round_half_away`` against C's own ``round`` (libm through ctypes), on halves, their
    neighbours (0.49999999999999994 is below one half: C rounds it to 0) and random values."""
    import ctypes
    import ctypes.util

    from tpugen.sim.requant import round_half_away

    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.round.restype, libm.round.argtypes = ctypes.c_double, [ctypes.c_double]
    halves = np.arange(-20, 21) + 0.5
    xs = np.concatenate([halves, np.nextafter(halves, 0), np.nextafter(halves, np.inf),
                         np.random.default_rng(0).normal(0, 1e3, 2000), [0.0, -0.0, 2.0 ** 60]])
    got = round_half_away(xs)
    want = np.array([libm.round(float(x)) for x in xs])
    assert np.array_equal(got, want)
