"""The GEMM compiler on the golden model against NumPy (chains: ``test_chain.py``)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpugen.compiler import compile_gemm
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine
from tpugen.sim.model import wrap
from tpugen.sim.reference import gemm_reference
from tpugen.sim.requant import INT32_MAX, INT32_MIN, QuantParams, requantize

CONFIGS = [
    Config(rows=1, cols=1, weight_fifo_depth=1),
    Config(rows=3, cols=5, weight_fifo_depth=2),
    Config(rows=5, cols=3, acc_width=18),
    Config(rows=4, cols=4),
    Config(rows=8, cols=8, weight_fifo_depth=3),
]
IDS = [c.name for c in CONFIGS]


def numpy_gemm(config, A, B, out="int32", quant=None, in_zp=0):
    """The product the hardware must give: the acc_width-wrapped sums, or TFLite's
    requantization of them with the input zero point subtracted (``in_zp * column sums``, the
    int32 arithmetic of TFLite when acc_width >= 32)."""
    A, B = np.asarray(A, np.int64), np.asarray(B, np.int64)
    acc = wrap(np.matmul(A, B), config.acc_width)
    if out == "int32":
        return acc
    return requantize(acc - in_zp * B.sum(axis=0), quant)


def spread_quant(k, n=None, **kw):
    """Parameters that spread sums of depth ``k`` over int8 (per channel when ``n``)."""
    q = (1 << 30) if n is None else np.full(n, 1 << 30)
    e = -max(0, int(np.ceil(np.log2(max(1, k) * 128 * 128 / 127))) - 2)
    return QuantParams(multiplier=q, shift=e, **kw)


def run(config, compiled):
    r = Machine(config).run(compiled.program)
    assert r.error == isa.Cause.NONE
    assert r.host_in_left == 0
    assert len(r.host_out) == compiled.host_out_beats
    return compiled.decode(r), r


def check_fifo_and_order(config, program):
    """Untaken tiles never exceed the FIFO depth; the program ends with SYNC."""
    untaken = 0
    for step in program:
        f = step.fields
        if f["op"] == isa.Op.READ_WEIGHTS:
            untaken += f["n"]
            assert untaken <= config.weight_fifo_depth
        elif f["op"] == isa.Op.MATMUL and f["flags"] & isa.Flag.NEW_TILE:
            untaken -= 1
            assert untaken >= 0
    assert untaken == 0
    assert program[-1].fields["op"] == isa.Op.SYNC


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 4), (7, 9, 11), (13, 17, 6), (5, 1, 19)])
def test_gemm_int32(config, shape):
    M, K, N = shape
    rng = np.random.default_rng(M * 100 + K * 10 + N)
    A, B = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
    c = compile_gemm(config, A, B)
    got, _ = run(config, c)
    assert got.shape == (M, N) and got.dtype == np.int64
    assert np.array_equal(got, numpy_gemm(config, A, B))
    check_fifo_and_order(config, c.program)


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_gemm_int8(config):
    rng = np.random.default_rng(11)
    A, B = rng.integers(-128, 128, (6, 10)), rng.integers(-128, 128, (10, 12))
    kw = dict(out="int8", quant=QuantParams(bias=rng.integers(-999, 999, 12),
                                             multiplier=rng.integers(1 << 29, 1 << 31, 12),
                                             shift=-10, out_zp=-7, act_min=-7), in_zp=-3)
    c = compile_gemm(config, A, B, **kw)
    got, _ = run(config, c)
    expect = numpy_gemm(config, A, B, **kw)
    assert np.array_equal(got, expect)
    assert np.ptp(expect) > 0        # not saturated into a constant
    check_fifo_and_order(config, c.program)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(CONFIGS + [Config(rows=2, cols=7, ub_rows=24, acc_rows=4,
                                                weight_fifo_depth=4)]),
       M=st.integers(1, 20), K=st.integers(1, 20), N=st.integers(1, 20),
       out=st.sampled_from(["int32", "int8"]), seed=st.integers(0, 2**32 - 1),
       per_channel=st.booleans(), shift=st.integers(-32, 31), zp=st.integers(-128, 127),
       in_zp=st.integers(-128, 127), bounds=st.tuples(st.integers(-128, 127),
                                                      st.integers(-128, 127)),
       lookahead=st.integers(0, 3))
def test_gemm_random(config, M, K, N, out, seed, per_channel, shift, zp, in_zp, bounds,
                     lookahead):
    rng = np.random.default_rng(seed)
    A, B = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
    n = N if per_channel else None
    quant = QuantParams(bias=rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True),
                        multiplier=rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True),
                        shift=rng.integers(-32, 32, n) if per_channel else shift,
                        out_zp=zp, act_min=min(bounds), act_max=max(bounds))
    kw = dict(out="int32") if out == "int32" else dict(out="int8", quant=quant, in_zp=in_zp)
    lookahead = min(lookahead, config.weight_fifo_depth - 1)
    c = compile_gemm(config, A, B, weight_lookahead=lookahead, **kw)
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B, **kw))
    assert np.array_equal(got, gemm_reference(config, A, B, **kw))
    check_fifo_and_order(config, c.program)


def test_all_minus_128_and_wrap_at_18_bits():
    config = Config(rows=4, cols=4, acc_width=18)
    A = np.full((3, 9), -128, dtype=np.int8)
    B = np.full((9, 5), -128, dtype=np.int8)
    got, _ = run(config, compile_gemm(config, A, B))
    exact = 9 * 128 * 128                       # 147456 > 2**17: wraps
    assert (got == exact - (1 << 18)).all()
    c32 = Config(rows=4, cols=4)
    got, _ = run(c32, compile_gemm(c32, A, B))
    assert (got == exact).all()


def test_many_k_tiles_with_m_1():
    config = Config(rows=4, cols=3, acc_width=20, weight_fifo_depth=4)
    rng = np.random.default_rng(3)
    K = 4 * 60 + 1                                # 61 k-tiles
    A = rng.integers(-128, 128, (1, K))
    A[0, :200] = -128
    B = rng.integers(-128, 128, (K, 5))
    B[:200] = -128
    c = compile_gemm(config, A, B, weight_lookahead=3)
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B))
    assert c.plan["kt"] == 61
    check_fifo_and_order(config, c.program)


@pytest.mark.parametrize("kw", [
    dict(multiplier=1 << 30, shift=1),                       # x * 1: saturates both ways
    dict(multiplier=INT32_MIN, shift=-31), dict(multiplier=INT32_MAX, shift=31),
    dict(multiplier=1 << 30, shift=-3, out_zp=127), dict(multiplier=1 << 30, shift=0,
                                                         act_min=0, act_max=6),
    dict(multiplier=-(1 << 30), shift=-4, out_zp=-128), dict(multiplier=0),
    dict(bias=INT32_MAX, multiplier=1 << 30, shift=-30),      # acc + bias wraps at 32 bits
])
def test_int8_quant_corners(kw):
    config = Config(rows=3, cols=5)
    A = np.array([[1, 2, 3, -1], [-3, -128, 127, 0], [127, 127, 127, 127]])
    B = np.array([[1, -1, 3, 5, 7, -128], [1, 1, 1, 1, 1, 1], [0, 2, -2, 1, 0, 127],
                  [3, 0, 0, -5, 1, -128]])
    for in_zp in (0, -128, 127):
        c = compile_gemm(config, A, B, out="int8", quant=QuantParams(**kw), in_zp=in_zp)
        got, _ = run(config, c)
        assert np.array_equal(got, numpy_gemm(config, A, B, "int8", QuantParams(**kw), in_zp))


def test_ties_round_half_away_from_zero():
    """x * 2**-1 (multiplier 0.5 as 2**30 with shift 0, then a right shift of 1): the high
    multiply rounds half up, the right shift half away from zero."""
    config = Config(rows=2, cols=2)
    A = np.array([[1], [-1], [3], [-3], [2], [-2]])
    B = np.array([[1]])
    got, _ = run(config, compile_gemm(config, A, B, out="int8",
                                      quant=QuantParams(multiplier=1 << 30, shift=0)))
    assert got[:, 0].tolist() == [1, 0, 2, -1, 1, -1]
    # 2x * 0.5 by the high multiply is exact for even 2x (h = x), then / 2 by the shift:
    # +-0.5 and +-1.5 are ties.
    got, _ = run(config, compile_gemm(config, A * 2, B, out="int8",
                                      quant=QuantParams(multiplier=1 << 30, shift=-1)))
    assert got[:, 0].tolist() == [1, -1, 2, -2, 1, -1]


def test_small_buffers_block_m_and_double_buffer():
    config = Config(rows=4, cols=4, ub_rows=20, acc_rows=6)
    rng = np.random.default_rng(4)
    A, B = rng.integers(-128, 128, (23, 9)), rng.integers(-128, 128, (9, 10))
    for out in ("int32", "int8"):
        kw = dict(out=out) if out == "int32" else dict(out=out, quant=spread_quant(9))
        c = compile_gemm(config, A, B, **kw)
        got, _ = run(config, c)
        assert np.array_equal(got, numpy_gemm(config, A, B, **kw))
        assert c.plan["slots"] >= 2 and c.plan["mb"] < 23
        assert c.plan["ub_rows_used"] <= 20 and c.plan["acc_rows_used"] <= 6


def test_one_buffer_row_each():
    """int32 needs one UB and one ACC row; int8 one more UB row to stage in."""
    rng = np.random.default_rng(5)
    A, B = rng.integers(-128, 128, (5, 7)), rng.integers(-128, 128, (7, 9))
    config = Config(rows=3, cols=5, ub_rows=1, acc_rows=1)
    c = compile_gemm(config, A, B)
    assert (c.plan["mb"], c.plan["slots"], c.plan["kb"]) == (1, 1, 1)
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B))
    config = Config(rows=3, cols=5, ub_rows=2, acc_rows=1)
    c = compile_gemm(config, A, B, out="int8", quant=spread_quant(7))
    assert c.plan["ub_rows_used"] == 2
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B, "int8", spread_quant(7)))


def test_int8_needs_two_ub_rows():
    config = Config(rows=2, cols=2, ub_rows=1, acc_rows=4)
    with pytest.raises(ValueError, match="config.ub_rows is 1"):
        compile_gemm(config, np.zeros((1, 7), int), np.zeros((7, 2), int), out="int8",
                     quant=QuantParams())


def test_40x5000x9_on_4x4_default_buffers():
    """The operands do not fit (A alone needs 1250 k-tiles x 40 rows): A streams through the
    unified buffer in k-blocks, once."""
    config = Config(rows=4, cols=4)
    rng = np.random.default_rng(12)
    A, B = rng.integers(-128, 128, (40, 5000)), rng.integers(-128, 128, (5000, 9))
    c = compile_gemm(config, A, B)
    assert c.plan["kb"] < c.plan["kt"] == 1250
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B))
    assert c.plan["ub_rows_used"] <= config.ub_rows and c.plan["acc_rows_used"] <= 512
    read = sum(s.fields["n"] for s in c.program if s.fields["op"] == isa.Op.READ_HOST)
    assert read == 40 * 1250                        # A is read once
    quant = QuantParams(bias=rng.integers(-999, 999, 9), multiplier=rng.integers(1 << 29,
                        1 << 31, 9), shift=rng.integers(-20, -14, 9), out_zp=-5)
    c = compile_gemm(config, A, B, out="int8", quant=quant, in_zp=9)
    got, _ = run(config, c)
    expect = numpy_gemm(config, A, B, "int8", quant, 9)
    assert np.array_equal(got, expect) and np.ptp(expect) > 0


def test_40x5000x9_on_verilator():
    """The streamed GEMM on the generated RTL (the compiled Verilator harness; its 4 x 4 build
    is cached under build/, a run takes seconds): exact, int32 and int8, with and without
    stalls; without them, within 2 % of the planner's estimate."""
    from tpugen.backends import get_backend
    config = Config(rows=4, cols=4)
    rng = np.random.default_rng(13)
    A, B = rng.integers(-128, 128, (40, 5000)), rng.integers(-128, 128, (5000, 9))
    quant = QuantParams(bias=rng.integers(-999, 999, 9), multiplier=rng.integers(1 << 29,
                        1 << 31, 9), shift=-17, out_zp=3)
    gemms = [compile_gemm(config, A, B),
             compile_gemm(config, A, B, out="int8", quant=quant, in_zp=-3)]
    expect = [numpy_gemm(config, A, B), numpy_gemm(config, A, B, "int8", quant, -3)]
    backend = get_backend("verilator", config)
    plain = backend.run_many([c.program for c in gemms])
    stalled = backend.run_many([gemms[1].program], stalls=(0.1, 0.2, 0.2), seed=5)
    for c, e, r in zip(gemms + gemms[1:], expect + expect[1:], plain + stalled, strict=True):
        assert not r.mismatches and r.error == 0
        assert np.array_equal(c.decode(r.host_out), e)
    for c, r in zip(gemms, plain, strict=True):
        assert r.cycles <= 1.02 * c.plan["estimate"]


