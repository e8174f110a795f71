"""TFLite's int8 requantization, bit-exact: the golden model of the activation unit.

Written from TFLite Micro's int8 reference kernels (FULLY_CONNECTED, CONV_2D; gemmlowp's
double rounding), per output channel ``c``:

    acc'   = (acc + bias[c]) mod 2**32, as int32       (an absent bias is 0)
    x      = (acc' * 2**max(e[c], 0)) mod 2**32, as int32
    h      = SaturatingRoundingDoublingHighMul(x, q[c])
           = INT32_MAX if x == q[c] == INT32_MIN, else
             trunc((x * q[c] + (2**30 if x * q[c] >= 0 else 1 - 2**30)) / 2**31)
    y      = RoundingDivideByPOT(h, max(-e[c], 0))
           = (h >> s) + (1 if (h & (2**s - 1)) > ((2**s - 1) >> 1) + (h < 0) else 0)
             (arithmetic shift: rounds half away from zero)
    out    = clamp(y + out_zp, act_min, act_max)

``q`` (the quantized multiplier, int32) and ``e`` (its exponent, -31..31) come from a real
multiplier ``M = s_in * s_w[c] / s_out`` by ``quantize_multiplier`` (TFLite's
``QuantizeMultiplier``); ``activation_bounds`` gives TFLite's clamp bounds of a fused
activation. All arithmetic here is exact NumPy int64 on values that fit (products of two
int32 are below 2**62).
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["round_half_away", "INT32_MIN", "INT32_MAX", "SHIFT_MIN", "SHIFT_MAX", "ACTIVATIONS",
           "quantize_multiplier", "activation_bounds", "srdhm", "rounding_divide_by_pot",
           "multiply_by_quantized_multiplier", "requantize", "requantize_lanes", "QuantParams"]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
#: The exponents the hardware takes (a multiplier's ``e``, a signed 6-bit field): a left shift
#: of 32 or more would leave nothing of a 32-bit value. ``quantize_multiplier`` gives -31..31.
SHIFT_MIN, SHIFT_MAX = -32, 31
#: The fused activations TFLite's int8 kernels clamp with.
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def round_half_away(x) -> np.ndarray:
    """C's ``round`` (TFLite's ``TfLiteRound``) of every element of ``x``, as float64: halves
    away from zero. Exact: the fraction ``x - trunc(x)`` is compared with one half (``floor(|x|
    + 0.5)`` would round 0.49999999999999994 up, C does not)."""
    x = np.asarray(x, dtype=np.float64)
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0.0)


def _round_half_away(x: float) -> int:
    """``round_half_away`` of one number, as an int."""
    return int(round_half_away(x))


def quantize_multiplier(real) -> tuple[int, int]:
    """TFLite's ``QuantizeMultiplier``: ``(q, e)`` with ``real ~= q * 2**(e - 31)``.

    ``(m, e) = frexp(real)``, ``q = round_half_away_from_zero(m * 2**31)``; ``q == 2**31``
    becomes ``2**30`` with ``e + 1``; ``e < -31`` (a multiplier below about 2**-31) becomes
    ``q = e = 0``. Exponents above ``SHIFT_MAX`` (a multiplier of 2**31 or more, which shifts
    every int32 value out) also become ``(0, 0)``: the result is the same, 0 before the zero
    point.
    """
    if isinstance(real, bool) or not isinstance(real, int | float | np.floating | np.integer):
        raise TypeError(f"real must be a number, not {real!r}")
    real = float(real)
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"real must be a finite non-negative multiplier, not {real!r}")
    if real == 0.0:
        return 0, 0
    m, e = math.frexp(real)
    q = _round_half_away(m * (1 << 31))
    if q == 1 << 31:
        q //= 2
        e += 1
    if e < -31 or e > SHIFT_MAX:
        return 0, 0
    return q, e


def activation_bounds(activation: str, s_out, out_zp: int) -> tuple[int, int]:
    """TFLite's ``CalculateActivationRangeQuantized`` for int8: ``(act_min, act_max)``.

    ``quantize(f) = out_zp + round_half_away_from_zero(float32(f) / float32(s_out))`` (the
    division in float32); NONE ``[-128, 127]``; RELU ``[max(-128, quantize(0)), 127]``; RELU6
    also ``max <= quantize(6)``; RELU_N1_TO_1 ``[max(-128, quantize(-1)), min(127,
    quantize(1))]``.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, "
                         f"not {activation!r}")
    _check_int("out_zp", out_zp, -128, 127)
    scale = np.float32(s_out)
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"s_out must be a positive scale, not {s_out!r}")

    def quantize(f):
        return out_zp + _round_half_away(float(np.float32(f) / scale))

    lo, hi = -128, 127
    if activation == "RELU":
        lo = max(lo, quantize(0.0))
    elif activation == "RELU6":
        lo, hi = max(lo, quantize(0.0)), min(hi, quantize(6.0))
    elif activation == "RELU_N1_TO_1":
        lo, hi = max(lo, quantize(-1.0)), min(hi, quantize(1.0))
    return lo, hi


