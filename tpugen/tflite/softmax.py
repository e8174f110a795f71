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
are gemmlowp's (``tpugen.tflite.fixedpoint``).
"""

import math

import numpy as np

from tpugen.sim.requant import quantize_multiplier, srdhm
from tpugen.sim.requant import rounding_divide_by_pot as rdbpot
from tpugen.tflite.fixedpoint import exp_on_negative_values, one_over_one_plus_x

__all__ = ["softmax", "SOFTMAX_OUT_SCALE", "SOFTMAX_OUT_ZP"]

SOFTMAX_OUT_SCALE = 1.0 / 256
SOFTMAX_OUT_ZP = -128
_SCALED_DIFF_BITS = 5
_ACCUM_BITS = 12
def _reciprocal(total) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's ``GetReciprocal(x, 12)`` of positive int32 ``total``: ``(scale, bits over
    unit)``."""
    clz = np.array([32 - int(v).bit_length() for v in np.ravel(total)],
                   dtype=np.int64).reshape(np.shape(total))
    shifted = ((total << clz) - (1 << 31)) & 0xFFFF_FFFF
    shifted = np.where(shifted >= 1 << 31, shifted - (1 << 32), shifted)
    return one_over_one_plus_x(shifted), _ACCUM_BITS - clz


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
    e = exp_on_negative_values(srdhm(np.where(valid, diff, 0) << shift, q), _SCALED_DIFF_BITS)
    total = np.where(valid, rdbpot(e, _ACCUM_BITS), 0).sum(axis=-1, keepdims=True)
    scale, bits = _reciprocal(total)
    out = rdbpot(srdhm(scale, e), bits + 31 - 8) + SOFTMAX_OUT_ZP
    return np.where(valid, np.clip(out, -128, 127), -128).astype(np.int8)