#: Buffers far too small for the operands, square and not.
TINY = [Config(rows=4, cols=4, ub_rows=8, acc_rows=4),
        Config(rows=3, cols=5, ub_rows=8, acc_rows=4, weight_fifo_depth=2),
        Config(rows=8, cols=2, ub_rows=8, acc_rows=4, acc_width=20),
        Config(rows=2, cols=7, ub_rows=9, acc_rows=5, quant_sets=2),
        Config(rows=5, cols=3, ub_rows=3, acc_rows=2, weight_fifo_depth=1)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(TINY), M=st.integers(1, 40), K=st.integers(1, 70),
       N=st.integers(1, 30), out=st.sampled_from(["int32", "int8"]),
       seed=st.integers(0, 2**32 - 1), in_zp=st.integers(-128, 127))
def test_streamed_random(config, M, K, N, out, seed, in_zp):
    """Shapes many times the buffers: exact on the golden model; rows and tiles in range."""
    rng = np.random.default_rng(seed)
    A, B = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
    quant = QuantParams(bias=rng.integers(-9999, 9999, N),
                        multiplier=rng.integers(1 << 29, 1 << 31, N),
                        shift=rng.integers(-20, -8, N), out_zp=int(rng.integers(-128, 128)))
    kw = dict(out="int32") if out == "int32" else dict(out="int8", quant=quant, in_zp=in_zp)
    c = compile_gemm(config, A, B, **kw)
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B, **kw))
    assert c.plan["ub_rows_used"] <= config.ub_rows
    assert c.plan["acc_rows_used"] <= config.acc_rows
    check_fifo_and_order(config, c.program)


