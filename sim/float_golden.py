"""The float datapath's golden model, bit-exact: products, binary32 adds, the GEMM order, the
activation's conversion. Everything takes and returns bit patterns (``sim.formats``).

Products (``product``): operands are bf16 / fp8_e4m3 / fp8_e5m2 bits; bf16 subnormal encodings
read as a zero of their sign, fp8 subnormals keep their value. The product is exact (it fits
binary32's 24-bit significand); a magnitude below 2**-126 gives a zero of its sign (the xor of
the operand signs), at or above 2**128 an infinity; NaN x anything and inf x 0 give NaN.

Adds (``fp32_add``), binary32: round to nearest, ties to even; an input below 2**-126 in
magnitude reads as a zero of its sign; a result below 2**-126 is flushed to a zero of its sign
(such a result is exact, so flushing before or after rounding is the same); signed zeros as
IEEE 754 (x + (-x) = +0, -0 + -0 = -0, +0 + -0 = +0); inf - inf is NaN.

GEMM order (``gemm``), C = A @ W on an array of R rows (A M x K, W K x N): K is cut in tiles of
R rows, the last one padded with +0 operands (products +0.0); within a tile each output sums
from +0.0 over all R products in increasing k (padding included): s = +0; s = s + p_k. The
first tile's sum is the output, each later tile's sum is added to it in tile order:
out = out + tile_sum. Not ``np.matmul``.

Activation (``activate``), binary32 accumulator bits -> operand bits: optional ReLU
(``x > 0 ? x : +0.0``, NaN stays NaN, -0 -> +0), then an input below 2**-126 reads as a zero
of its sign and is rounded to nearest even: bf16 overflows to +-inf; fp8 saturates (+-inf and
values beyond the max become +-max, NaN stays NaN) and keeps its subnormals.

NaN results may be any NaN: this model gives 0x7FC00000 for every binary32 NaN and the operand
type's quiet NaN with the sign of the input (``sim.formats.encode``) from ``activate``. Compare
with ``same_bits`` / ``assert_same``, for which any NaN equals any NaN.

Arithmetic: products in float64 (exact), adds as NumPy float32 + float32 (IEEE, ties to even,
with subnormals), then the flush rules. ``gemm`` is vectorized over M and N, looping over K.
"""

from __future__ import annotations

import numpy as np

from tpugen.sim.formats import as_bits, decode, encode, float_type

__all__ = ["FP32_NAN", "is_nan", "product", "fp32_add", "tile_sums", "gemm", "relu_fp32",
           "activate", "same_bits", "assert_same"]

#: The NaN this model gives for binary32 results.
FP32_NAN = 0x7FC00000
_MIN_NORMAL = 2.0 ** -126
_OVERFLOW = 2.0 ** 128


def _flush(x: np.ndarray) -> np.ndarray:
    """Magnitudes below 2**-126 as zeros of their sign (NaN and inf unchanged)."""
    return np.where(np.abs(x) < _MIN_NORMAL, np.copysign(np.zeros_like(x), x), x)


def _operands(bits, fmt, name: str) -> np.ndarray:
    """Operand values as float64, as the multipliers read them (bf16 subnormals are zero)."""
    t = float_type(fmt)
    with np.errstate(invalid="ignore"):             # signalling NaNs
        x = decode(as_bits(bits, t.width, name=name), t).astype(np.float64)
    return x if t.subnormals else _flush(x)


