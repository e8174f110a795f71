"""TFLite Micro's int8 reference kernels of MEAN, LOGISTIC, TANH, MUL, SUB and PAD, exact, in
NumPy (the arithmetic ops beside ``kernels``; same conventions: int8 in, int8 out, int32 steps
with ``tpugen.sim.requant``'s helpers).
"""

import math

import numpy as np

from tpugen.sim.requant import multiply_by_quantized_multiplier, quantize_multiplier
from tpugen.sim.requant import rounding_divide_by_pot as rdbpot
from tpugen.tflite.fixedpoint import logistic as fixed_logistic
from tpugen.tflite.fixedpoint import tanh as fixed_tanh
from tpugen.tflite.kernels import add

__all__ = ["mean", "logistic", "tanh", "mul", "sub", "pad", "sigmoid_params"]

_INPUT_INTEGER_BITS = 4          # LOGISTIC and TANH read their input as Q4.27


def _clamp8(v, lo=-128, hi=127) -> np.ndarray:
    return np.clip(v, lo, hi).astype(np.int8)


def mean(x, axes, s_in, zp_in, s_out, zp_out, keep_dims: bool) -> np.ndarray:
    """MEAN of int8 ``x`` over ``axes`` (TFLite Micro's ``QuantizedMeanOrSum``, integer):
    ``(q, e) = QuantizeMultiplier(s_in / s_out)``; with ``n`` values averaged and ``k =
    min(floor(log2 n), 32, 31 + e)``, ``q' = (q << k) // n`` and ``e' = e - k``; each output
    is ``MultiplyByQuantizedMultiplier(sum - zp_in * n, q', e') + zp_out``, clamped."""
    x = np.asarray(x, np.int64)
    axes = tuple(sorted({a % x.ndim for a in axes}))
    n = math.prod(x.shape[a] for a in axes)
    q, e = quantize_multiplier(float(np.float32(s_in)) / float(np.float32(s_out)))
    k = min(n.bit_length() - 1, 32, 31 + e)
    q, e = (q << k) // n, e - k
    total = x.sum(axis=axes, keepdims=keep_dims) - int(zp_in) * n
    return _clamp8(multiply_by_quantized_multiplier(total, q, e) + int(zp_out))


def sigmoid_params(s_in) -> tuple[int, int, int]:
    """``(multiplier, left_shift, radius)`` of LOGISTIC's and TANH's int8 input rescaling to
    Q4.27 (their ``Prepare``): ``frexp(double(s_in) * 2**27)``, the mantissa rounded to Q0.31
    (as an int32 cast), and ``CalculateInputRadius(4, left_shift, 31)``."""
    m, shift = math.frexp(float(np.float32(s_in)) * (1 << (31 - _INPUT_INTEGER_BITS)))
    q = int(np.trunc(m * (1 << 31) + math.copysign(0.5, m)))
    q = q - (1 << 32) if q >= 1 << 31 else q
    bound = ((1 << _INPUT_INTEGER_BITS) - 1) * (1 << (31 - _INPUT_INTEGER_BITS))
    radius = math.floor(bound / 2.0 ** shift)
    return q, shift, radius


def _sigmoid(x, zp_in, s_in, fn, out_shift: int, out_zp: int) -> np.ndarray:
    q, shift, radius = sigmoid_params(s_in)
    d = np.asarray(x, np.int64) - int(zp_in)
    inner = np.clip(d, -radius + 1, radius - 1)
    y = fn(multiply_by_quantized_multiplier(inner, q, shift), _INPUT_INTEGER_BITS)
    y = _clamp8(rdbpot(y, out_shift) + out_zp)
    return np.where(d <= -radius, np.int8(-128), np.where(d >= radius, np.int8(127), y))


def logistic(x, s_in, zp_in) -> np.ndarray:
    """LOGISTIC int8 -> int8 (``reference_integer_ops::Logistic``): inputs beyond the radius
    give -128 / 127, the others gemmlowp's ``logistic`` in Q0.31, ``RoundingDivideByPOT(.,
    23) - 128``, clamped; the output is in steps of 1/256 from zero point -128."""
    return _sigmoid(x, zp_in, s_in, fixed_logistic, 31 - 8, -128)


def tanh(x, s_in, zp_in) -> np.ndarray:
    """TANH int8 -> int8 (``reference_integer_ops::Tanh``): as ``logistic`` with gemmlowp's
    ``tanh`` and ``RoundingDivideByPOT(., 24)``; the output is in steps of 1/128 from zero
    point 0."""
    return _sigmoid(x, zp_in, s_in, fixed_tanh, 31 - 7, 0)


def mul(a, b, a_params, b_params, out_params, act_min: int, act_max: int) -> np.ndarray:
    """MUL of int8 tensors (NumPy broadcasting), each ``*_params`` a ``(scale, zero_point)``:
    ``MultiplyByQuantizedMultiplier((a - zp_a) * (b - zp_b), QuantizeMultiplier(s_a * s_b /
    s_out)) + zp_out``, clamped to the fused activation's range."""
    s_a, s_b, s_o = (float(np.float32(p[0])) for p in (a_params, b_params, out_params))
    q, e = quantize_multiplier(s_a * s_b / s_o)
    prod = ((np.asarray(a, np.int64) - int(a_params[1]))
            * (np.asarray(b, np.int64) - int(b_params[1])))
    return _clamp8(multiply_by_quantized_multiplier(prod, q, e) + int(out_params[1]),
                   act_min, act_max)


def sub(a, b, a_params, b_params, out_params, act_min: int, act_max: int) -> np.ndarray:
    """SUB of int8 tensors: ADD's arithmetic (``kernels.add``) with the second scaled input
    subtracted."""
    return add(a, b, a_params, b_params, out_params, act_min, act_max, subtract=True)


def pad(x, pads, value: int) -> np.ndarray:
    """PAD / PADV2 of int8 ``x``: ``pads`` one ``(before, after)`` per axis, filled with
    ``value`` (the output zero point for PAD)."""
    return np.pad(np.asarray(x), [tuple(int(v) for v in p) for p in pads],
                  constant_values=value)