@pytest.mark.parametrize("config, shape, blocked", [
    (Config(rows=4, cols=4, ub_rows=64, acc_rows=16), (16, 100, 40), "k"),   # kb < kt
    (Config(rows=3, cols=5, ub_rows=12, acc_rows=9), (30, 9, 26), "m"),      # many m-blocks
    (Config(rows=2, cols=2, ub_rows=40, acc_rows=64), (7, 200, 9), "k"),
])
def test_blocking(config, shape, blocked):
    M, K, N = shape
    rng = np.random.default_rng(sum(shape))
    A, B = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
    c = compile_gemm(config, A, B)
    if blocked == "k":
        assert c.plan["kb"] < c.plan["kt"]
    else:
        assert c.plan["mb"] < M
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B))


def test_256_cubed_plan_on_16x16_default_buffers():
    """The plan the README's cycle count comes from: whole-M row blocks (256 MATMULs of 256
    rows), two ACC slots for two n-tiles at a time, A double-buffered two k-tiles at a time."""
    config = Config(rows=16, cols=16)
    rng = np.random.default_rng(0)
    A, B = rng.integers(-128, 128, (256, 256)), rng.integers(-128, 128, (256, 256))
    c = compile_gemm(config, A, B)
    assert (c.plan["mb"], c.plan["slots"], c.plan["nb"], c.plan["kb"], c.plan["abuf"]) == \
        (256, 2, 2, 2, 2)
    assert c.plan["matmuls"] == [256]
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B))


