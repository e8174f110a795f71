"""Operand encodings: values <-> bit patterns of the operand types, and lane packing.

Operands are handled as **bit patterns**: unsigned NumPy integer arrays (any integer dtype is
accepted as input and masked to the type's width; results are uint8 for int4, int8 and the
fp8 types, uint16 for bf16). The float types (``hdl.config.OPERAND_TYPES``):

  bf16      sign, 8 exponent bits (bias 127), 7 mantissa bits; infinities and NaNs as IEEE.
  fp8_e4m3  OCP E4M3FN: bias 7, no infinities, NaN = S.1111.111 only, max finite 448.
  fp8_e5m2  OCP E5M2: bias 15, infinities and NaNs as IEEE, max finite 57344.

``encode`` rounds to nearest, ties to even. fp8 saturates (``satfinite``: +-inf and values
beyond the largest finite value become +-max, NaN stays NaN); bf16 overflows to +-inf as IEEE.
Subnormals are kept (no flush here: reading bf16 subnormals as zero is the datapath's rule,
``sim.float_golden``). A NaN encodes as the type's quiet NaN with the value's sign (bf16
0x7FC0, e5m2 0x7E, e4m3 0x7F; sign bit added). ``decode`` gives the exact value of each
encoding (float32 for the float types, which holds them all; int64 for the integer types).

int4 in memory is two values per byte, low nibble first (element 2i in bits 0-3 of byte i,
2i+1 in bits 4-7; an odd count has a zero high nibble): ``pack_int4`` / ``unpack_int4``. Wider
words of lanes (``pack_lanes`` / ``unpack_lanes``) put lane j at bits [j*width, (j+1)*width),
the same order.

``ml_dtypes`` is used for conversions only (exact casts of values already rounded here).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tpugen.hdl.config import OPERAND_TYPES, OperandType

__all__ = ["SATFINITE", "operand_type", "float_type", "ml_dtype", "bits_dtype", "as_bits",
           "round_float", "encode", "decode", "pack_int4", "unpack_int4", "pack_lanes",
           "unpack_lanes"]

#: The float types whose conversions saturate (``satfinite``); the others overflow to inf.
SATFINITE = frozenset({"fp8_e4m3", "fp8_e5m2"})

_ML_DTYPES = {
    "int8": np.dtype(np.int8),
    "int4": np.dtype(ml_dtypes.int4),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
_ML_FLOATS = tuple(np.dtype(getattr(ml_dtypes, n)) for n in (
    "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu", "float6_e2m3fn",
    "float6_e3m2fn", "float4_e2m1fn") if hasattr(ml_dtypes, n))


def operand_type(fmt, *, name: str = "fmt") -> OperandType:
    """The ``OperandType`` of ``fmt`` (an ``OperandType`` or its name)."""
    if isinstance(fmt, OperandType):
        if OPERAND_TYPES.get(fmt.name) != fmt:
            raise ValueError(f"{name} must be one of {sorted(OPERAND_TYPES)}, not {fmt!r}")
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"{name} must be an OperandType or a str, not {fmt!r}")
    if fmt not in OPERAND_TYPES:
        raise ValueError(f"{name} must be one of {sorted(OPERAND_TYPES)}, not {fmt!r}")
    return OPERAND_TYPES[fmt]


def float_type(fmt, *, name: str = "fmt") -> OperandType:
    """``operand_type(fmt)``, which must be a float type."""
    t = operand_type(fmt, name=name)
    if not t.is_float:
        floats = sorted(n for n, o in OPERAND_TYPES.items() if o.is_float)
        raise ValueError(f"{name} must be one of {floats}, not {t.name!r}")
    return t


def ml_dtype(fmt) -> np.dtype:
    """The NumPy / ml_dtypes dtype of an operand type's values (``ml_dtypes.bfloat16``...)."""
    return _ML_DTYPES[operand_type(fmt).name]


def bits_dtype(width: int) -> np.dtype:
    """The smallest unsigned NumPy dtype of ``width`` (1..64) bits."""
    width = _check_int("width", width, 1, 64)
    return np.dtype(next(d for d in (np.uint8, np.uint16, np.uint32, np.uint64)
                         if np.dtype(d).itemsize * 8 >= width))


def as_bits(bits, width: int, *, name: str = "bits") -> np.ndarray:
    """An integer array as unsigned bit patterns of ``width`` bits (masked)."""
    a = _integers(bits)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array (bit patterns), not {a.dtype}")
    mask = np.uint64((1 << width) - 1)
    return (a.astype(np.uint64) & mask).astype(bits_dtype(width))


def _nan_bits(t: OperandType) -> int:
    """The quiet NaN of a float type (sign bit clear)."""
    top = ((1 << t.exponent) - 1) << t.mantissa
    return top | ((1 << t.mantissa) - 1 if t.specials == "fn" else 1 << (t.mantissa - 1))


