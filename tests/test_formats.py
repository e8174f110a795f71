"""Operand encodings (``sim.formats``) against ml_dtypes (every encoding, random values) and
against the exact reference (``exact_float``: bit fields decoded by formula, IEEE rounding from
the definition); satfinite; int4 packing; lane words; argument checks."""

import math
from fractions import Fraction

import exact_float as ref
import ml_dtypes
import numpy as np
import pytest

from tpugen.hdl.config import OPERAND_TYPES, OperandType
from tpugen.sim.formats import (
    decode,
    encode,
    ml_dtype,
    pack_int4,
    pack_lanes,
    unpack_int4,
    unpack_lanes,
)

FLOATS = ("bf16", "fp8_e4m3", "fp8_e5m2")
BITS = {"bf16": np.uint16, "fp8_e4m3": np.uint8, "fp8_e5m2": np.uint8}


def _all(fmt):
    return np.arange(1 << OPERAND_TYPES[fmt].width, dtype=BITS[fmt])


def _f64(x):
    with np.errstate(invalid="ignore"):           # signalling NaNs
        return np.asarray(x).astype(np.float64)


def _nan(bits, fmt):
    """NaN encodings, from the bit fields: exponent all ones and a non-zero mantissa (IEEE) or
    an all-ones mantissa (E4M3FN)."""
    eb, mb, _, specials = ref.FORMATS[fmt]
    b = np.ravel(bits).astype(np.int64)
    exp, man = (b >> mb) & ((1 << eb) - 1), b & ((1 << mb) - 1)
    return (exp == (1 << eb) - 1) & ((man == (1 << mb) - 1) if specials == "fn" else (man != 0))


def _same(got, want, fmt):
    """Bits equal, or both NaN."""
    got, want = np.ravel(got), np.ravel(want)
    return (got == want) | (_nan(got, fmt) & _nan(want, fmt))


def _ml_encode(x, fmt):
    """ml_dtypes' conversion (float32 or float64 in), saturated first for the fp8 types."""
    t = OPERAND_TYPES[fmt]
    if fmt != "bf16":
        x = np.clip(x, -t.max_finite, t.max_finite)
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(ml_dtype(fmt)).view(BITS[fmt])


def test_ml_dtype():
    assert ml_dtype("bf16") == ml_dtypes.bfloat16
    assert ml_dtype(OPERAND_TYPES["fp8_e4m3"]) == ml_dtypes.float8_e4m3fn
    assert ml_dtype("fp8_e5m2") == ml_dtypes.float8_e5m2
    assert ml_dtype("int4") == ml_dtypes.int4
    assert ml_dtype("int8") == np.int8


# ------------------------------------------------------------------------- float encodings

@pytest.mark.parametrize("fmt", FLOATS)
def test_decode_every_encoding(fmt):
    bits = _all(fmt)
    got = decode(bits, fmt)
    assert got.dtype == np.float32
    oracle = bits.view(ml_dtype(fmt)).astype(np.float32)
    assert (np.isnan(got) == np.isnan(oracle)).all()
    assert (got.view(np.uint32) == oracle.view(np.uint32))[~np.isnan(got)].all()
    for b, v in zip(bits.tolist(), got.tolist(), strict=True):    # the formula
        sign, mag = ref.value(b, fmt)
        if mag == ref.NAN:
            assert math.isnan(v)
        else:
            assert math.copysign(1, v) == (-1) ** sign
            assert abs(v) == math.inf if mag == ref.INF else Fraction(abs(v)) == mag, hex(b)


@pytest.mark.parametrize("fmt", FLOATS)
def test_encode_inverts_decode_on_every_encoding(fmt):
    bits = _all(fmt)
    want = bits.copy()
    if fmt == "fp8_e5m2":                               # satfinite: +-inf -> +-57344
        want[[0x7C, 0xFC]] = [0x7B, 0xFB]
    nan = _nan(bits, fmt)
    for values in (decode(bits, fmt), _f64(decode(bits, fmt))):
        got = encode(values, fmt)
        assert got.dtype == BITS[fmt]
        assert (got == want)[~nan].all()                # subnormals too: no flush at encode
        assert _nan(got, fmt)[nan].all()
        assert (np.signbit(values[nan]) == (got[nan] >> (got.itemsize * 8 - 1) == 1)).all()
    assert (encode(bits.view(ml_dtype(fmt)), fmt) == bits).all()     # its own bits, NaNs too
    if fmt != "bf16":                                  # float16 holds the fp8 values
        assert (encode(decode(bits, fmt)[~nan].astype(np.float16), fmt) == want[~nan]).all()


