"""The activation unit against the NumPy requantization model, and that model against Python
ints."""

import itertools
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from helpers import assert_rejects

from tpugen.hdl.activation import ActivationUnit
from tpugen.hdl.config import Config
from tpugen.sim.requant import legacy_requantize as requantize
from tpugen.sim.streams import Sink, Source, run_streams

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def requantize_py(acc: int, mult: int, shift: int, zp: int, relu: int) -> int:
    """Independent scalar reference with Python big ints and an explicit mod 2**64."""
    r = 2 ** (shift - 1) if shift > 0 else 0
    t = (acc * mult + r) % 2 ** 64
    if t >= 2 ** 63:
        t -= 2 ** 64
    y = t // 2 ** shift                        # floor division == arithmetic shift
    lo = zp if relu else -128
    return max(lo, min(127, y + zp))


def acc_edges(width: int) -> list[int]:
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return [lo, lo + 1, -1, 0, 1, hi - 1, hi, 127, -128, 128, -129, 1 << 30, -(1 << 30)]


def edge_params() -> list[tuple[int, int, int, int]]:
    """(mult, shift, zp, relu) sets covering the corners of every field."""
    ps = []
    for mult, shift, zp, relu in itertools.product(
            [INT32_MIN, INT32_MAX, 1, -1, 0, 3], [0, 1, 2, 31, 62, 63], [-128, 0, 127, 5],
            [0, 1]):
        ps.append((mult, shift, zp, relu))
    return ps


def random_params(rng: random.Random):
    return (rng.randint(INT32_MIN, INT32_MAX), rng.randint(0, 63), rng.randint(-128, 127),
            rng.randint(0, 1))


# -- the NumPy model against the Python-int model ---------------------------------------------


def test_numpy_model_matches_python_ints():
    rng = random.Random(1)
    accs = acc_edges(64) + acc_edges(32) + acc_edges(18)
    accs += [rng.randint(-(1 << 63), (1 << 63) - 1) for _ in range(60)]
    accs += [rng.randint(-(1 << 17), (1 << 17) - 1) for _ in range(30)]
    params = edge_params() + [random_params(rng) for _ in range(300)]
    a = np.array(accs, dtype=np.int64)
    for mult, shift, zp, relu in params:
        got = requantize(a, mult, shift, zp, relu)
        want = [requantize_py(x, mult, shift, zp, relu) for x in accs]
        assert got.dtype == np.int64
        assert got.tolist() == want, (mult, shift, zp, relu)


def test_numpy_model_rounding_and_clamp_by_hand():
    # Ties round toward +infinity: 5/2 = 2.5 -> 3, -5/2 = -2.5 -> -2, -7/4 = -1.75 -> -2.
    assert requantize([5, -5, -7, 7, -6], 1, 1, 0, 0).tolist() == [3, -2, -3, 4, -3]
    assert requantize([-7, 6, -6], 1, 2, 0, 0).tolist() == [-2, 2, -1]
    assert requantize([1000, -1000, 3], 1, 0, 0, 0).tolist() == [127, -128, 3]
    assert requantize([-50, 50], 1, 0, 10, 1).tolist() == [10, 60]          # relu: >= zp
    assert requantize([200], 1, 0, -128, 0).tolist() == [72]
    # 64-bit wrap of the product: (2**62) * 4 = 2**64 -> 0.
    assert requantize([1 << 62], 4, 0, 0, 0).tolist() == [0]
    # the + r wraps too: (2**63 - 1) + 2**62 wraps negative, then >> 63 gives -1.
    assert requantize([(1 << 63) - 1], 1, 63, 0, 0).tolist() == [-1]


@pytest.mark.parametrize("bad, exc", [
    (dict(mult=1 << 31), ValueError), (dict(shift=64), ValueError), (dict(zp=128), ValueError),
    (dict(relu=2), ValueError), (dict(mult=1.0), TypeError), (dict(shift=True), TypeError),
])
def test_numpy_model_rejects_bad_params(bad, exc):
    args = dict(mult=1, shift=0, zp=0, relu=0) | bad
    with pytest.raises(exc, match=next(iter(bad))):
        requantize([0], **args)