def _wrap32(x):
    """Integers as int32: the low 32 bits, two's complement."""
    x = np.asarray(x, dtype=np.int64) & 0xFFFF_FFFF
    return np.where(x >= 1 << 31, x - (1 << 32), x)


def srdhm(a, b) -> np.ndarray:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul`` of int32 arrays (see the module
    docstring); int64 result in int32 range."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(nudged >= 0, nudged >> 31, -((-nudged) >> 31))     # truncate toward 0
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, high)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero
    (``exponent`` 0..31 in gemmlowp; 32 here too, for the hardware's shift -32)."""
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, q, e) -> np.ndarray:
    """TFLite's ``MultiplyByQuantizedMultiplier`` (double rounding) of int32 ``x``."""
    e = np.asarray(e, dtype=np.int64)
    left = np.maximum(e, 0)
    shifted = _wrap32(np.asarray(x, dtype=np.int64) << left)
    return rounding_divide_by_pot(srdhm(shifted, q), np.maximum(-e, 0))


def _check_int(name, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise TypeError(f"{name} must be an integer, not {v!r}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, not {v!r}")


def _channel_array(name, value, lo, hi, channels=None) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == bool or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{name} must be integers, not dtype {arr.dtype}")
    if arr.ndim > 1:
        raise ValueError(f"{name} must be one value or one per channel, not shape {arr.shape}")
    if channels is not None and arr.ndim == 1 and len(arr) != channels:
        raise ValueError(f"{name} must have {channels} values (one per channel), "
                         f"not {len(arr)}")
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        bad = arr[(arr < lo) | (arr > hi)].flat[0]
        raise ValueError(f"{name} values must be in {lo}..{hi}, not {int(bad)}")
    return arr.astype(np.int64)


@dataclass(frozen=True, eq=False)
class QuantParams:
    """The requantization of one GEMM's outputs (one layer), TFLite's int8 parameters.

    Per output channel (arrays of N, or one value for all): ``bias`` (int32), ``multiplier``
    (int32 ``q``), ``shift`` (``e``, -32..31: left for e > 0, right for e < 0). Per layer:
    ``out_zp`` (-128..127), ``act_min`` <= ``act_max`` (-128..127: the clamp, which carries
    the fused activation). ``from_scales`` derives them like TFLite does.
    """

    bias: np.ndarray
    multiplier: np.ndarray
    shift: np.ndarray
    out_zp: int = 0
    act_min: int = -128
    act_max: int = 127

    def __init__(self, bias=0, multiplier=1 << 30, shift=1, out_zp=0, act_min=-128,
                 act_max=127):
        object.__setattr__(self, "bias", _channel_array("bias", bias, INT32_MIN, INT32_MAX))
        object.__setattr__(self, "multiplier",
                           _channel_array("multiplier", multiplier, INT32_MIN, INT32_MAX))
        object.__setattr__(self, "shift", _channel_array("shift", shift, SHIFT_MIN, SHIFT_MAX))
        for name, v in (("out_zp", out_zp), ("act_min", act_min), ("act_max", act_max)):
            _check_int(name, v, -128, 127)
        if act_min > act_max:
            raise ValueError(f"act_min must be at most act_max, not {act_min} > {act_max}")
        object.__setattr__(self, "out_zp", int(out_zp))
        object.__setattr__(self, "act_min", int(act_min))
        object.__setattr__(self, "act_max", int(act_max))
        sizes = {len(a) for a in (self.bias, self.multiplier, self.shift) if a.ndim == 1}
        if len(sizes) > 1:
            raise ValueError(f"bias, multiplier and shift must have the same number of "
                             f"channels, not {sorted(sizes)}")

    @classmethod
    def from_scales(cls, s_in, s_w, s_out, *, bias=0, out_zp=0, activation="NONE"):
        """TFLite's parameters from float scales: ``M[c] = double(float32(s_in)) *
        double(float32(s_w[c])) / double(float32(s_out))`` (``s_w`` one scale or one per
        channel), ``quantize_multiplier`` of each, ``activation_bounds``."""
        f32 = np.float32
        s_w = np.atleast_1d(np.asarray(s_w, dtype=np.float64))
        for name, values in (("s_in", [s_in]), ("s_w", s_w), ("s_out", [s_out])):
            for v in values:
                if not 0 < f32(v) < np.inf:
                    raise ValueError(f"{name} must be a positive scale, finite and nonzero as "
                                     f"a float32, not {v!r}")
        qe = [quantize_multiplier(float(f32(s_in)) * float(f32(s)) / float(f32(s_out)))
              for s in s_w]
        q = np.array([v for v, _ in qe], dtype=np.int64)
        e = np.array([v for _, v in qe], dtype=np.int64)
        if len(s_w) == 1:
            q, e = q[0], e[0]
        lo, hi = activation_bounds(activation, s_out, out_zp)
        return cls(bias=bias, multiplier=q, shift=e, out_zp=out_zp, act_min=lo, act_max=hi)

    @property
    def channels(self) -> int | None:
        """Channels given per channel (``None``: every value is per layer)."""
        for a in (self.bias, self.multiplier, self.shift):
            if a.ndim == 1:
                return len(a)
        return None

    def per_channel(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(bias, multiplier, shift)`` as arrays of ``n`` channels."""
        if self.channels not in (None, n):
            raise ValueError(f"the parameters have {self.channels} channels, not {n}")
        return tuple(np.broadcast_to(a, (n,)).astype(np.int64)
                     for a in (self.bias, self.multiplier, self.shift))

    def __eq__(self, other):
        if not isinstance(other, QuantParams):
            return NotImplemented
        return (all(np.array_equal(getattr(self, k), getattr(other, k))
                    for k in ("bias", "multiplier", "shift"))
                and (self.out_zp, self.act_min, self.act_max)
                == (other.out_zp, other.act_min, other.act_max))

    __hash__ = None


def requantize(acc, params: QuantParams) -> np.ndarray:
    """Requantize accumulators ``acc`` (..., N: the last axis is the output channel; any
    integer values, wrapped to int32 first) to int8 values (int64 array, same shape)."""
    if not isinstance(params, QuantParams):
        raise TypeError(f"params must be QuantParams, not {params!r}")
    acc = np.asarray(acc)
    if acc.size and acc.dtype.kind not in "iu":
        raise TypeError(f"acc must be an integer array, not dtype {acc.dtype}")
    if acc.ndim == 0:
        raise ValueError("acc must have an output-channel axis")
    bias, q, e = params.per_channel(acc.shape[-1])
    return requantize_lanes(acc, bias, q, e, params.out_zp, params.act_min, params.act_max)


def requantize_lanes(acc, bias, multiplier, shift, out_zp, act_min, act_max) -> np.ndarray:
    """``requantize`` on raw values, as the hardware takes them from a READ_QUANT (no check
    that ``act_min <= act_max``): ``min(max(y + out_zp, act_min), act_max)``, TFLite's order.
    ``bias``, ``multiplier``, ``shift`` broadcast against the last axis of ``acc``."""
    acc = np.asarray(acc)
    x = _wrap32(_wrap32(acc.astype(np.int64)) + np.asarray(bias, dtype=np.int64))
    y = multiply_by_quantized_multiplier(x, multiplier, shift)
    return np.minimum(np.maximum(y + int(out_zp), int(act_min)), int(act_max))