def round_float(x, fmt) -> np.ndarray:
    """float64 ``x`` rounded to the values of a float type: nearest, ties to even, subnormals
    kept; beyond the largest finite value fp8 saturates (inf too) and bf16 gives inf."""
    t = float_type(fmt)
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(x)                           # |x| in [2**(e-1), 2**e)
        q = np.maximum(e - 1, 1 - t.bias) - t.mantissa  # exponent of one unit in the last place
        r = np.ldexp(np.rint(np.ldexp(x, -q)), q)    # exact scaling; rint is ties-to-even
        if t.name in SATFINITE:                      # NaN stays NaN
            return np.clip(r, -t.max_finite, t.max_finite)
        return np.where(np.abs(r) > t.max_finite, np.copysign(np.inf, r), r)


def encode(values, fmt) -> np.ndarray:
    """Bit patterns of ``values`` in operand type ``fmt`` (see the module docstring).

    Float types take float arrays (float16/32/64, or any ml_dtypes float type, e.g. an array
    already of ``ml_dtype(fmt)``: then the bits are its own); integer types take integer arrays
    whose values are in the type's range (``ValueError`` naming the first value outside)."""
    t = operand_type(fmt)
    a = np.asarray(values) if t.is_float else _integers(values)
    if t.is_float:
        if a.dtype == ml_dtype(t):
            return a.view(bits_dtype(t.width)).copy()
        if not ((a.dtype.kind == "f" and a.dtype.itemsize <= 8) or a.dtype in _ML_FLOATS):
            raise TypeError(f"values must be a float array for {t.name}, not {a.dtype}")
        with np.errstate(invalid="ignore"):         # signalling NaNs
            x = a.astype(np.float64)
        r = round_float(x, t)
        bits = r.astype(np.float32).astype(ml_dtype(t)).view(bits_dtype(t.width))
        sign = np.signbit(x).astype(bits.dtype) << (t.width - 1)
        return np.where(np.isnan(x), _nan_bits(t) | sign, bits).astype(bits.dtype)
    if a.dtype == ml_dtype(t):
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"values must be an integer array for {t.name}, not {a.dtype}")
    bad = (a < t.min) | (a > t.max)
    if bad.any():
        raise ValueError(f"values must be in {t.min}..{t.max} for {t.name}, "
                         f"not {a[bad].flat[0].item()!r}")
    return as_bits(a.astype(np.int64), t.width, name="values")


def decode(bits, fmt) -> np.ndarray:
    """The values of bit patterns ``bits`` of operand type ``fmt``, exact: np.float32 for the
    float types (subnormals as encoded, no flush), np.int64 for the integer types."""
    t = operand_type(fmt)
    b = as_bits(bits, t.width)
    if t.is_float:
        with np.errstate(invalid="ignore"):         # signalling NaNs
            return b.view(ml_dtype(t)).astype(np.float32)
    v = b.astype(np.int64)
    return np.where(v >= 1 << (t.width - 1), v - (1 << t.width), v)


def pack_int4(values) -> np.ndarray:
    """int4 values (-8..7, flattened in C order) packed two per byte, low nibble first; an odd
    count has a zero high nibble. Returns uint8, ``ceil(count / 2)`` bytes."""
    nib = encode(np.ravel(np.asarray(values)), "int4")
    if nib.size % 2:
        nib = np.append(nib, np.uint8(0))
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)


def unpack_int4(packed, count: int) -> np.ndarray:
    """The first ``count`` int4 values (np.int8) of bytes packed low nibble first."""
    p = np.ravel(as_bits(packed, 8, name="packed"))
    count = _check_int("count", count, 0, 2 * p.size)
    nib = np.stack([p & 0xF, p >> 4], axis=-1).reshape(-1)[:count]
    return decode(nib, "int4").astype(np.int8)


def pack_lanes(lanes_bits, width: int) -> int:
    """One integer of lanes: lane j (masked to ``width`` bits, 1..64) at bits
    [j*width, (j+1)*width)."""
    width = _check_int("width", width, 1, 64)
    if isinstance(lanes_bits, list | tuple):      # Python ints of any size
        lanes = [_check_int("lanes_bits", v, None, None) for v in lanes_bits]
    else:
        lanes = np.ravel(as_bits(lanes_bits, width, name="lanes_bits")).tolist()
    mask = (1 << width) - 1
    return sum((v & mask) << (j * width) for j, v in enumerate(lanes))


def unpack_lanes(word: int, width: int, count: int) -> np.ndarray:
    """The ``count`` lanes of ``width`` bits (1..64) of ``word`` (``pack_lanes``'s inverse), as
    the smallest unsigned dtype of ``width`` bits. ``word`` must fit in ``count * width`` bits."""
    width = _check_int("width", width, 1, 64)
    count = _check_int("count", count, 0, None)
    word = _check_int("word", word, 0, (1 << (width * count)) - 1)
    mask = (1 << width) - 1
    return np.array([(word >> (j * width)) & mask for j in range(count)],
                    dtype=bits_dtype(width))


def _integers(values) -> np.ndarray:
    """``np.asarray(values)``; empty input as int64 (``[]`` would be float64)."""
    a = np.asarray(values)
    return a.astype(np.int64) if a.size == 0 and a.dtype.kind in "fb" else a


def _check_int(name: str, value, lo: int | None, hi: int | None) -> int:
    """``value`` as an int (a Python or NumPy integer, not a bool) in lo..hi (None: no
    bound)."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bound = f"in {lo}..{hi}" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be {bound}, not {value!r}")
    return value
