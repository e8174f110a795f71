"""gemmlowp's fixed-point math (``fixedpoint.h``) on int32 values held in int64 NumPy arrays:
what TFLite's int8 SOFTMAX, LOGISTIC and TANH reference kernels compute with.

A value ``Q<i>`` has ``i`` integer bits and ``31 - i`` fractional bits. ``srdhm`` is the
fixed-point product, ``sat_shl`` gemmlowp's ``SaturatingRoundingMultiplyByPOT`` for a
positive exponent (a ``Rescale`` to fewer integer bits).
"""

import numpy as np

from tpugen.sim.requant import INT32_MAX, INT32_MIN, srdhm
from tpugen.sim.requant import rounding_divide_by_pot as rdbpot

__all__ = ["sat_shl", "exp_on_negative_values", "one_over_one_plus_x",
           "one_minus_x_over_one_plus_x", "logistic", "tanh"]

# exp(-2**k) in Q0.31 for k = -2..4: gemmlowp's barrel-shifter constants.
_EXP_STEPS = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
              (2, 39332535), (3, 720401), (4, 242))


def sat_shl(x, e: int) -> np.ndarray:
    """``SaturatingRoundingMultiplyByPOT<e>`` for ``e > 0``: ``x << e`` saturated to int32."""
    threshold = (1 << (31 - e)) - 1
    x = np.asarray(x, np.int64)
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


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """``exp_on_negative_values`` of ``Q<integer_bits>`` values ``a <= 0``, as Q0.31 (the
    barrel-shifter steps below ``2**integer_bits`` only; below -32 the result is 0)."""
    a = np.asarray(a, np.int64)
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_quarter(sat_shl(a_mod, integer_bits))
    remainder = a_mod - a
    for exponent, multiplier in _EXP_STEPS:
        if integer_bits > exponent:
            bit = (remainder & (1 << (frac + exponent))) != 0
            result = np.where(bit, srdhm(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def _newton_reciprocal(a) -> np.ndarray:
    """The Q2.29 Newton-Raphson estimate of ``1 / (1 + a)`` (Q0.31 ``a`` in 0..1) that both
    divisions below share, and ``(1 + a) / 2``."""
    total = np.asarray(a, np.int64) + INT32_MAX
    half_den = np.where(total >= 0, (total + 1) // 2, -((-(total - 1)) // 2))
    x = 1515870810 + srdhm(half_den, -1010580540)          # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus = (1 << 29) - srdhm(half_den, x)
        x = x + sat_shl(srdhm(x, one_minus), 2)
    return x


def one_over_one_plus_x(a) -> np.ndarray:
    """``one_over_one_plus_x_for_x_in_0_1`` (Q0.31 in and out)."""
    return sat_shl(_newton_reciprocal(a), 1)


def one_minus_x_over_one_plus_x(a) -> np.ndarray:
    """``one_minus_x_over_one_plus_x_for_x_in_0_1`` (Q0.31 in and out)."""
    return sat_shl(_newton_reciprocal(a) - (1 << 29), 2)


def logistic(a, integer_bits: int) -> np.ndarray:
    """gemmlowp's ``logistic`` of ``Q<integer_bits>`` values, as Q0.31."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    magnitude = np.where(positive, a, -a)
    if_positive = one_over_one_plus_x(exp_on_negative_values(-magnitude, integer_bits))
    return np.where(a == 0, 1 << 30, np.where(positive, if_positive, INT32_MAX - if_positive))


def tanh(a, integer_bits: int) -> np.ndarray:
    """gemmlowp's ``tanh`` of ``Q<integer_bits>`` values, as Q0.31 (``exp(2a)`` read as
    ``Q<integer_bits + 1>``: ``ExactMulByPot<1>``)."""
    a = np.asarray(a, np.int64)
    negative = a < 0
    t = one_minus_x_over_one_plus_x(exp_on_negative_values(np.where(negative, a, -a),
                                                           integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, -t, t))
