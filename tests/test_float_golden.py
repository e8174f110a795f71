"""The float datapath's golden model (``sim.float_golden``) against an exact reference
(``exact_float``: Fractions decoded from the bit fields, IEEE rounding written from the
definition), on every fp8 product, random and edge binary32 adds, small GEMMs in the array's
order, and the activation's conversion; plus the cases that show the order is not np.matmul's."""

import time

import exact_float as ref
import numpy as np
import pytest
from exact_float import FP32_NAN

from tpugen.sim.float_golden import (
    activate,
    assert_same,
    fp32_add,
    gemm,
    is_nan,
    product,
    relu_fp32,
    same_bits,
    tile_sums,
)
from tpugen.sim.formats import encode

FLOATS = ("bf16", "fp8_e4m3", "fp8_e5m2")
WIDTH = {"bf16": 16, "fp8_e4m3": 8, "fp8_e5m2": 8}

#: binary32 edge values: zeros, subnormals, smallest / largest normals, max, inf, NaNs, 1 and
#: its neighbours, powers of two around the rounding points.
FP32_EDGES = [
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
    0x80800000, 0x00800001, 0x80800001, 0x01000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F7FFFFE,
    0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x3F800000, 0xBF800000,
    0x3F800001, 0x3F7FFFFF, 0x33800000, 0xB3800000, 0x33800001, 0x33000000, 0x4B800000,
    0xCB800000, 0x73000000, 0x72800000, 0x40490FDB, 0xC0490FDB, 0x00400000,
]


def _operand_edges(fmt: str) -> list[int]:
    """Every sign of: zero, smallest and largest subnormal, smallest normal, one, largest
    finite, the top exponent's encodings (inf / NaN / the e4m3 values 256..448)."""
    mb = ref.FORMATS[fmt][1]
    eb = ref.FORMATS[fmt][0]
    top = ((1 << eb) - 1) << mb
    mags = [0, 1, (1 << mb) - 1, 1 << mb, (1 << mb) + 1, ref.FORMATS[fmt][2] << mb,
            top - 1, top, top + 1, top | ((1 << mb) - 1), top | ((1 << mb) - 2)]
    sign = 1 << (eb + mb)
    return sorted({m | s for m in mags for s in (0, sign)})


def _check(got, want, what, fmt="fp32"):
    """Elementwise: bits equal, or both NaN (judged by the reference)."""
    got, want = np.asarray(got).ravel().tolist(), np.asarray(want).ravel().tolist()
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert ref.same(g, w, fmt), f"{what}[{i}]: got {g:#x}, want {w:#x}"


# ---------------------------------------------------------------------------------- products

@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_every_fp8_product(fmt):
    a, w = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    got = product(a, w, fmt)
    assert got.dtype == np.uint32 and got.shape == (256, 256)
    want = [ref.product(x, y, fmt) for x in range(256) for y in range(256)]
    _check(got, want, f"{fmt} product")


def test_bf16_products_random_and_edges():
    rng = np.random.default_rng(1)
    edges = _operand_edges("bf16") + [0x1F80, 0x1F00, 0x5F80, 0x5F00, 0x5F7F, 0x2000]
    a = np.concatenate([rng.integers(0, 1 << 16, 20000), np.repeat(edges, len(edges))])
    w = np.concatenate([rng.integers(0, 1 << 16, 20000), np.tile(edges, len(edges))])
    want = [ref.product(x, y, "bf16") for x, y in zip(a, w, strict=True)]
    _check(product(a, w, "bf16"), want, "product")