# -- the hardware -------------------------------------------------------------------------------


def test_rejects_bad_config():
    assert_rejects(lambda: ActivationUnit(3), TypeError, r"config must be a Config, not 3")


def simulate(config: Config, phases, *, p_stall=0.3, seed=0, check_timing=False):
    """Run each phase ``(params, rows)`` through the unit; return the outputs of each phase."""
    dut = ActivationUnit(config)
    results = []
    timing = {}

    async def bench(ctx):
        cycle = 0
        for k, ((mult, shift, zp, relu), rows) in enumerate(phases):
            # The unit is empty between phases, so the parameters may change here.
            ctx.set(dut.params, {"mult": mult, "shift": shift, "zp": zp, "relu": relu})
            src = Source(dut.i, rows, p_stall=p_stall, seed=seed, stream=2 * k, name="i")
            snk = Sink(dut.o, len(rows), p_stall=p_stall, seed=seed, stream=2 * k + 1,
                       name="o")
            cycle = await run_streams(ctx, [src], [snk], start=cycle,
                                      max_cycles=50 + 20 * len(rows) * dut.cycles_per_row)
            results.append(snk.items)
            timing.setdefault("i", []).append(src.cycles)
            timing.setdefault("o", []).append(snk.cycles)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    if check_timing:
        return results, timing, dut
    return results


def random_rows(rng: np.random.Generator, config: Config, n: int) -> np.ndarray:
    """Rows of full-range accumulator values, with the extremes over-represented."""
    w = config.acc_width
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    rows = rng.integers(lo, hi, size=(n, config.cols), endpoint=True, dtype=np.int64)
    small = rng.integers(-300, 300, size=(n, config.cols), endpoint=True)
    pick = rng.random((n, config.cols))
    rows = np.where(pick < 0.3, small, rows)
    rows = np.where((pick >= 0.3) & (pick < 0.4), lo, rows)
    rows = np.where((pick >= 0.4) & (pick < 0.5), hi, rows)
    return rows