@pytest.mark.parametrize("fmt", FLOATS)
def test_encode_matches_ml_dtypes(fmt):
    rng = np.random.default_rng(10)
    r32 = rng.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bf = np.arange(1 << 16, dtype=np.uint32) << 16              # every bf16 value, as float32
    x32 = np.concatenate([r32, bf.view(np.float32)])
    assert _same(encode(x32, fmt), _ml_encode(x32, fmt), fmt).all()
    x64 = np.concatenate([rng.standard_normal(20000) * 2.0 ** rng.integers(-140, 140, 20000),
                          _f64(x32[:20000]) * (1 + 2.0 ** -40)])
    assert _same(encode(x64, fmt), _ml_encode(x64, fmt), fmt).all()


def _midpoints(fmt):
    """(midpoint of two neighbouring positive finite values, the even one's bits)."""
    bits = _all(fmt)
    v = _f64(decode(bits, fmt))
    finite = np.isfinite(v) & ~np.signbit(v)
    b, v = bits[finite], v[finite]
    return (v[:-1] + v[1:]) / 2, np.where(b[:-1] % 2 == 0, b[:-1], b[1:])


@pytest.mark.parametrize("fmt", FLOATS)
def test_ties_go_to_even(fmt):
    mid, even = _midpoints(fmt)
    sign = np.array(1 << (OPERAND_TYPES[fmt].width - 1), BITS[fmt])
    assert (encode(mid, fmt) == even).all()
    assert (encode(-mid, fmt) == even | sign).all()
    assert (encode(mid.astype(np.float32), fmt) == even).all()   # exact in float32 too
    t = OPERAND_TYPES[fmt]
    half_ulp_beyond = t.max_finite + (t.max_finite - decode(encode(t.max_finite, fmt) - 1, fmt)) / 2
    want = 0x7F80 if fmt == "bf16" else int(encode(t.max_finite, fmt))
    assert int(encode(half_ulp_beyond, fmt)) == want     # bf16: inf, fp8: saturates


@pytest.mark.parametrize("fmt", FLOATS)
def test_encode_against_the_exact_rounding(fmt):
    rng = np.random.default_rng(11)
    mid, _ = _midpoints(fmt)
    mid = rng.choice(mid, 500)
    x = np.concatenate([
        rng.standard_normal(1500) * 2.0 ** rng.integers(-150, 150, 1500),   # every exponent
        mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf),               # ties and near
        [0.0, -0.0, np.inf, -np.inf, 1e300, -1e-300, 5e-324]])
    want = [ref.round_bits(int(np.signbit(v)), Fraction(abs(v)) if np.isfinite(v) else ref.INF,
                           fmt, saturate=fmt != "bf16") for v in x]
    assert encode(x, fmt).tolist() == want


@pytest.mark.parametrize("fmt,x,want", [
    ("fp8_e4m3", 1e6, 0x7E),                      # 448
    ("fp8_e4m3", -1e6, 0xFE),
    ("fp8_e4m3", np.inf, 0x7E),
    ("fp8_e4m3", -np.inf, 0xFE),
    ("fp8_e4m3", 448.0, 0x7E),
    ("fp8_e4m3", 464.0, 0x7E),                    # a tie between 448 and 480: to even
    ("fp8_e4m3", 480.0, 0x7E),                    # S.1111.111 would be NaN: saturates
    ("fp8_e4m3", 2.0 ** -9, 0x01),                # the smallest subnormal
    ("fp8_e4m3", -0.0, 0x80),
    ("fp8_e5m2", -np.inf, 0xFB),                  # -57344
    ("fp8_e5m2", np.inf, 0x7B),
    ("fp8_e5m2", 1e6, 0x7B),
    ("fp8_e5m2", 61440.0, 0x7B),                  # a tie beyond the max: saturates
    ("fp8_e5m2", 2.0 ** -16, 0x01),
    ("bf16", np.inf, 0x7F80),
    ("bf16", -1e39, 0xFF80),                      # overflow: IEEE, no saturation
    ("bf16", 2.0 ** -133, 0x0001),                # subnormals are kept at encode
    ("bf16", 1.0, 0x3F80),
    ("bf16", -2.0, 0xC000),
])
def test_encode_cases(fmt, x, want):
    assert encode(np.float64(x), fmt).tolist() == want
    with np.errstate(over="ignore"):
        assert encode(np.float32(x), fmt).tolist() == want
    assert encode([x], fmt).tolist() == [want]