@pytest.mark.parametrize("fmt,a,w,want", [
    ("bf16", 0x2000, 0x2000, 0x00800000),          # 2**-63 * 2**-63 = 2**-126: normal
    ("bf16", 0x2000, 0x1F80, 0x00000000),          # 2**-63 * 2**-64: below, +0
    ("bf16", 0xA000, 0x1F80, 0x80000000),          # ... -0 (xor of the signs)
    ("bf16", 0xA000, 0x9F80, 0x00000000),
    ("bf16", 0x2000, 0x1FFF, 0x00000000),          # 2**-63 * (2 - 2**-7) 2**-64: below
    ("bf16", 0x0001, 0x7F00, 0x00000000),          # bf16 subnormal input reads as zero
    ("bf16", 0x8001, 0x7F00, 0x80000000),
    ("bf16", 0x5F80, 0x5F80, 0x7F800000),          # 2**64 * 2**64 = 2**128: inf
    ("bf16", 0x5F7F, 0x5F80, 0x7F7F0000),          # (2 - 2**-7) * 2**127: finite
    ("bf16", 0xFF80, 0x3F80, 0xFF800000),          # -inf * 1
    ("bf16", 0xFF80, 0x0000, FP32_NAN),            # inf * 0
    ("bf16", 0x7FC1, 0x3F80, FP32_NAN),
    ("bf16", 0x4040, 0xC0A0, 0xC1700000),          # 3 * -5 = -15
    ("fp8_e4m3", 0x01, 0x01, 0x36800000),          # subnormals keep their value: 2**-18
    ("fp8_e4m3", 0x7E, 0xFE, 0xC8440000),          # 448 * -448 = -200704
    ("fp8_e4m3", 0x7F, 0x00, FP32_NAN),            # NaN
    ("fp8_e4m3", 0x78, 0x78, 0x47800000),          # 256 * 256 (S.1111.000 is a number)
    ("fp8_e5m2", 0x7C, 0x00, FP32_NAN),            # inf * 0
    ("fp8_e5m2", 0x7C, 0x84, 0xFF800000),          # inf * -2**-14
    ("fp8_e5m2", 0x01, 0x81, 0xAF800000),          # 2**-16 * -2**-16
    ("fp8_e5m2", 0x7B, 0x7B, 0x4F440000),          # 57344**2
])
def test_product_cases(fmt, a, w, want):
    assert ref.product(a, w, fmt) == want or ref.same(ref.product(a, w, fmt), want)
    _check(product(a, w, fmt), [want], f"{fmt} {a:#x} * {w:#x}")


def test_product_broadcasts_and_masks():
    got = product(np.array([[0x3F80], [0x4000]], np.int64), np.array([0x3F80, 0x13F80]), "bf16")
    assert got.shape == (2, 2)
    assert got.tolist() == [[0x3F800000, 0x3F800000], [0x40000000, 0x40000000]]


# -------------------------------------------------------------------------------------- adds