CONFIGS = [
    Config(rows=3, cols=5, acc_width=32),                   # act_lanes == C
    Config(rows=3, cols=5, acc_width=64, act_lanes=2),      # 3 cycles a row, one lane padded
    Config(rows=3, cols=5, acc_width=18, act_lanes=1),
    Config(rows=1, cols=1, acc_width=16),
    Config(rows=2, cols=8, acc_width=32, act_lanes=4),
    # Bit-serial multipliers (34 cycles a chunk), one lane and two.
    Config(rows=3, cols=2, acc_width=32, act_lanes=1, act_mult="serial"),
    Config(rows=2, cols=3, acc_width=64, act_lanes=2, act_mult="serial"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_edges_and_random_with_stalls(config):
    rng = np.random.default_rng(7)
    prng = random.Random(3)
    edges = acc_edges(config.acc_width)
    lo, hi = -(1 << (config.acc_width - 1)), (1 << (config.acc_width - 1)) - 1
    edges = [min(max(e, lo), hi) for e in edges]
    edge_rows = np.resize(np.array(edges, dtype=np.int64), (-(-len(edges) // config.cols) *
                                                            config.cols,)).reshape(-1, config.cols)
    # Corner parameter sets (a sample keeps the run short) plus random ones.
    corner = edge_params()
    params = [p for p in corner if p[0] in (INT32_MIN, INT32_MAX) and p[1] in (0, 1, 63)]
    params += prng.sample(corner, 12) + [random_params(prng) for _ in range(6)]
    # Saturation with the extreme zero points, ReLU on.
    params += [(1, 0, 127, 1), (1, 0, -128, 1), (-1, 0, -128, 1)]
    phases = []
    for p in params:
        rows = np.concatenate([edge_rows, random_rows(rng, config, 3)])
        phases.append((p, rows.tolist()))
    # Exact ties: acc = odd * 2**(shift - 1) and an odd mult put acc * mult exactly halfway
    # between two multiples of 2**shift, positive and negative; they round toward +infinity.
    for mult, shift in ((1, 1), (-1, 1), (1, 2), (-3, 7), (1, 10)):
        odd = 2 * rng.integers(-6, 5, size=(3, config.cols), endpoint=True) + 1
        rows = odd * 2 ** (shift - 1)     # fits in 16 bits
        assert ((rows * mult) % 2 ** shift == 2 ** (shift - 1)).all()
        phases.append(((mult, shift, 0, 0), rows.tolist()))
    results = simulate(config, phases, seed=11)
    for (p, rows), got in zip(phases, results, strict=True):
        want = requantize(np.array(rows), *p).tolist()
        assert got == want, f"params {p}"
        # and against the Python-int model directly
        assert got == [[requantize_py(x, *p) for x in r] for r in rows]


def test_full_throughput_and_latency():
    for config in (Config(rows=3, cols=5), Config(rows=3, cols=5, act_lanes=2),
                   Config(rows=3, cols=5, act_lanes=2, act_mult="serial")):
        rng = np.random.default_rng(5)
        rows = random_rows(rng, config, 20).tolist()
        params = (12345, 20, 3, 0)
        (got,), timing, dut = simulate(config, [(params, rows)], p_stall=0.0, check_timing=True)
        assert got == requantize(np.array(rows), *params).tolist()
        ins, outs = timing["i"][0], timing["o"][0]
        n = dut.cycles_per_row
        k = 34 if config.act_mult == "serial" else 1
        chunks = -(-config.cols // config.act_lanes)
        assert n == k * chunks
        # The second row is taken when the first one's last chunk issues (chunks start at
        # cycle 1, then every k cycles), every later one n cycles after the one before.
        assert np.diff(ins).tolist() == [1 + k * (chunks - 1)] + [n] * (len(rows) - 2)
        assert np.diff(outs).tolist() == [n] * (len(rows) - 1)
        assert outs[0] - ins[0] == dut.latency == n + (4 if config.act_mult == "serial" else 5)


# -- corners of the narrow datapath: every shift, rounding boundaries, saturation, 64-bit wrap ---


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def wrap64(x: int) -> int:
    return (x + (1 << 63)) % (1 << 64) - (1 << 63)


def corner_products(shift: int, zp: int) -> list[int]:
    """64-bit products around every rounding boundary of the results that matter at ``shift``
    (the int8 range, the clamp thresholds with and without ``zp``, the 9-bit window the
    hardware keeps, the extremes) and around +-2**63, where ``p + r`` wraps."""
    half = 1 << (shift - 1) if shift else 0
    ys = {-257, -256, -255, -130, -129, -128, -127, -2, -1, 0, 1, 2, 126, 127, 128, 129,
          254, 255, 256, 257, 511, 512, -512, -513, 127 - zp, 128 - zp, -128 - zp, -129 - zp,
          -(1 << (63 - shift)), (1 << (63 - shift)) - 1}
    ps = {INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, 1 << 62, -(1 << 62)}
    for y in ys:
        base = y << shift
        # y's interval under round-half-up is [base - half, base + half - 1] (shift >= 1)
        for d in (-half - 1, -half, -half + 1, half - 2, half - 1, half, 0, 1, -1):
            ps.add(wrap64(base + d))
    for d in (-2, -1, 0, 1):
        ps.add(wrap64(INT64_MAX - half + 1 + d))     # p + r wraps from here up
        ps.add(wrap64(INT64_MIN + half + d))
    return sorted(ps)


def corner_phases(config: Config, shifts, combos):
    """Phases ``((mult, shift, zp, relu), rows)`` with ``mult = 1`` (the product is the
    accumulator) for a 64-bit accumulator; rows padded with zeros to whole rows."""
    assert config.acc_width == 64
    phases = []
    for shift in shifts:
        for zp, relu in combos:
            ps = corner_products(shift, zp)
            ps += [0] * (-len(ps) % config.cols)
            rows = np.array(ps, dtype=np.int64).reshape(-1, config.cols).tolist()
            phases.append(((1, shift, zp, relu), rows))
    return phases


def check_phases(config: Config, phases, *, p_stall=0.1, seed=0):
    results = simulate(config, phases, p_stall=p_stall, seed=seed)
    for (params, rows), got in zip(phases, results, strict=True):
        want = requantize(np.array(rows, dtype=np.int64), *params).tolist()
        assert got == want, f"params {params}: " + ", ".join(
            f"acc {a} -> {g} (want {w})" for r, gr, wr in zip(rows, got, want, strict=True)
            for a, g, w in zip(r, gr, wr, strict=True) if g != w)[:2000]


def test_corner_products_are_corners():
    # each shift's set saturates both ways (where a 64-bit product can), holds exact ties
    # and products for which p + r wraps past 2**63.
    for shift in (0, 1, 7, 31, 54, 55, 56, 62, 63):
        ps = corner_products(shift, 0)
        q = requantize(np.array(ps, dtype=np.int64), 1, shift, 0, 0).tolist()
        assert {0, -1}.issubset(q), shift
        if shift <= 55:
            assert {-128, 127}.issubset(q), shift
        if shift:
            half = 1 << (shift - 1)
            assert any(p % (2 * half) == half for p in ps), shift
            assert any(p >= INT64_MAX - half + 1 for p in ps), shift


def test_every_shift_at_the_boundaries():
    """Every shift 0..63, products at and around the rounding boundaries of every result that
    matters, saturation by exactly one after the zero point, ReLU with positive and negative
    zero points, and the wrap of ``p + r`` near 2**63; one row per cycle (act_lanes == C)."""
    config = Config(rows=1, cols=8, acc_width=64)
    combos = [(0, 0), (-128, 0), (127, 0), (-5, 1), (9, 1)]
    phases = []
    for shift in range(64):
        phases += corner_phases(config, [shift], [combos[shift % 5], combos[(shift + 2) % 5]])
    check_phases(config, phases)


@pytest.mark.parametrize("config", [
    Config(rows=1, cols=3, acc_width=64, act_lanes=1),
    Config(rows=2, cols=5, acc_width=64, act_lanes=2),
], ids=lambda c: c.name)
def test_boundaries_with_fewer_lanes(config):
    shifts = [0, 1, 2, 8, 9, 23, 32, 47, 54, 55, 56, 61, 62, 63]
    phases = corner_phases(config, shifts, [(3, 0), (-100, 1)])
    check_phases(config, phases, p_stall=0.3, seed=5)


def test_serial_multipliers_at_the_boundaries():
    """The bit-serial multipliers (``act_mult="serial"``) on corner products of a sample of
    shifts, with stalls: the same results as the parallel unit and the model."""
    config = Config(rows=1, cols=2, acc_width=64, act_lanes=1, act_mult="serial")
    phases = corner_phases(config, [0, 1, 31, 55, 62, 63], [(3, 0), (-100, 1)])
    check_phases(config, phases, p_stall=0.3, seed=8)


def test_extreme_multipliers_and_accumulators():
    """mult = -2**31 with acc = -2**31 (product 2**62: at shift 63, p + r wraps to -2**63),
    products that wrap modulo 2**64, random full-range values, random parameters."""
    rng = np.random.default_rng(21)
    prng = random.Random(21)
    phases = []
    for config in (Config(rows=2, cols=4, acc_width=32), Config(rows=2, cols=4, acc_width=64),
                   Config(rows=2, cols=4, acc_width=32, act_lanes=2, act_mult="serial")):
        w = config.acc_width
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        edges = [lo, lo + 1, hi, hi - 1, -1, 1, INT32_MIN, INT32_MAX, 1 << 31, -(1 << 32)]
        edges = [min(max(e, lo), hi) for e in edges] + [0] * 2
        edge_rows = np.array(edges, dtype=np.int64).reshape(-1, 4)
        phases = []
        for mult in (INT32_MIN, INT32_MIN + 1, INT32_MAX, -1, 3):
            for shift in (0, 1, 30, 31, 32, 61, 62, 63):
                zp, relu = prng.choice([(0, 0), (-128, 1), (127, 0), (-3, 1)])
                rows = np.concatenate([edge_rows, random_rows(rng, config, 2)])
                phases.append(((mult, shift, zp, relu), rows.tolist()))
        for _ in range(40):
            rows = rng.integers(lo, hi, size=(2, 4), endpoint=True, dtype=np.int64)
            phases.append((random_params(prng), rows.tolist()))
        check_phases(config, phases, p_stall=0.2, seed=9)
