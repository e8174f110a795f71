"""The activation unit against the requantization golden model (``sim.requant``, itself checked
against TFLite Micro): every parameter edge, every lane layout, random stalls, exact timing."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from helpers import assert_rejects

from tpugen.hdl.activation import ActivationUnit, activation_timing
from tpugen.hdl.config import Config
from tpugen.hdl.isa import QUANT_BEATS
from tpugen.sim.amaranth_streams import Sink, Source, run_streams
from tpugen.sim.quant_beats import RawSet, set_beats
from tpugen.sim.requant import INT32_MAX, INT32_MIN, QuantParams

CONFIGS = [
    Config(rows=2, cols=3, quant_sets=2),                                  # all lanes at once
    Config(rows=4, cols=5, act_lanes=2, quant_sets=3),                     # 3 chunks, ragged
    Config(rows=2, cols=4, acc_width=40, act_lanes=1, act_mult="serial", quant_sets=2),
    Config(rows=3, cols=2, acc_width=16, quant_sets=1),                    # narrow accumulators
]


def random_params(rng, cols) -> QuantParams:
    """Parameters from the whole range, edges over-represented."""
    edge_q = [INT32_MIN, INT32_MAX, 0, 1, 1 << 30, -(1 << 30), 3 << 29]
    mult = rng.integers(INT32_MIN, INT32_MAX, cols, endpoint=True)
    mult = np.where(rng.random(cols) < 0.4, rng.choice(edge_q, cols), mult)
    shift = rng.choice([-32, -31, -30, -1, 0, 1, 2, 30, 31] + list(range(-12, 4)), cols)
    bias = np.where(rng.random(cols) < 0.3, rng.choice([INT32_MIN, INT32_MAX, 0, -1], cols),
                    rng.integers(INT32_MIN, INT32_MAX, cols, endpoint=True))
    zp = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    if rng.random() < 0.3:
        lo, hi = -128, 127
    return QuantParams(bias=bias, multiplier=mult, shift=shift, out_zp=zp, act_min=lo,
                       act_max=hi)


def random_acc(rng, config, n) -> np.ndarray:
    aw = config.acc_width
    lo, hi = -(1 << (aw - 1)), (1 << (aw - 1)) - 1
    acc = rng.integers(lo, hi, (n, config.cols), endpoint=True)
    pick = rng.random(acc.shape)
    acc = np.where(pick < 0.1, lo, np.where(pick > 0.9, hi, acc))
    small = rng.integers(-300, 300, acc.shape)
    return np.where((pick > 0.4) & (pick < 0.6), small, acc)


def simulate(config, sets, rows, qsets, *, p_stall=0.0, seed=0, offers=None):
    """Load ``sets`` (QuantParams, one per set) through ``qw``, then run ``rows`` (acc rows)
    with parameter sets ``qsets``. Returns (outputs, input cycles, output cycles); ``offers``
    (a list) gets the cycle each row was first offered in."""
    dut = ActivationUnit(config)
    beats = [{"set": s, "beat": b, "data": row.tolist()}
             for s, p in enumerate(sets) for b, row in enumerate(set_beats(p, config.cols))]
    items = [{"row": r.tolist(), "qset": int(q)} for r, q in zip(rows, qsets, strict=True)]
    result = {}

    async def bench(ctx):
        qw = Source(dut.qw, beats, p_stall=p_stall, seed=seed, stream=0, name="qw")
        cycle = await run_streams(ctx, [qw], [], max_cycles=50 * len(beats) + 100, tail=0)
        src = Source(dut.i, items, p_stall=p_stall, seed=seed, stream=1, name="i")
        snk = Sink(dut.o, len(items), p_stall=p_stall, seed=seed, stream=2, name="o")
        await run_streams(ctx, [src], [snk], start=cycle,
                          max_cycles=200 + 60 * len(items) * dut.cycles_per_row)
        result["out"] = np.array(snk.items, dtype=np.int64).reshape(-1, config.cols)
        result["in"] = src.cycles
        result["offers"] = src.offers
        result["o"] = snk.cycles

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    if offers is not None:
        offers[:] = result["offers"]
    return result["out"], result["in"], result["o"]


def expected(sets, rows, qsets, cols):
    raw = []
    for p in sets:
        r = RawSet.zeros(cols)
        for b, beat in enumerate(set_beats(p, cols)):
            r.write_beat(b, beat)
        raw.append(r)
    return np.array([raw[q].apply(row[None])[0] for row, q in zip(rows, qsets, strict=True)])


def test_rejects_bad_config():
    assert_rejects(lambda: ActivationUnit(None), TypeError, "config must be a Config")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_random_parameters_and_rows_with_stalls(config):
    rng = np.random.default_rng(config.cols * 7 + config.activation_lanes)
    sets = [random_params(rng, config.cols) for _ in range(config.quant_sets)]
    n = 40 if config.act_mult == "parallel" else 10
    rows = random_acc(rng, config, n)
    qsets = rng.integers(0, config.quant_sets, n)
    got, _, _ = simulate(config, sets, rows, qsets, p_stall=0.3, seed=5)
    exp = expected(sets, rows, qsets, config.cols)
    assert np.array_equal(got, exp), f"first mismatch at {np.argwhere(got != exp)[:1].tolist()}"


@pytest.mark.parametrize("mult", ["parallel", "serial"])
def test_tflite_like_parameters(mult):
    """Parameters as TFLite derives them (multipliers > 1 too), every activation's bounds."""
    config = Config(rows=2, cols=4, quant_sets=4).replace(
        act_lanes=2 if mult == "serial" else 0, act_mult=mult)
    rng = np.random.default_rng(9)
    sets = []
    for act in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        s_w = rng.uniform(0.001, 0.05, 4)
        s_w[0] = 5.0 * 0.2 / 0.01          # multiplier 5: a left shift
        sets.append(QuantParams.from_scales(0.01, s_w, 0.2, bias=rng.integers(-999, 999, 4),
                                            out_zp=int(rng.integers(-128, 128)),
                                            activation=act))
    rows = random_acc(rng, config, 24)
    qsets = np.arange(24) % 4
    got, _, _ = simulate(config, sets, rows, qsets)
    assert np.array_equal(got, expected(sets, rows, qsets, config.cols))