def _random_fp32_pairs(rng, n):
    """Pairs with every exponent, and pairs close in exponent with random signs (rounding,
    ties, cancellation, results below 2**-126)."""
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    y = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    near = (x & np.uint64(0x807FFFFF)) ^ (rng.integers(0, 2, n, dtype=np.uint64) << 31)
    shift = rng.integers(-26, 27, n)
    exp = ((x >> np.uint64(23)) & np.uint64(0xFF)).astype(np.int64) + shift
    near = near | (np.clip(exp, 0, 255).astype(np.uint64) << np.uint64(23))
    near = near ^ (rng.integers(0, 1 << 4, n, dtype=np.uint64))     # low bits: ties and more
    low = rng.integers(0, 1 << 32, n // 4, dtype=np.uint64) & np.uint64(0x81FFFFFF)
    low2 = rng.integers(0, 1 << 32, n // 4, dtype=np.uint64) & np.uint64(0x81FFFFFF)
    return (np.concatenate([x, x, low]).astype(np.uint32),
            np.concatenate([y, near, low2]).astype(np.uint32))


def test_fp32_add_random_and_edges():
    rng = np.random.default_rng(2)
    x, y = _random_fp32_pairs(rng, 8000)
    e = np.array(FP32_EDGES, np.uint32)
    x = np.concatenate([x, np.repeat(e, len(e))])
    y = np.concatenate([y, np.tile(e, len(e))])
    _check(fp32_add(x, y), [ref.add(int(a), int(b)) for a, b in zip(x, y, strict=True)], "add")


@pytest.mark.parametrize("x,y,want", [
    (0x3F800000, 0x33800000, 0x3F800000),          # 1 + 2**-24: a tie, to even (down)
    (0x3F800001, 0x33800000, 0x3F800002),          # (1 + 2**-23) + 2**-24: tie, up
    (0x3F800000, 0x33800001, 0x3F800001),          # just above the tie
    (0x3F800000, 0xB3800000, 0x3F7FFFFF),          # 1 - 2**-24: exact in the binade below
    (0x3F800000, 0xB3000000, 0x3F800000),          # 1 - 2**-25: a tie, to even (1)
    (0x40490FDB, 0xC0490FDB, 0x00000000),          # x + (-x) = +0
    (0x80000000, 0x80000000, 0x80000000),          # -0 + -0 = -0
    (0x00000000, 0x80000000, 0x00000000),          # +0 + -0 = +0
    (0x80000000, 0x00000000, 0x00000000),
    (0x80000000, 0x3F800000, 0x3F800000),
    (0x00800001, 0x80800000, 0x00000000),          # 2**-149 result: flushed to +0
    (0x80800001, 0x00800000, 0x80000000),          # ... -0
    (0x00C00000, 0x80800000, 0x00000000),          # 1.5 * 2**-126 - 2**-126 = 2**-127: +0
    (0x00800000, 0x00800000, 0x01000000),          # 2**-125
    (0x00000001, 0x80000000, 0x00000000),          # subnormal inputs read as zero
    (0x80000001, 0x80000000, 0x80000000),          # -0 + -0
    (0x00400000, 0x3F800000, 0x3F800000),
    (0x807FFFFF, 0x00800000, 0x00800000),
    (0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000),          # overflow
    (0x7F7FFFFF, 0x73000000, 0x7F800000),          # max + half an ulp: a tie, to even (up)
    (0x7F7FFFFF, 0x72800000, 0x7F7FFFFF),          # max + a quarter ulp
    (0xFF7FFFFF, 0xF3000000, 0xFF800000),
    (0x7F800000, 0xFF800000, FP32_NAN),            # inf - inf
    (0x7F800000, 0xFF7FFFFF, 0x7F800000),
    (0xFF800000, 0xFF800000, 0xFF800000),
    (0x7FC00000, 0x3F800000, FP32_NAN),
    (0xFF800001, 0x7F800000, FP32_NAN),
    (0x4B800000, 0x3F800000, 0x4B800000),          # 2**24 + 1: a tie, to even (down)
    (0x4B800000, 0x40400000, 0x4B800002),          # 2**24 + 3: tie, up
])
def test_fp32_add_cases(x, y, want):
    assert ref.same(ref.add(x, y), want), "the reference"
    _check(fp32_add(x, y), [want], f"{x:#x} + {y:#x}")
    _check(fp32_add(y, x), [want], f"{y:#x} + {x:#x}")


# -------------------------------------------------------------------------------------- GEMM

def _operands(rng, fmt, shape, kind):
    """Operand bits: ``full`` every encoding, ``narrow`` exponents near 1 (rounding,
    cancellation), ``edges`` narrow with one in five an edge encoding, ``tiny`` / ``huge`` bf16
    near the flush and overflow thresholds."""
    eb, mb, bias, _ = ref.FORMATS[fmt]
    width = 1 + eb + mb
    if kind == "full":
        return rng.integers(0, 1 << width, shape)
    centre = {"narrow": bias, "edges": bias, "tiny": bias - 63, "huge": bias + 63}[kind]
    exp = np.clip(centre + rng.integers(-3, 4, shape), 1, (1 << eb) - 2)
    bits = (rng.integers(0, 2, shape) << (width - 1)) | (exp << mb) | rng.integers(0, 1 << mb,
                                                                                    shape)
    if kind == "edges":
        edges = np.array(_operand_edges(fmt))
        pick = rng.random(shape) < 0.2
        bits = np.where(pick, edges[rng.integers(0, len(edges), shape)], bits)
    return bits


GEMM_SHAPES = [(5, 7, 3, 4), (1, 9, 2, 3), (3, 8, 4, 8), (2, 5, 3, 1), (4, 11, 2, 5),
               (1, 1, 1, 1), (2, 3, 2, 7)]


@pytest.mark.parametrize("fmt", FLOATS)
def test_gemm_against_the_exact_reference(fmt):
    rng = np.random.default_rng(3)
    kinds = ["full", "narrow", "edges"] + (["tiny", "huge"] if fmt == "bf16" else [])
    for rep in range(4):
        for kind in kinds:
            for m, k, n, rows in GEMM_SHAPES:
                A, W = _operands(rng, fmt, (m, k), kind), _operands(rng, fmt, (k, n), kind)
                got = gemm(A, W, fmt, rows)
                assert got.dtype == np.uint32 and got.shape == (m, n)
                want = ref.gemm(A.tolist(), W.tolist(), fmt, rows)
                _check(got, want, f"{fmt} {kind} {m}x{k}x{n} rows {rows} #{rep}")


@pytest.mark.parametrize("fmt", FLOATS)
def test_tile_sums_are_one_tile(fmt):
    rng = np.random.default_rng(4)
    for kind in ("narrow", "edges"):
        A, W = _operands(rng, fmt, (3, 6), kind), _operands(rng, fmt, (6, 4), kind)
        want = ref.gemm(A.tolist(), W.tolist(), fmt, 6)
        _check(tile_sums(A, W, fmt), want, f"{fmt} {kind} tile")
        assert_same(gemm(A, W, fmt, 6), tile_sums(A, W, fmt))


def test_a_tile_sum_starts_from_plus_zero_and_pads_with_plus_zero():
    # -0 * 1 = -0, yet +0 + -0 = +0: the sum starts from +0.0.
    assert tile_sums([[0x8000]], [[0x3F80]], "bf16").tolist() == [[0x00000000]]
    # A negative result below 2**-126 flushes to -0; a padding product (+0) then makes it +0.
    A = [[0x0080, 0x8081]]                          # 2**-126, -(1 + 2**-7) 2**-126
    W = [[0x3F80], [0x3F80]]
    assert gemm(A, W, "bf16", 2).tolist() == [[0x80000000]]
    assert gemm(A, W, "bf16", 3).tolist() == [[0x00000000]]
    # The first tile's sum is the output (not +0 + sum): -0 stays, then -0 + -0 = -0.
    A4 = [[0x0080, 0x8081, 0x0080, 0x8081]]
    assert gemm(A4, W * 2, "bf16", 2).tolist() == [[0x80000000]]


def test_the_order_is_not_np_matmul():
    # K = 6 on 3 rows: tile 1 = (2**-24 + 1.5) + 2**-23 = 1.5 + 2**-23 (2**-24 is a tie to
    # 1.5's even neighbour); tile 2 = (-2**24 - 1) + 2**24 = 0 (-2**24 - 1 rounds to -2**24);
    # C = 1.5 + 2**-23. The exact sum rounds to 0.5 + 3 * 2**-24.
    a = np.array([[2.0 ** -24, 1.5, 2.0 ** -23, -2.0 ** 24, -1.0, 2.0 ** 24]])
    A, W = encode(a, "bf16"), encode(np.ones((6, 1)), "bf16")
    c = gemm(A, W, "bf16", 3)
    assert c.tolist() == [[0x3FC00001]] == ref.gemm(A.tolist(), W.tolist(), "bf16", 3)
    m = a.astype(np.float32) @ np.ones((6, 1), np.float32)
    assert m.view(np.uint32).tolist() != c.tolist()
    assert gemm(A, W, "bf16", 6).tolist() == [[0x3F800000]]         # one tile: another order
    # Products below 2**-126 are zeros; float32 matmul keeps them as subnormals.
    t = encode(np.array([[2.0 ** -70]]), "bf16")
    assert gemm(t, t, "bf16", 1).tolist() == [[0]]
    assert (t.astype(np.uint32) << 16).view(np.float32) ** 2 != 0


def test_k256_tiles_of_8_and_16_differ():
    rng = np.random.default_rng(5)
    A = encode(rng.standard_normal((4, 256)), "bf16")
    W = encode(rng.standard_normal((256, 5)), "bf16")
    c8, c16 = gemm(A, W, "bf16", 8), gemm(A, W, "bf16", 16)
    assert (c8 != c16).any()
    for rows, c in ((8, c8), (16, c16)):
        _check(c, ref.gemm(A.tolist(), W.tolist(), "bf16", rows), f"rows {rows}")
        # The same as folding tile_sums over the K tiles.
        out = tile_sums(A[:, :rows], W[:rows], "bf16")
        for k in range(rows, 256, rows):
            out = fp32_add(out, tile_sums(A[:, k:k + rows], W[k:k + rows], "bf16"))
        assert_same(c, out)


def test_a_256_cube_takes_seconds():
    rng = np.random.default_rng(6)
    A = encode(rng.standard_normal((256, 256)), "bf16")
    W = encode(rng.standard_normal((256, 256)), "bf16")
    t0 = time.perf_counter()
    c = gemm(A, W, "bf16", 16)
    assert time.perf_counter() - t0 < 10
    exact = ((A.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
             @ (W.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
    assert np.allclose(c.view(np.float32), exact, rtol=0, atol=1e-4)


# -------------------------------------------------------------------------------- activation

def test_relu_fp32():
    x = np.array([0x3F800000, 0xBF800000, 0x00000000, 0x80000000, 0x7F800000, 0xFF800000,
                  0x7FC00000, 0xFFC00001, 0x00000001, 0x80000001], np.uint32)
    want = [0x3F800000, 0, 0, 0, 0x7F800000, 0, 0x7FC00000, 0xFFC00001, 1, 0]
    assert relu_fp32(x).tolist() == want
    assert relu_fp32(x).dtype == np.uint32


def _activation_inputs(rng, fmt):
    """Random binary32 bits over every exponent, values near the format's range (its
    subnormals, ties, the max and beyond), and the binary32 edges."""
    r = rng.integers(0, 1 << 32, 6000, dtype=np.uint64).astype(np.uint32)
    eb, mb, bias, _ = ref.FORMATS[fmt]
    # Every float32 near the format's values: its exponents +-3, the 8 bits below its
    # mantissa varied (ties when they are 1000...).
    exp = rng.integers(1 - bias - mb - 3, (1 << eb) - bias + 2, 6000) + 127
    man = rng.integers(0, 1 << 23, 6000) & ~((1 << (23 - mb - 8)) - 1)
    near = (rng.integers(0, 2, 6000) << 31) | (np.clip(exp, 1, 254) << 23) | man
    ties = near & ~((1 << (23 - mb)) - 1) | (1 << (22 - mb))
    return np.concatenate([r, near, ties, FP32_EDGES]).astype(np.uint32)


@pytest.mark.parametrize("fmt", FLOATS)
@pytest.mark.parametrize("relu", [False, True])
def test_activate_against_the_exact_reference(fmt, relu):
    x = _activation_inputs(np.random.default_rng(7), fmt)
    got = activate(x, fmt, relu)
    assert got.dtype == (np.uint16 if fmt == "bf16" else np.uint8)
    _check(got, [ref.activate(int(v), fmt, relu) for v in x], f"{fmt} relu={relu}", fmt)


@pytest.mark.parametrize("fmt,x,want", [
    ("fp8_e4m3", 0x7F800000, 0x7E),                 # inf -> 448
    ("fp8_e4m3", 0x49742400, 0x7E),                 # 1e6 -> 448
    ("fp8_e4m3", 0x43E80000, 0x7E),                 # 464: a tie, to even 448
    ("fp8_e4m3", 0x43F00000, 0x7E),                 # 480 -> 448 (not NaN)
    ("fp8_e4m3", 0xFF800000, 0xFE),
    ("fp8_e4m3", 0x3A800000, 0x00),                 # 2**-10: half the smallest subnormal
    ("fp8_e4m3", 0x3B400000, 0x02),                 # 1.5 * 2**-9: a tie, to even 2 * 2**-9
    ("fp8_e4m3", 0x3AC00000, 0x01),                 # 0.75 * 2**-9: to 2**-9
    ("fp8_e5m2", 0xFF800000, 0xFB),                 # -inf -> -57344
    ("fp8_e5m2", 0x477FFFFF, 0x7B),
    ("fp8_e5m2", 0x37800000, 0x01),                 # 2**-16: smallest subnormal kept
    ("bf16", 0x7F7FFFFF, 0x7F80),                   # rounds up to inf
    ("bf16", 0x7F7F7FFF, 0x7F7F),
    ("bf16", 0x7F7F8000, 0x7F80),                   # max + half an ulp: a tie, to even (inf)
    ("bf16", 0x3F808000, 0x3F80),                   # tie, to even (down)
    ("bf16", 0x3F818000, 0x3F82),                   # tie, to even (up)
    ("bf16", 0x007FFFFF, 0x0000),                   # binary32 subnormal input reads as zero
    ("bf16", 0x807FFFFF, 0x8000),
    ("bf16", 0x00800000, 0x0080),
])
def test_activate_cases(fmt, x, want):
    assert ref.activate(x, fmt, False) == want
    assert activate(np.uint32(x), fmt, False).tolist() == want


def test_activate_nan_stays_nan():
    for fmt in FLOATS:
        got = activate(np.array([0x7FC00000, 0xFF800001], np.uint32), fmt, True)
        assert is_nan(got, fmt).all(), fmt


# ------------------------------------------------------------------------ same_bits / assert

def test_same_bits_is_nan_aware_and_sign_exact():
    got = np.array([0x7FC00000, 0xFFFFFFFF, 0x00000000, 0x3F800000, 0x7F800000])
    want = np.array([0x7F800001, 0x7FC00000, 0x80000000, 0x3F800000, 0x7FC00000])
    assert same_bits(got, want).tolist() == [True, True, False, True, False]
    assert same_bits([0x7F, 0xFF, 0x7E, 0x7C], [0xFF, 0x7F, 0x7F, 0x7D], "fp8_e4m3").tolist() \
        == [True, True, False, False]
    assert same_bits([0x7D, 0x7C], [0xFF, 0x7C], "fp8_e5m2").tolist() == [True, True]
    assert same_bits([0x7FC1], [0xFF81], "bf16").tolist() == [True]


def test_assert_same_names_the_first_mismatch():
    assert_same(np.array([[0x7FC00000, 0]]), np.array([[0xFFC00001, 0]]))
    with pytest.raises(AssertionError, match=r"^C: 2 of 4 differ; first at \(0, 1\): got "
                       r"0x80000000, want 0x00000000$"):
        assert_same(np.array([[1, 0x80000000], [3, 5]]), np.array([[1, 0], [3, 4]]), "C")
    with pytest.raises(AssertionError, match="got 0x7E, want 0x7F"):
        assert_same([0x7E], [0x7F], fmt="fp8_e4m3")
    with pytest.raises(AssertionError, match="shape"):
        assert_same(np.zeros(3, np.uint32), np.zeros(4, np.uint32))


# -------------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("call,error,match", [
    (lambda: product([1], [1], "int8"), ValueError, r"fmt must be one of \['bf16', "),
    (lambda: product([1], [1], "fp16"), ValueError, "fmt must be one of .*, not 'fp16'"),
    (lambda: product([1.0], [1], "bf16"), TypeError, "a_bits must be an integer array"),
    (lambda: fp32_add([1], [0.5]), TypeError, "y_bits must be an integer array"),
    (lambda: gemm([[1, 2]], [[1, 2]], "bf16", 2), ValueError, r"columns \(2\) must match"),
    (lambda: gemm([1, 2], [[1], [2]], "bf16", 2), ValueError, "A_bits must be a non-empty 2-D"),
    (lambda: gemm([[1]], np.zeros((1, 0), int), "bf16", 1), ValueError, "W_bits must be"),
    (lambda: gemm([[1]], [[1]], "bf16", 0), ValueError, "rows must be >= 1, not 0"),
    (lambda: gemm([[1]], [[1]], "bf16", True), TypeError, "rows must be an integer"),
    (lambda: gemm([[1]], [[1]], "bf16", 2.0), TypeError, "rows must be an integer"),
    (lambda: tile_sums([[1]], [[1], [1]], "bf16"), ValueError, "must match"),
    (lambda: activate([1], "bf16", 1), TypeError, "relu must be a bool, not 1"),
    (lambda: activate([1], "int4", False), ValueError, "fmt must be one of"),
    (lambda: activate([1.5], "bf16", False), TypeError, "acc_bits must be an integer"),
    (lambda: relu_fp32(np.array([1.0])), TypeError, "bits must be an integer array"),
    (lambda: same_bits([1], [1], "int8"), ValueError, "fmt must be one of"),
    (lambda: assert_same([1], [1.0]), TypeError, "want must be an integer array"),
])
def test_bad_arguments_raise(call, error, match):
    with pytest.raises(error, match=match):
        call()