def test_satfinite_edges_decode_to_the_max_and_nan_stays_nan():
    assert decode(encode([1e6, np.inf], "fp8_e4m3"), "fp8_e4m3").tolist() == [448.0, 448.0]
    assert decode(encode(-np.inf, "fp8_e5m2"), "fp8_e5m2") == -57344.0
    for fmt in FLOATS:
        got = encode(np.array([np.nan, -np.nan], np.float32), fmt)
        assert _nan(got, fmt).all(), fmt
        assert np.isnan(decode(got, fmt)).all()
        assert np.isnan(decode(encode(np.array([np.nan], ml_dtype(fmt)), fmt), fmt)).all()


def test_decode_masks_bit_patterns_to_the_width():
    assert decode(np.int16(-1), "bf16").view(np.uint32) == 0xFFFF0000 | 0x7FFF0000
    assert decode([0x13F80, 0x3F80], "bf16").tolist() == [1.0, 1.0]
    assert decode(np.array([0x17E, -2], np.int64), "fp8_e4m3").tolist() == [448.0, -448.0]
    assert decode(np.array([0x1F, -1, 8]), "int4").tolist() == [-1, -1, -8]


# --------------------------------------------------------------------------- int encodings

@pytest.mark.parametrize("fmt,lo,hi", [("int8", -128, 127), ("int4", -8, 7)])
def test_int_encodings(fmt, lo, hi):
    v = np.arange(lo, hi + 1)
    bits = encode(v, fmt)
    assert bits.dtype == np.uint8
    assert bits.tolist() == [x & ((1 << OPERAND_TYPES[fmt].width) - 1) for x in range(lo, hi + 1)]
    oracle = v.astype(ml_dtype(fmt)).view(np.uint8) & ((1 << OPERAND_TYPES[fmt].width) - 1)
    assert (bits == oracle).all()
    assert decode(bits, fmt).dtype == np.int64
    assert (decode(bits, fmt) == v).all()
    assert (encode(v.astype(np.int8), fmt) == bits).all()
    assert (encode(v.astype(ml_dtype(fmt)), fmt) == bits).all()
    with pytest.raises(ValueError, match=f"values must be in {lo}..{hi} for {fmt}, not {hi + 1}$"):
        encode([0, hi + 1, lo - 1], fmt)
    with pytest.raises(ValueError, match=f"not {lo - 1}$"):
        encode(np.array([[lo - 1]]), fmt)


# ------------------------------------------------------------------------------ int4 packing

def test_pack_int4_known_bytes():
    packed = pack_int4([1, -1, 7, -8, 3])
    assert packed.dtype == np.uint8
    assert packed.tolist() == [0xF1, 0x87, 0x03]       # low nibble first, zero high nibble
    assert unpack_int4(packed, 5).tolist() == [1, -1, 7, -8, 3]
    assert unpack_int4(packed, 5).dtype == np.int8
    assert unpack_int4(packed, 6).tolist() == [1, -1, 7, -8, 3, 0]
    assert pack_int4([-8, 7, 0, -1]).tolist() == [0x78, 0xF0]
    assert pack_int4(np.array([[1, 2], [3, 4]])).tolist() == [0x21, 0x43]   # C order
    assert pack_int4([]).tolist() == [] and unpack_int4([], 0).tolist() == []


