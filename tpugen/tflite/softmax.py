"""SOFTMAX int8 -> int8, TFLite Micro's reference kernel bit for bit (gemmlowp fixed point).

TFLite requires the output quantization ``scale == 1/256, zero_point == -128``. Per row (the
last axis), with ``kScaledDiffIntegerBits = 5`` and ``kAccumulationIntegerBits = 12``:

    (q, s)   = QuantizeMultiplier(min(double(beta) * double(s_in) * 2**26, 2**31 - 1))
    diff_min = -floor(31 * 2**26 / 2**s)
    d        = x - max(row);  only d >= diff_min counts (the others give -128)
    e        = exp_on_negative_values(SRDHM(d * 2**s, q))      Q5.26 in, Q0.31 out
    sum      = sum of RoundingDivideByPOT(e, 12)                Q12.19
    (r, n)   = GetReciprocal(sum, 12)                           Q0.31, bits over unit
    out      = clamp(RoundingDivideByPOT(SRDHM(r, e), n + 23) - 128, -128, 127)

``exp_on_negative_values``, ``one_over_one_plus_x_for_x_in_0_1`` and the saturating shifts
are gemmlowp's, on int32 values held in int64 arrays.
"""

import math

import numpy as np

from tpugen.sim.requant import INT32_MAX, INT32_MIN, quantize_multiplier, srdhm
from tpugen.sim.requant import rounding_divide_by_pot as rdbpot

__all__ = ["softmax", "SOFTMAX_OUT_SCALE", "SOFTMAX_OUT_ZP"]

SOFTMAX_OUT_SCALE = 1.0 / 256
SOFTMAX_OUT_ZP = -128
_SCALED_DIFF_BITS = 5
_ACCUM_BITS = 12
# exp(-2**k) in Q0.31 for k = -2..4: gemmlowp's barrel-shifter constants.
_EXP_STEPS = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
              (2, 39332535), (3, 720401), (4, 242))


def _sat_shl(x, e: int) -> np.ndarray:
    """gemmlowp's ``SaturatingRoundingMultiplyByPOT<e>`` for ``e > 0``: ``x << e``
    saturated to int32."""
    threshold = (1 << (31 - e)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << e))


def _exp_quarter(a) -> np.ndarray:
    """``exp_on_interval_between_negative_one_quarter_and_0_excl`` (Q0.31 in and out)."""
    constant = 1895147668                       # exp(-1/8)
    third = 715827883                           # 1/3
    x = a + (1 << 28)                           # a + 1/8
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    poly = rdbpot(srdhm(rdbpot(x4, 2) + x3, third) + x2, 1)
    return constant + srdhm(constant, x + poly)


def _exp_on_negative_values(a) -> np.ndarray:
    """gemmlowp's ``exp_on_negative_values`` of Q5.26 ``a <= 0``, as Q0.31."""
    frac = 31 - _SCALED_DIFF_BITS
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_quarter(_sat_shl(a_mod, _SCALED_DIFF_BITS))
    remainder = a_mod - a
    for exponent, multiplier in _EXP_STEPS:
        bit = (remainder & (1 << (frac + exponent))) != 0
        result = np.where(bit, srdhm(result, multiplier), result)
    return np.where(a == 0, INT32_MAX, result)


def _one_over_one_plus_x(a) -> np.ndarray:
    """gemmlowp's ``one_over_one_plus_x_for_x_in_0_1`` (Q0.31 in and out, Newton-Raphson in
    Q2.29)."""
    total = a + INT32_MAX
    half_den = np.where(total >= 0, (total + 1) // 2, -((-(total - 1)) // 2))
    x = 1515870810 + srdhm(half_den, -1010580540)          # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus = (1 << 29) - srdhm(half_den, x)
        x = x + _sat_shl(srdhm(x, one_minus), 2)
    return _sat_shl(x, 1)


def _reciprocal(total) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's ``GetReciprocal(x, 12)`` of positive int32 ``total``: ``(scale, bits over
    unit)``."""
    clz = np.array([32 - int(v).bit_length() for v in np.ravel(total)],
                   dtype=np.int64).reshape(np.shape(total))
    shifted = ((total << clz) - (1 << 31)) & 0xFFFF_FFFF
    shifted = np.where(shifted >= 1 << 31, shifted - (1 << 32), shifted)
    return _one_over_one_plus_x(shifted), _ACCUM_BITS - clz


def softmax(x, s_in, beta: float = 1.0) -> np.ndarray:
    """SOFTMAX of int8 ``x`` (input scale ``s_in``) over its last axis, to int8 with TFLite's
    required output quantization (``SOFTMAX_OUT_SCALE``, ``SOFTMAX_OUT_ZP``)."""
    x = np.asarray(x, np.int64)
    if x.ndim == 0:
        raise ValueError("softmax needs at least one axis")
    real = min(float(np.float32(beta)) * float(np.float32(s_in))
               * (1 << (31 - _SCALED_DIFF_BITS)), (1 << 31) - 1.0)
    q, shift = quantize_multiplier(real)
    if shift < 0:
        raise ValueError(f"softmax: beta * input scale {real / 2**26!r} is too small "
                         "(TFLite requires a non-negative left shift)")
    diff_min = -math.floor(((1 << _SCALED_DIFF_BITS) - 1) * (1 << (31 - _SCALED_DIFF_BITS))
                           / (1 << shift))
    diff = x - x.max(axis=-1, keepdims=True)
    valid = diff >= diff_min
    e = _exp_on_negative_values(srdhm(np.where(valid, diff, 0) << shift, q))
    total = np.where(valid, rdbpot(e, _ACCUM_BITS), 0).sum(axis=-1, keepdims=True)
    scale, bits = _reciprocal(total)
    out = rdbpot(srdhm(scale, e), bits + 31 - 8) + SOFTMAX_OUT_ZP
    return np.where(valid, np.clip(out, -128, 127), -128).astype(np.int8)