def _products(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """float32 products of float64 operand values (broadcast)."""
    with np.errstate(invalid="ignore"):              # inf x 0 is NaN
        p = _flush(a * w)                            # exact in float64
    return np.where(np.abs(p) >= _OVERFLOW, np.copysign(np.inf, p), p).astype(np.float32)


def _add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """binary32 sum of two flushed float32 arrays, flushed."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _flush(x + y)


def _fp32(bits, name: str) -> np.ndarray:
    """binary32 bits as flushed float32 values."""
    return _flush(as_bits(bits, 32, name=name).view(np.float32))


def _bits(x: np.ndarray) -> np.ndarray:
    """float32 values as binary32 bits, every NaN as FP32_NAN."""
    x = np.asarray(x, dtype=np.float32)
    return np.where(np.isnan(x), np.uint32(FP32_NAN), x.view(np.uint32)).astype(np.uint32)


def product(a_bits, w_bits, fmt) -> np.ndarray:
    """Elementwise (broadcast) products of operand bits of float type ``fmt``: binary32 bits."""
    return _bits(_products(_operands(a_bits, fmt, "a_bits"), _operands(w_bits, fmt, "w_bits")))


def fp32_add(x_bits, y_bits) -> np.ndarray:
    """Elementwise (broadcast) binary32 sums of binary32 bits, as the accumulators add."""
    return _bits(_add(_fp32(x_bits, "x_bits"), _fp32(y_bits, "y_bits")))


def _matrix(bits, name: str) -> np.ndarray:
    a = np.asarray(bits)
    if a.ndim != 2 or 0 in a.shape:
        raise ValueError(f"{name} must be a non-empty 2-D array, not shape {a.shape}")
    return a


def _tile_sum(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """float32 sums of one tile of float64 operand values (M x R, R x C), from +0 in k order."""
    s = np.zeros((a.shape[0], w.shape[1]), dtype=np.float32)
    for k in range(a.shape[1]):
        s = _add(s, _products(a[:, k, None], w[None, k, :]))
    return s


def _operand_pair(A_bits, W_bits, fmt) -> tuple[np.ndarray, np.ndarray]:
    A, W = _matrix(A_bits, "A_bits"), _matrix(W_bits, "W_bits")
    if A.shape[1] != W.shape[0]:
        raise ValueError(f"A_bits's columns ({A.shape[1]}) must match W_bits's rows "
                         f"({W.shape[0]})")
    return _operands(A, fmt, "A_bits"), _operands(W, fmt, "W_bits")


def tile_sums(A_bits, W_bits, fmt) -> np.ndarray:
    """One tile's sums (A M x R, W R x C -> M x C binary32 bits): each output from +0.0, adding
    the R products in increasing k."""
    return _bits(_tile_sum(*_operand_pair(A_bits, W_bits, fmt)))


def gemm(A_bits, W_bits, fmt, rows: int) -> np.ndarray:
    """C = A @ W (A M x K, W K x N operand bits of float type ``fmt``) in the order of an array
    of ``rows`` rows (module docstring): M x N binary32 bits."""
    a, w = _operand_pair(A_bits, W_bits, fmt)
    if not isinstance(rows, int | np.integer) or isinstance(rows, bool):
        raise TypeError(f"rows must be an integer, not {rows!r}")
    if rows < 1:
        raise ValueError(f"rows must be >= 1, not {rows!r}")
    pad = -a.shape[1] % rows
    a = np.pad(a, ((0, 0), (0, pad)))                # +0.0 operands: +0.0 products
    w = np.pad(w, ((0, pad), (0, 0)))
    out = _tile_sum(a[:, :rows], w[:rows])
    for k in range(rows, a.shape[1], rows):
        out = _add(out, _tile_sum(a[:, k:k + rows], w[k:k + rows]))
    return _bits(out)


def relu_fp32(bits) -> np.ndarray:
    """ReLU of binary32 bits: ``x > 0 ? x : +0.0``; a NaN stays (its bits unchanged)."""
    b = as_bits(bits, 32)
    return np.where(is_nan(b) | (b >> 31 == 0), b, np.uint32(0)).astype(np.uint32)


def activate(acc_bits, fmt, relu: bool) -> np.ndarray:
    """Accumulator (binary32) bits -> operand bits of float type ``fmt``: optional ReLU, then
    rounding to nearest even (inputs below 2**-126 read as zeros of their sign; bf16 overflows
    to inf, fp8 saturates and keeps its subnormals; NaN stays NaN)."""
    t = float_type(fmt)
    if not isinstance(relu, bool | np.bool_):
        raise TypeError(f"relu must be a bool, not {relu!r}")
    b = as_bits(acc_bits, 32, name="acc_bits")
    if relu:
        b = relu_fp32(b)
    with np.errstate(invalid="ignore"):             # signalling NaNs
        return encode(_flush(b.view(np.float32).astype(np.float64)), t)


def is_nan(bits, fmt=None) -> np.ndarray:
    """Which bit patterns are NaNs: binary32 (``fmt`` None) or of float operand type ``fmt``."""
    if fmt is None:
        width, exponent, mantissa, fn = 32, 8, 23, False
    else:
        t = float_type(fmt)
        width, exponent, mantissa, fn = t.width, t.exponent, t.mantissa, t.specials == "fn"
    mag = as_bits(bits, width).astype(np.uint64) & np.uint64((1 << (width - 1)) - 1)
    top = ((1 << exponent) - 1) << mantissa
    return mag == (top | ((1 << mantissa) - 1)) if fn else mag > top


def same_bits(got, want, fmt=None) -> np.ndarray:
    """Elementwise (broadcast): the same bit patterns (signs of zero included), or both NaN.
    Binary32 when ``fmt`` is None, else bits of float operand type ``fmt``."""
    width = 32 if fmt is None else float_type(fmt).width
    g, w = as_bits(got, width, name="got"), as_bits(want, width, name="want")
    return (g == w) | (is_nan(g, fmt) & is_nan(w, fmt))


def assert_same(got, want, what: str = "", fmt=None) -> None:
    """``same_bits`` everywhere, else AssertionError naming ``what``, the mismatch count and
    the first mismatch's index and both values in hex. Shapes must be equal."""
    prefix = f"{what}: " if what else ""
    if np.shape(got) != np.shape(want):
        raise AssertionError(f"{prefix}shape {np.shape(got)} != expected {np.shape(want)}")
    same = same_bits(got, want, fmt)
    if same.all():
        return
    width = 32 if fmt is None else float_type(fmt).width
    g, w = as_bits(got, width, name="got"), as_bits(want, width, name="want")
    idx = tuple(int(i) for i in np.argwhere(~same)[0])
    digits = (width + 3) // 4
    raise AssertionError(f"{prefix}{int((~same).sum())} of {same.size} differ; first at "
                         f"{idx}: got 0x{int(g[idx]):0{digits}X}, want 0x{int(w[idx]):0{digits}X}")
