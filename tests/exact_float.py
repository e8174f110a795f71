"""An exact reference of the float formats and of the float datapath, for the tests: values as
``fractions.Fraction`` decoded from the bit fields by formula, rounding written from IEEE 754's
definition (nearest, ties to even, with an unbounded exponent, then overflow), one scalar at a
time. Independent of ``sim.formats`` and ``sim.float_golden`` (and of NumPy and ml_dtypes).

A value is ``(sign, magnitude)``: sign 0 or 1, magnitude a Fraction, ``INF`` or ``NAN``.
"""

from fractions import Fraction

INF, NAN = "inf", "nan"

#: name: (exponent bits, mantissa bits, bias, specials) -- IEEE 754 binary32 and bfloat16,
#: OCP E4M3FN ("fn": no infinities, only S.1111.111 is NaN) and E5M2.
FORMATS = {
    "fp32": (8, 23, 127, "ieee"),
    "bf16": (8, 7, 127, "ieee"),
    "fp8_e4m3": (4, 3, 7, "fn"),
    "fp8_e5m2": (5, 2, 15, "ieee"),
}
MIN_NORMAL = Fraction(1, 2 ** 126)
FP32_INF = 0x7F800000
FP32_NAN = 0x7FC00000


def pow2(e: int) -> Fraction:
    return Fraction(2) ** e


def value(bits: int, fmt: str):
    """(sign, magnitude) of an encoding."""
    eb, mb, bias, specials = FORMATS[fmt]
    bits = int(bits)
    sign = (bits >> (eb + mb)) & 1
    e = (bits >> mb) & ((1 << eb) - 1)
    f = bits & ((1 << mb) - 1)
    if e == (1 << eb) - 1:
        if specials == "ieee":
            return sign, INF if f == 0 else NAN
        if f == (1 << mb) - 1:
            return sign, NAN
    if e == 0:
        return sign, Fraction(f, 1 << mb) * pow2(1 - bias)
    return sign, Fraction((1 << mb) + f, 1 << mb) * pow2(e - bias)


def is_nan(bits: int, fmt: str) -> bool:
    return value(bits, fmt)[1] == NAN


def max_finite(fmt: str) -> Fraction:
    eb, mb, bias, specials = FORMATS[fmt]
    if specials == "ieee":
        return (2 - pow2(-mb)) * pow2((1 << eb) - 2 - bias)
    return (2 - pow2(1 - mb)) * pow2((1 << eb) - 1 - bias)


def round_bits(sign: int, mag, fmt: str, saturate: bool = False) -> int:
    """The encoding of ``(sign, mag)`` rounded to nearest, ties to even (subnormals kept);
    beyond the largest finite value: +-max if ``saturate``, else +-inf. NaN: a quiet NaN."""
    eb, mb, bias, specials = FORMATS[fmt]
    s = sign << (eb + mb)
    top = (1 << eb) - 1
    inf = top << mb
    if mag == NAN:
        return s | inf | ((1 << mb) - 1 if specials == "fn" else 1 << (mb - 1))
    if saturate:
        ones = (1 << mb) - 1                       # the largest finite encoding:
        big = (top << mb | (ones - 1)) if specials == "fn" else ((top - 1) << mb | ones)
    else:
        assert specials == "ieee", "E4M3FN has no infinity: conversions to it saturate"
        big = inf
    if mag == INF:
        return s | big
    if mag == 0:
        return s
    e = mag.numerator.bit_length() - mag.denominator.bit_length()   # 2**e <= mag < 2**(e+1)
    if pow2(e) > mag:
        e -= 1
    assert pow2(e) <= mag < pow2(e + 1)
    e = max(e, 1 - bias)                           # subnormals share the smallest exponent
    q = pow2(e - mb)                               # one unit in the last place
    n, rem = divmod(mag, q)
    if 2 * rem > q or (2 * rem == q and n % 2 == 1):
        n += 1
    if n * q > max_finite(fmt):
        return s | big
    if n == 1 << (mb + 1):                         # rounded up to the next binade
        n, e = n // 2, e + 1
    if n < 1 << mb:                                # subnormal
        return s | n
    return s | ((e + bias) << mb) | (n - (1 << mb))


def _finite(mag) -> bool:
    return mag not in (INF, NAN)


def _flush(sign: int, mag):
    return (sign, Fraction(0)) if _finite(mag) and mag < MIN_NORMAL else (sign, mag)


def product(a: int, w: int, fmt: str) -> int:
    """binary32 bits of the datapath's product of two operand encodings."""
    (sa, ma), (sw, mw) = value(a, fmt), value(w, fmt)
    if fmt == "bf16":                              # bf16 subnormal inputs read as zero
        (sa, ma), (sw, mw) = _flush(sa, ma), _flush(sw, mw)
    s = sa ^ sw
    if NAN in (ma, mw) or (INF in (ma, mw) and 0 in (ma, mw)):
        return FP32_NAN
    if INF in (ma, mw):
        return s << 31 | FP32_INF
    p = ma * mw
    if p < MIN_NORMAL:
        return s << 31
    if p >= pow2(128):
        return s << 31 | FP32_INF
    bits = round_bits(s, p, "fp32")
    assert value(bits, "fp32") == (s, p), "products are exact in binary32"
    return bits


def add(x: int, y: int) -> int:
    """binary32 bits of the datapath's sum of two binary32 encodings."""
    (sx, mx), (sy, my) = _flush(*value(x, "fp32")), _flush(*value(y, "fp32"))
    if NAN in (mx, my) or (mx == my == INF and sx != sy):
        return FP32_NAN
    if INF in (mx, my):
        return (sx if mx == INF else sy) << 31 | FP32_INF
    v = (-1) ** sx * mx + (-1) ** sy * my
    if v == 0:                                     # IEEE: -0 only for -0 + -0
        return (sx & sy) << 31 if mx == my == 0 else 0
    sign = int(v < 0)
    bits = round_bits(sign, abs(v), "fp32")
    mag = value(bits, "fp32")[1]
    return sign << 31 if _finite(mag) and mag < MIN_NORMAL else bits


def gemm(A, W, fmt: str, rows: int):
    """C = A @ W (lists of lists of operand encodings) in the array's order: list of lists of
    binary32 bits."""
    K = len(W)
    out = []
    for i in range(len(A)):
        line = []
        for j in range(len(W[0])):
            acc = None
            for t in range(0, K, rows):
                s = 0
                for k in range(t, t + rows):
                    p = product(A[i][k], W[k][j], fmt) if k < K else product(0, 0, fmt)
                    s = add(s, p)
                acc = s if acc is None else add(acc, s)
            line.append(acc)
        out.append(line)
    return out


def activate(bits: int, fmt: str, relu: bool) -> int:
    """Operand encoding of a binary32 accumulator value: optional ReLU, flush of inputs below
    2**-126, rounding (fp8 saturating)."""
    s, m = value(bits, "fp32")
    if relu and m != NAN and (s == 1 or m == 0):
        s, m = 0, Fraction(0)
    s, m = _flush(s, m)
    return round_bits(s, m, fmt, saturate=fmt.startswith("fp8"))


def same(got: int, want: int, fmt: str = "fp32") -> bool:
    """Bit for bit, or both NaN."""
    return got == want or (is_nan(got, fmt) and is_nan(want, fmt))