def test_pack_int4_round_trips_and_is_pack_lanes():
    rng = np.random.default_rng(12)
    for n in (1, 2, 3, 16, 17, 255):
        v = rng.integers(-8, 8, n)
        packed = pack_int4(v)
        assert len(packed) == (n + 1) // 2
        assert (unpack_int4(packed, n) == v).all()
        assert packed.tobytes() == pack_lanes(v, 4).to_bytes((n + 1) // 2, "little")
        assert (unpack_lanes(pack_lanes(v, 4), 4, n) == encode(v, "int4")).all()


# ------------------------------------------------------------------------------ lane words

def test_pack_lanes_known_words():
    assert pack_lanes([0x12, 0x34], 8) == 0x3412
    assert pack_lanes(encode([1.0, -2.0], "bf16"), 16) == 0xC0003F80
    assert pack_lanes([1, 0, 1, 1], 1) == 0b1101
    assert pack_lanes([-1, 2], 5) == (2 << 5) | 31              # masked to the width
    assert pack_lanes(np.array([2 ** 64 - 1, 1], np.uint64), 64) == (1 << 64) | (2 ** 64 - 1)
    assert pack_lanes([], 8) == 0
    assert unpack_lanes(0x3412, 8, 2).tolist() == [0x12, 0x34]
    assert unpack_lanes(0x3412, 8, 3).tolist() == [0x12, 0x34, 0]
    assert [unpack_lanes(0, w, 1).dtype for w in (1, 8, 9, 16, 17, 32, 33, 64)] == \
        [np.uint8, np.uint8, np.uint16, np.uint16, np.uint32, np.uint32, np.uint64, np.uint64]


def test_lanes_round_trip_at_every_width():
    rng = np.random.default_rng(13)
    for width in range(1, 65):
        for count in (1, 2, 7):
            lanes = [int(rng.integers(0, 1 << min(width, 62))) << max(0, width - 62)
                     for _ in range(count)]
            word = pack_lanes(lanes, width)
            assert 0 <= word < 1 << (width * count)
            assert unpack_lanes(word, width, count).tolist() == lanes
            assert [(word >> (j * width)) & ((1 << width) - 1) for j in range(count)] == lanes


# ------------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("call,error,match", [
    (lambda: encode([1.0], "fp9"), ValueError,
     r"^fmt must be one of \['bf16', 'fp8_e4m3', 'fp8_e5m2', 'int4', 'int8'\], not 'fp9'$"),
    (lambda: decode([1], 8), TypeError, "fmt must be an OperandType or a str, not 8"),
    (lambda: ml_dtype(OperandType("int3", 3, True)), ValueError, "fmt must be one of"),
    (lambda: encode([1, 2], "bf16"), TypeError, "values must be a float array for bf16, not int"),
    (lambda: encode([1j], "fp8_e4m3"), TypeError, "values must be a float array"),
    (lambda: encode([0.5], "int8"), TypeError, "values must be an integer array for int8"),
    (lambda: encode([True], "int4"), TypeError, "values must be an integer array"),
    (lambda: decode([0.5], "bf16"), TypeError, "bits must be an integer array"),
    (lambda: decode(["a"], "int8"), TypeError, "bits must be an integer array"),
    (lambda: pack_int4([8]), ValueError, "values must be in -8..7 for int4, not 8"),
    (lambda: pack_int4([0.5]), TypeError, "values must be an integer array"),
    (lambda: unpack_int4([1, 2], 5), ValueError, "count must be in 0..4, not 5"),
    (lambda: unpack_int4([1], -1), ValueError, "count must be in 0..2, not -1"),
    (lambda: unpack_int4([1.0], 1), TypeError, "packed must be an integer array"),
    (lambda: pack_lanes([1], 0), ValueError, "width must be in 1..64, not 0"),
    (lambda: pack_lanes([1], 65), ValueError, "width must be in 1..64, not 65"),
    (lambda: pack_lanes([1], 8.0), TypeError, "width must be an integer, not 8.0"),
    (lambda: pack_lanes([1], True), TypeError, "width must be an integer, not True"),
    (lambda: pack_lanes([0.5], 8), TypeError, "lanes_bits must be an integer, not 0.5"),
    (lambda: pack_lanes(np.array([0.5]), 8), TypeError, "lanes_bits must be an integer array"),
    (lambda: unpack_lanes(-1, 8, 1), ValueError, "word must be in 0..255, not -1"),
    (lambda: unpack_lanes(256, 8, 1), ValueError, "word must be in 0..255, not 256"),
    (lambda: unpack_lanes(1.0, 8, 1), TypeError, "word must be an integer"),
    (lambda: unpack_lanes(1, 8, -1), ValueError, "count must be >= 0, not -1"),
])
def test_bad_arguments_raise(call, error, match):
    with pytest.raises(error, match=match):
        call()
