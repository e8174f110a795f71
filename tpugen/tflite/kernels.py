"""TFLite Micro's int8 reference kernels of the ops that run on the host, exact, in NumPy.

Each function is written from the reference kernel TFLite Micro runs (``reference_ops`` /
``reference_integer_ops``) and takes int8 (or float32) arrays with the same shapes TFLite
uses; the GEMM ops (FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D) are not here: they are lowered
to accelerator layers (``tpugen.tflite.lowering``). Integer arithmetic is NumPy int64 on
values that fit; the int32 steps of the kernels are the helpers of ``tpugen.sim.requant``.
"""

import numpy as np

from tpugen.sim.requant import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
)
from tpugen.tflite.geometry import Window, window

__all__ = ["quantize", "requantize_int8", "dequantize", "max_pool", "average_pool", "add"]


def _clamp8(v, lo=-128, hi=127) -> np.ndarray:
    return np.clip(v, lo, hi).astype(np.int8)


def _wrap32(v) -> np.ndarray:
    v = np.asarray(v, np.int64) & 0xFFFF_FFFF
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def quantize(x, scale, zero_point) -> np.ndarray:
    """QUANTIZE float32 -> int8 (``AffineQuantize``): ``clamp(int32(round(double(x) /
    double(scale))) + zp)``; ``scale`` as stored (float32), the division in double. A rounded
    value outside int32 converts to INT32_MIN, as the C cast does on x86 (the wheel's
    platform), and the int32 sum wraps."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    r = round_half_away(x / float(np.float32(scale)))
    r = np.where((r >= 2.0 ** 31) | (r < -(2.0 ** 31)) | np.isnan(r), -(2.0 ** 31), r)
    return _clamp8(_wrap32(r.astype(np.int64) + int(zero_point)))


def requantize_int8(x, s_in, zp_in, s_out, zp_out) -> np.ndarray:
    """QUANTIZE int8 -> int8 (``Requantize``): ``MultiplyByQuantizedMultiplier(x - zp_in,
    QuantizeMultiplier(double(s_in) / double(s_out))) + zp_out``, clamped."""
    q, e = quantize_multiplier(float(np.float32(s_in)) / float(np.float32(s_out)))
    x = np.asarray(x, dtype=np.int64) - int(zp_in)
    return _clamp8(multiply_by_quantized_multiplier(x, q, e) + int(zp_out))


def dequantize(x, scale, zero_point) -> np.ndarray:
    """DEQUANTIZE int8 -> float32: ``float(double(scale) * (x - zp))``."""
    x = np.asarray(x, dtype=np.int64) - int(zero_point)
    return (float(np.float32(scale)) * x.astype(np.float64)).astype(np.float32)


def max_pool(x, wy: Window, wx: Window, act_min: int, act_max: int) -> np.ndarray:
    """MAX_POOL_2D of NHWC int8 ``x``: the largest input of each window (padding is not an
    input), clamped to ``act_min..act_max``."""
    taps = window(np.asarray(x, np.int64), wy, wx, fill=np.iinfo(np.int64).min)
    return _clamp8(taps.max(axis=3), act_min, act_max)


def average_pool(x, wy: Window, wx: Window, act_min: int, act_max: int) -> np.ndarray:
    """AVERAGE_POOL_2D of NHWC int8 ``x``: the sum of each window's inputs (padding is not an
    input) divided by their count ``n``, rounded half away from zero as TFLite does
    (``(acc +- n / 2) / n`` in C's truncating division), clamped."""
    x = np.asarray(x, np.int64)
    acc = window(x, wy, wx, fill=0).sum(axis=3)
    count = window(np.ones(x.shape[:3] + (1,), np.int64), wy, wx, fill=0).sum(axis=3)
    half = count // 2
    avg = np.where(acc > 0, (acc + half) // count, -((half - acc) // count))
    return _clamp8(avg, act_min, act_max)


def add(a, b, a_params, b_params, out_params, act_min: int, act_max: int,
        subtract: bool = False) -> np.ndarray:
    """ADD of int8 tensors (NumPy broadcasting, as TFLite's 4-D broadcast), each ``*_params``
    a ``(scale, zero_point)``: TFLite's int8 ``AddFunc`` with ``left_shift = 20``, the input
    multipliers ``s / (2 max(s_a, s_b))`` and the output multiplier ``2 max(s_a, s_b) /
    (2**20 s_out)`` (doubles of the float32 scales, ``QuantizeMultiplier``), clamped.
    ``subtract``: SUB, the same with the second scaled input subtracted."""
    f = [float(np.float32(p[0])) for p in (a_params, b_params, out_params)]
    twice_max = 2 * max(f[0], f[1])
    left_shift = 20
    qa, ea = quantize_multiplier(f[0] / twice_max)
    qb, eb = quantize_multiplier(f[1] / twice_max)
    qo, eo = quantize_multiplier(twice_max / ((1 << left_shift) * f[2]))
    va = (np.asarray(a, np.int64) - int(a_params[1])) << left_shift
    vb = (np.asarray(b, np.int64) - int(b_params[1])) << left_shift
    sb = multiply_by_quantized_multiplier(vb, qb, eb)
    raw = multiply_by_quantized_multiplier(va, qa, ea) + (-sb if subtract else sb)
    out = multiply_by_quantized_multiplier(raw, qo, eo) + int(out_params[1])
    return _clamp8(out, act_min, act_max)