@pytest.mark.parametrize("args, kw, match", [
    ((np.zeros((2, 3)), np.zeros((3, 2), int)), {}, "A must be an integer"),
    ((np.zeros((2, 3), int), np.zeros((3, 2), bool)), {}, "B must be an integer"),
    ((np.zeros((2, 3, 1), int), np.zeros((3, 2), int)), {}, "A must be a 2-D"),
    ((np.zeros((0, 3), int), np.zeros((3, 2), int)), {}, "A must have at least one"),
    ((np.zeros((2, 3), int), np.zeros((4, 2), int)), {}, "A's columns must equal B's rows"),
    ((np.full((2, 3), 128), np.zeros((3, 2), int)), {}, "A values must be in -128..127"),
    ((np.zeros((2, 3), int), np.full((3, 2), -129)), {}, "B values must be"),
    ((np.zeros((2, 3), int), np.zeros((3, 2), int)), dict(out="int16"), "out must be"),
    ((np.zeros((2, 3), int), np.zeros((3, 2), int)), dict(out="fp32"),
     "out='fp32' needs a float operand type"),
    ((np.zeros((2, 3), int), np.zeros((3, 2), int)), dict(quant=QuantParams()),
     "apply to out='int8' only"),
    ((np.zeros((2, 3), int), np.zeros((3, 2), int)), dict(in_zp=3), "apply to out='int8' only"),
    ((np.zeros((2, 3), int), np.zeros((3, 2), int)),
     dict(out="int8", quant=QuantParams(bias=[1, 2, 3])), "3 channels, but the layer has 2"),
    ((np.zeros((2, 3), int), np.zeros((3, 2), int)),
     dict(out="int8", quant=QuantParams(), in_zp=200), "in_zp"),
    ((np.zeros((2, 3), int), np.zeros((3, 2), int)), dict(weight_lookahead=4),
     "weight_lookahead"),
])
def test_gemm_validation(args, kw, match):
    with pytest.raises(ValueError, match=match):
        compile_gemm(Config(rows=2, cols=2), *args, **kw)