@pytest.mark.parametrize("mult", ["parallel", "serial"])
def test_saturating_high_multiply(mult):
    """INT32_MIN * INT32_MIN saturates to INT32_MAX (then shifted right and clamped); by hand:
    (-2**31 + 1) * -2**31 = 2**62 - 2**31 gives h = 2**31 - 1, >> 24 rounds to 128, clamps to
    127; -1 * -2**31 = 2**31 gives h = (2**31 + 2**30) >> 31 = 1 (the serial multiplier's sign
    bit and the high multiply's saturation: each lane its own)."""
    config = Config(rows=1, cols=2, quant_sets=1, act_mult=mult)
    p = QuantParams(bias=0, multiplier=INT32_MIN, shift=[-24, 0], act_min=-128, act_max=127)
    rows = np.array([[INT32_MIN, INT32_MIN], [INT32_MIN + 1, -1]])
    got, _, _ = simulate(config, [p], rows, [0, 0])
    assert got.tolist() == [[127, 127], [127, 1]]
    assert np.array_equal(got, expected([p], rows, [0, 0], 2))
    # A shift by 32: the saturated 2**31 - 1 rounds to 0, 2**31 would round to 1.
    p = QuantParams(bias=0, multiplier=INT32_MIN, shift=[-32, -31], out_zp=5)
    rows = np.array([[INT32_MIN, INT32_MIN]])
    got, _, _ = simulate(config, [p], rows, [0])
    assert got.tolist() == [[5, 6]]
    assert np.array_equal(got, expected([p], rows, [0], 2))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_timing(config):
    """Results every ``cycles_per_row`` cycles; ``latency`` from the first row's transfer to
    its output (the documented ``activation_timing``; the serial unit's depends on the
    shifts, the parallel pipeline's does not)."""
    per_row, latency = activation_timing(config, 0, 5)      # serial: no left, 5 right shifts
    rng = np.random.default_rng(1)
    sets = [QuantParams(multiplier=1 << 30, shift=-5)] * config.quant_sets
    rows = random_acc(rng, config, 6)
    offers = []
    _, ins, outs = simulate(config, sets, rows, [0] * 6, offers=offers)
    assert np.diff(outs).tolist() == [per_row] * 5
    assert outs[0] - offers[0] == latency
    if config.act_mult == "serial":
        left = activation_timing(config, 7, 0)
        _, ins, outs = simulate(config, [QuantParams(multiplier=1 << 30, shift=7)] * 2,
                                rows[:2], [0, 0], offers=offers)
        assert (outs[1] - outs[0], outs[0] - offers[0]) == left
        # The row is taken when its last chunk's accumulators have been read.
        assert ins[0] - offers[0] == (config.cols - 1) * left[0] // config.cols + 4
    if config.act_mult == "parallel":        # rows never wait: every row has the latency
        assert [o - i for i, o in zip(ins, outs, strict=True)] == [latency] * 6


def test_set_beats_round_trip():
    rng = np.random.default_rng(4)
    for _ in range(50):
        p = random_params(rng, 5)
        raw = RawSet.zeros(5)
        beats = set_beats(p, 5)
        assert beats.shape == (QUANT_BEATS, 5) and beats.min() >= -128 and beats.max() <= 127
        for b, beat in enumerate(beats):
            raw.write_beat(b, beat)
        assert raw.bias.tolist() == p.bias.tolist() and raw.mult.tolist() == p.multiplier.tolist()
        assert raw.shift.tolist() == p.shift.tolist()
        assert (raw.zp, raw.lo, raw.hi) == (p.out_zp, p.act_min, p.act_max)