def test_int8_needs_quant_params():
    with pytest.raises(TypeError, match="quant must be QuantParams for out='int8', not None"):
        compile_gemm(Config(rows=2, cols=2), np.zeros((2, 3), int), np.zeros((3, 2), int),
                     out="int8")


def test_instruction_order_overlaps():
    """READ_WEIGHTS runs ahead of its MATMUL; an n-tile's ACTIVATE comes after the MATMUL
    that follows its last one, and its WRITE_HOST after the MATMUL after that (they run while
    the array computes), but for the last n-tile; all parameter sets load up front."""
    config = Config(rows=4, cols=4, weight_fifo_depth=4)
    rng = np.random.default_rng(6)
    A, B = rng.integers(-128, 128, (6, 12)), rng.integers(-128, 128, (12, 16))
    c = compile_gemm(config, A, B, out="int8", quant=spread_quant(12, 16))
    ops = [s.fields for s in c.program]
    names = [isa.Op(f["op"]).name for f in ops]
    mm = [i for i, n in enumerate(names) if n == "MATMUL"]
    assert len(mm) == 3 * 4
    for j, i in enumerate(mm):
        requested = sum(f["n"] for f in ops[:i] if f["op"] == isa.Op.READ_WEIGHTS)
        assert requested >= min(j + 2, 12)          # tile j+1 requested before MATMUL j
    acts = [i for i, n in enumerate(names) if n == "ACTIVATE"]
    writes = [i for i, n in enumerate(names) if n == "WRITE_HOST"]
    assert len(acts) == len(writes) == 4
    for a, w in zip(acts, writes, strict=True):
        src = ops[a]["src"]
        last = max(i for i in mm if i < a and ops[i]["dst"] == src)
        later = [i for i in mm if i > last]
        if later:
            assert later[0] < a and (len(later) < 2 or later[1] < w)
        assert a < w and ops[w]["src"] == ops[a]["dst"]
    # Four n-tiles, four parameter sets: all loaded up front, one set per n-tile.
    assert names.count("READ_QUANT") == 1 and names[0] == "READ_QUANT" and ops[0]["n"] == 4
    assert sorted(ops[i]["flags"] for i in acts) == [0, 1, 2, 3]
    assert names[-1] == "SYNC"
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B, "int8", spread_quant(12, 16)))


def test_more_n_tiles_than_parameter_sets():
    """Each n-tile's parameters are loaded right before its ACTIVATE, into the sets in turn."""
    config = Config(rows=2, cols=2, quant_sets=2)
    rng = np.random.default_rng(9)
    A, B = rng.integers(-128, 128, (5, 3)), rng.integers(-128, 128, (3, 9))
    quant = QuantParams(bias=rng.integers(-99, 99, 9), multiplier=rng.integers(1 << 29, 1 << 30,
                                                                               9), shift=-6)
    c = compile_gemm(config, A, B, out="int8", quant=quant, in_zp=5)
    names = [isa.Op(s.fields["op"]).name for s in c.program]
    assert names.count("READ_QUANT") == 5                    # ceil(9 / 2) n-tiles
    got, _ = run(config, c)
    assert np.array_equal(got, numpy_gemm(config, A, B, "int8", quant, 5))


def test_decode_checks_the_stream():
    config = Config(rows=2, cols=3)
    c = compile_gemm(config, np.ones((2, 2), int), np.ones((2, 3), int))
    r = Machine(config).run(c.program)
    assert c.decode(r.host_out).tolist() == [[2, 2, 2], [2, 2, 2]]
    with pytest.raises(ValueError, match="expected 3 host-out beats"):
        c.decode(r.host_out[:-1])
    bad = r.host_out.copy()
    bad[-1, 0] = 0
    with pytest.raises(ValueError, match="not a SYNC marker"):
        c.decode(bad)
    bad = r.host_out.copy()
    bad[-1, 1] = isa.Cause.NO_TILE
    with pytest.raises(ValueError, match="NO_TILE"):
        c.decode(bad)
    with pytest.raises(ValueError, match="shape"):
        c.decode(np.zeros((3, 2)))
