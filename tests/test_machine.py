"""The golden model of the core against NumPy and the ISA's rules, including every error."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine, ProgramHang
from tpugen.sim.program import Program
from tpugen.sim.requant import QuantParams, requantize

CONFIGS = [
    Config(rows=1, cols=1, ub_rows=16, acc_rows=8, weight_fifo_depth=1),
    Config(rows=3, cols=5, ub_rows=16, acc_rows=8, weight_fifo_depth=2),
    Config(rows=5, cols=3, ub_rows=16, acc_rows=8, acc_width=16),
    Config(rows=4, cols=4, ub_rows=16, acc_rows=8, acc_width=18),
    Config(rows=8, cols=8, ub_rows=16, acc_rows=8, acc_width=64, weight_fifo_depth=3),
]
IDS = [c.name for c in CONFIGS]


def ref_wrap(x, bits):
    """Two's-complement wrap with Python integers (independent of ``sim.model.wrap``)."""
    m = 1 << bits
    return np.array([[((int(v) + m // 2) % m) - m // 2 for v in row] for row in x],
                    dtype=np.int64).reshape(np.shape(x))


def i8(rng, *shape):
    return rng.integers(-128, 128, shape)


# --- random valid programs against a NumPy shadow ---------------------------------------------
@st.composite
def programs(draw):
    config = draw(st.sampled_from(CONFIGS))
    R, C = config.rows, config.cols
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = Program(config)
    ub = np.zeros((config.ub_rows, R), dtype=np.int64)
    acc = np.zeros((config.acc_rows, C), dtype=np.int64)
    fifo, tile, out = [], None, []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["host", "weights", "matmul", "matmul", "write"]))
        if kind == "host":
            n = draw(st.integers(1, 4))
            dst = draw(st.integers(0, config.ub_rows - n))
            rows = i8(rng, n, R)
            if draw(st.booleans()):
                rows[:] = draw(st.sampled_from([-128, 127]))
            p.read_host(dst, rows)
            ub[dst:dst + n] = rows
        elif kind == "weights" and len(fifo) < config.weight_fifo_depth:
            n = draw(st.integers(1, config.weight_fifo_depth - len(fifo)))
            tiles = i8(rng, n, R, C)
            if draw(st.booleans()):
                tiles[:] = -128
            p.read_weights(tiles)
            fifo.extend(tiles)
        elif kind == "matmul" and (fifo or tile is not None):
            new = bool(fifo) and (tile is None or draw(st.booleans()))
            accumulate = draw(st.booleans())
            n = draw(st.integers(1, 4))
            src = draw(st.integers(0, config.ub_rows - n))
            dst = draw(st.integers(0, config.acc_rows - n))
            p.matmul(src, dst, n, accumulate=accumulate, new_tile=new)
            if new:
                tile = fifo.pop(0)
            y = np.matmul(ub[src:src + n], tile)
            acc[dst:dst + n] = ref_wrap(y + acc[dst:dst + n] if accumulate else y,
                                        config.acc_width)
        elif kind == "write":
            n = draw(st.integers(1, 3))
            src = draw(st.integers(0, config.acc_rows - n))
            p.write_host(src, n, from_acc=True)
            out.append(acc[src:src + n].copy())
    p.sync()
    return config, p, ub, acc, out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_match_numpy(case):
    config, program, ub, acc, out = case
    r = Machine(config).run(program)
    assert r.error == isa.Cause.NONE
    assert np.array_equal(r.ub, ub)
    assert np.array_equal(r.acc, acc)
    data = r.host_out[:-1]
    expect = np.concatenate(out) if out else np.zeros((0, config.cols), dtype=np.int64)
    assert np.array_equal(data, expect)
    ends = np.cumsum([len(o) for o in out]) - 1
    assert np.flatnonzero(r.last[:-1]).tolist() == ends.tolist()
    assert r.last[-1] and r.host_out[-1, 0] == isa.SYNC_MAGIC
    assert r.retired == len(program)
    assert not r.counter_beat.any()


@st.composite
def raw_programs(draw):
    config = draw(st.sampled_from(CONFIGS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = Program(config)
    for _ in range(draw(st.integers(1, 20))):
        op = draw(st.integers(0, 15))
        small = st.integers(0, config.ub_rows + 1)
        word = isa.encode(op, draw(st.integers(0, 15)), src=draw(small), dst=draw(small),
                          n=draw(st.integers(0, 4)), part=draw(st.integers(0, 3)))
        beats = draw(st.integers(0, 3 * config.rows)) if op & isa.HOST_DATA_BIT else 0
        if beats:
            last = rng.random(beats) < 0.2
            last[-1] = draw(st.booleans()) or not last.any()
            p.raw(word, i8(rng, beats, max(config.rows, config.cols)), last=last)
        else:
            p.raw(word)
    return config, p


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_programs())
def test_arbitrary_words_never_crash(case):
    """Any word sequence runs (or hangs for want of host-in data) with a consistent result."""
    config, program = case
    try:
        r = Machine(config).run(program)
    except ProgramHang:
        return
    # no program memory here: every PROGRAM word is dropped, no STORE takes words
    assert config.program_words == 0
    assert r.retired == len(program)
    assert (r.error == isa.Cause.NONE) == (r.error_step is None)
    half = 1 << (config.acc_width - 1)
    assert r.host_out.shape[1] == config.cols
    assert ((r.host_out >= -half) & (r.host_out < half)).all()
    assert len(r.last) == len(r.counter_beat) == len(r.unknown) == len(r.host_out)
    assert not (r.unknown & ~r.counter_beat).any()
    assert ((r.ub >= -128) & (r.ub <= 127)).all()
    assert ((r.acc >= -half) & (r.acc < half)).all()
    assert r.counter_beat.sum() % (4 * isa.N_COUNTERS) == 0


# --- MATMUL -----------------------------------------------------------------------------------
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_matmul_overwrite_accumulate_reuse_and_wrap(config):
    rng = np.random.default_rng(1)
    R, C = config.rows, config.cols
    x, w1, w2 = i8(rng, 4, R), i8(rng, R, C), np.full((R, C), -128)
    x[1] = -128
    p = Program(config).read_host(3, x).read_weights(w1)
    p.matmul(3, 0, 4, new_tile=True)                        # ACC[0:4] = x @ w1
    p.read_weights(w2)
    p.matmul(3, 4, 4, new_tile=False)                       # reuse w1
    p.matmul(3, 4, 4, accumulate=True, new_tile=False)      # ACC[4:8] = 2 x @ w1
    p.matmul(4, 0, 2, accumulate=True, new_tile=True)       # ACC[0:2] += x[1:3] @ w2
    p.write_host(0, 8, from_acc=True)
    r = Machine(config).run(p)
    y1 = np.matmul(x, w1)
    acc = np.concatenate([y1, 2 * y1])
    acc[0:2] += np.matmul(x[1:3], w2)
    acc = ref_wrap(acc, config.acc_width)
    assert r.error == isa.Cause.NONE
    assert np.array_equal(r.acc[:8], acc) and np.array_equal(r.host_out, acc)
    assert r.last.tolist() == [False] * 7 + [True]


def test_accumulation_wraps_at_acc_width():
    config = Config(rows=8, cols=8, acc_width=16, ub_rows=4, acc_rows=2)
    p = Program(config).read_host(0, np.full((1, 8), -128)).read_weights(np.full((8, 8), -128))
    p.matmul(0, 0, 1)
    for _ in range(3):
        p.matmul(0, 0, 1, accumulate=True, new_tile=False)
    r = Machine(config).run(p)
    exact = 4 * 8 * 128 * 128   # 524288 = 8 * 2**16: wraps to 0 at 16 bits
    assert r.acc[0].tolist() == [ref_wrap([[exact]], 16)[0, 0]] * 8 == [0] * 8
    p.matmul(0, 1, 1, new_tile=False)
    r = Machine(config).run(p)
    assert r.acc[1, 0] == ref_wrap([[8 * 128 * 128]], 16)[0, 0] == 0
    # 64-bit accumulators do not wrap here
    c64 = config.replace(acc_width=64)
    r = Machine(c64).run(Program(c64, p.steps))
    assert r.acc[0, 0] == exact


# --- ACTIVATE and WRITE_HOST parts ------------------------------------------------------------
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_activate_parts_and_quant(config):
    rng = np.random.default_rng(2)
    R, C = config.rows, config.cols
    x, w = i8(rng, 3, R), i8(rng, R, C)
    p = Program(config).read_host(0, x).read_weights(w).matmul(0, 0, 3)
    p.activate(0, 3, 3)                                  # the power-up parameters: zeros
    params = QuantParams(bias=rng.integers(-99, 99, C), multiplier=77 << 22, shift=-9,
                         out_zp=-5, act_min=-5)
    p.read_quant(config.quant_sets - 1, params)
    parts = -(-C // R)
    for part in range(parts):
        p.activate(0, 6 + 3 * part, 3, part=part, qset=config.quant_sets - 1)
    r = Machine(config).run(p)
    acc = ref_wrap(np.matmul(x, w), config.acc_width)
    q0 = np.zeros_like(acc)
    q1 = requantize(acc, params)
    assert r.error == isa.Cause.NONE
    width = min(R, C)
    assert np.array_equal(r.ub[3:6, :width], q0[:, :width]) and not r.ub[3:6, width:].any()
    for part in range(parts):
        got = r.ub[6 + 3 * part: 9 + 3 * part]
        lanes = q1[:, part * R:(part + 1) * R]
        assert np.array_equal(got[:, :lanes.shape[1]], lanes)
        assert not got[:, lanes.shape[1]:].any()


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_write_host_from_ub_parts(config):
    rng = np.random.default_rng(3)
    R, C = config.rows, config.cols
    rows = i8(rng, 2, R)
    p = Program(config).read_host(5, rows)
    parts = -(-R // C)
    for part in range(parts):
        p.write_host(5, 2, part=part)
    r = Machine(config).run(p)
    assert r.error == isa.Cause.NONE and len(r.host_out) == 2 * parts
    for part in range(parts):
        beats = r.host_out[2 * part:2 * part + 2]
        lanes = rows[:, part * C:(part + 1) * C]
        assert np.array_equal(beats[:, :lanes.shape[1]], lanes)   # sign-extended int8
        assert not beats[:, lanes.shape[1]:].any()
    assert r.last.tolist() == [False, True] * parts


# --- SYNC and READ_COUNTERS -------------------------------------------------------------------
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_sync_and_counters(config):
    p = Program(config).nop().nop().raw(isa.encode(13), [[1]]).sync().read_counters().sync()
    r = Machine(config).run(p)
    C = config.cols
    n = 4 * isa.N_COUNTERS
    assert r.host_out.shape == (1 + n + 1, C)
    first = [isa.SYNC_MAGIC, isa.Cause.BAD_OPCODE, 3][:C] + [0] * max(0, C - 3)
    assert r.host_out[0].tolist() == first
    assert r.host_out[-1].tolist() == ([isa.SYNC_MAGIC, isa.Cause.BAD_OPCODE, 5][:C]
                                       + [0] * max(0, C - 3))
    assert r.last.tolist() == [True] + [False] * (n - 1) + [True, True]
    assert r.counter_beat.tolist() == [False] + [True] * n + [False]
    k = int(isa.Counter.RETIRED)
    known = np.zeros(n, dtype=bool)
    known[4 * k:4 * k + 4] = True
    assert r.unknown[1:-1].tolist() == (~known).tolist()
    assert r.host_out[1 + 4 * k:1 + 4 * k + 4, 0].tolist() == [4, 0, 0, 0]
    assert not r.host_out[1:-1, 1:].any()
    assert r.retired == 6


def test_sync_retired_wraps_16_bits_and_lanes_are_signed():
    config = Config(rows=2, cols=4, acc_width=16)
    m = Machine(config)
    m.retired = 0xFFFF
    r = m.run(Program(config).sync().sync(), reset=False)
    assert r.host_out[:, 2].tolist() == [-1, 0]     # 0xFFFF in a 16-bit signed lane, then 0
    m.retired = (0x8001 << 48) | 0x1234
    r = m.run(Program(config).read_counters(), reset=False)
    k = int(isa.Counter.RETIRED)
    chunks = r.host_out[4 * k:4 * k + 4, 0]
    assert [v & 0xFFFF for v in chunks] == [0x1234, 0, 0, 0x8001]
    wide = Config(rows=2, cols=4, acc_width=32)
    m = Machine(wide)
    m.retired = 0xFFFF
    assert m.run(Program(wide).sync(), reset=False).host_out[0, 2] == 0xFFFF


def test_reset_false_keeps_state_and_mismatches():
    config = Config(rows=2, cols=2, ub_rows=4, acc_rows=4)
    m = Machine(config)
    m.run(Program(config).read_host(0, [[1, 2]]).read_weights([[1, 0], [0, 1]]))
    r = m.run(Program(config).matmul(0, 0, 1).write_host(0, 1, from_acc=True), reset=False)
    assert r.host_out.tolist() == [[1, 2]] and r.retired == 4
    assert r.mismatches([[1, 2]], [True]) == []
    assert r.mismatches([[1, 3]], [True])[0].startswith("beat 0: expected [1, 2]")
    assert "expected 1 host-out beats, got 0" in r.mismatches(np.zeros((0, 2)))[0]
    assert Machine(config).run(Program(config).matmul(0, 0, 1)).error == isa.Cause.NO_TILE


def test_counter_beats_are_skipped_in_mismatches():
    config = Config(rows=2, cols=2)
    r = Machine(config).run(Program(config).read_counters())
    hw = r.host_out.copy()
    hw[r.unknown, 0] = 12345
    assert r.mismatches(hw, r.last) == []
    hw[r.counter_beat & ~r.unknown, 0] += 1
    assert r.mismatches(hw, r.last)


# --- errors -----------------------------------------------------------------------------------
ERR = Config(rows=3, cols=5, ub_rows=8, acc_rows=6, weight_fifo_depth=2)   # C > R
ERR_T = Config(rows=5, cols=3, ub_rows=8, acc_rows=6, weight_fifo_depth=2)  # R > C


def _bad_cases():
    """(name, config, setup(p), bad(p, rng), cause)."""
    def ready(p, rng):   # UB rows 0..1, one tile taken, one queued
        p.read_host(0, i8(rng, 2, p.config.rows))
        p.read_weights(i8(rng, 2, p.config.rows, p.config.cols)).matmul(0, 0, 2)

    oor = isa.Cause.OUT_OF_RANGE
    d = lambda rng, n, c: i8(rng, n, c)  # noqa: E731
    return [
        ("opcode 14 data", ERR, ready, lambda p, r: p.raw(isa.encode(14, n=1), d(r, 1, 5)),
         isa.Cause.BAD_OPCODE),
        ("opcode 8 data", ERR, ready, lambda p, r: p.raw(isa.encode(8, n=1), d(r, 3, 5)),
         isa.Cause.BAD_OPCODE),
        ("opcode 15 data", ERR, ready, lambda p, r: p.raw((1 << 64) - 1, d(r, 2, 5)),
         isa.Cause.BAD_OPCODE),
        ("matmul n=0", ERR, ready, lambda p, r: p.matmul(0, 0, 0), oor),
        ("matmul src", ERR, ready, lambda p, r: p.matmul(7, 0, 2), oor),
        ("matmul dst", ERR, ready, lambda p, r: p.matmul(0, 5, 2), oor),
        ("matmul src 16-bit", ERR, ready, lambda p, r: p.matmul(0xFFFF, 0, 0xFFFF), oor),
        ("activate n=0", ERR, ready, lambda p, r: p.activate(0, 2, 0), oor),
        ("activate src", ERR, ready, lambda p, r: p.activate(5, 2, 2), oor),
        ("activate dst", ERR, ready, lambda p, r: p.activate(0, 7, 2), oor),
        ("activate part", ERR, ready, lambda p, r: p.activate(0, 2, 1, part=2), oor),
        ("activate part R>=C", ERR_T, ready, lambda p, r: p.activate(0, 2, 1, part=1), oor),
        ("write n=0", ERR, ready, lambda p, r: p.write_host(0, 0), oor),
        ("write ub src", ERR, ready, lambda p, r: p.write_host(6, 3), oor),
        ("write acc src", ERR, ready, lambda p, r: p.write_host(6, 1, from_acc=True), oor),
        ("write acc part", ERR, ready, lambda p, r: p.write_host(0, 1, from_acc=True, part=1),
         oor),
        ("write ub part", ERR_T, ready, lambda p, r: p.write_host(0, 1, part=2), oor),
        ("write ub part R<=C", ERR, ready, lambda p, r: p.write_host(0, 1, part=1), oor),
        ("read_host n=0", ERR, ready, lambda p, r: p.raw(isa.encode(isa.Op.READ_HOST, dst=0),
                                                         d(r, 2, 5)), oor),
        ("read_host dst", ERR, ready, lambda p, r: p.read_host(6, d(r, 3, 3)), oor),
        ("read_weights n=0", ERR, ready,
         lambda p, r: p.raw(isa.encode(isa.Op.READ_WEIGHTS), d(r, 3, 5)), oor),
        ("no tile new", ERR, lambda p, r: p.read_host(0, d(r, 2, 3)),
         lambda p, r: p.matmul(0, 0, 1), isa.Cause.NO_TILE),
        ("no tile reuse", ERR, lambda p, r: p.read_host(0, d(r, 2, 3)).read_weights(
            d(r, 3, 5)), lambda p, r: p.matmul(0, 0, 1, new_tile=False), isa.Cause.NO_TILE),
        ("no tile drained", ERR, lambda p, r: (ready(p, r), p.matmul(0, 2, 1)),
         lambda p, r: p.matmul(0, 1, 1), isa.Cause.NO_TILE),
        ("overflow", ERR, ready, lambda p, r: p.read_weights(i8(r, 2, 3, 5)),
         isa.Cause.WEIGHT_OVERFLOW),
        ("overflow big n", ERR, lambda p, r: None,
         lambda p, r: p.raw(isa.encode(isa.Op.READ_WEIGHTS, n=0xFFFF), d(r, 3, 5)),
         isa.Cause.WEIGHT_OVERFLOW),
        ("oor before no tile", ERR, lambda p, r: None, lambda p, r: p.matmul(0, 6, 1), oor),
    ]


CASES = _bad_cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_errors_drop_the_instruction(case):
    name, config, setup, bad, cause = case
    R, C = config.rows, config.cols
    rng = np.random.default_rng(4)
    base = Program(config)
    setup(base, rng)
    prog = Program(config, base.steps)
    bad(prog, rng)
    n_bad = len(prog) - len(base)
    # The next instructions must work normally: fresh data lands, the FIFO is as before.
    after = i8(rng, 2, R)
    tail = Program(config).read_host(3, after).write_host(3, 2).sync()
    prog.extend(tail.steps)
    ref = Program(config, base.steps).extend(tail.steps)
    r = Machine(config).run(prog)
    good = Machine(config).run(ref)
    assert r.error == cause and r.error_step == len(base)
    assert np.array_equal(r.ub, good.ub) and np.array_equal(r.acc, good.acc)
    assert np.array_equal(r.host_out[:-1], good.host_out[:-1])   # no beats from the bad one
    assert np.array_equal(r.host_out[-3:-1, :min(R, C)], after[:, :min(R, C)])
    assert r.host_out[-1, 1] == cause and good.host_out[-1, 1] == isa.Cause.NONE
    assert r.host_in_left == 0
    assert r.retired == good.retired + n_bad
    m1, m2 = Machine(config), Machine(config)
    m1.run(prog)
    m2.run(ref)
    assert [t.tolist() for t in m1.fifo] == [t.tolist() for t in m2.fifo]


def test_first_error_is_sticky():
    config = ERR
    p = Program(config).matmul(0, 0, 1).matmul(0, 0, 0).raw(isa.encode(13), [[1]]).sync()
    r = Machine(config).run(p)
    assert r.error == isa.Cause.NO_TILE and r.host_out[0, 1] == isa.Cause.NO_TILE
    r = Machine(config).run(Program(config).raw(isa.encode(13), [[1]]).matmul(0, 0, 1).sync())
    assert r.error == isa.Cause.BAD_OPCODE


def test_framing_early_last():
    config = ERR
    rng = np.random.default_rng(5)
    rows = i8(rng, 4, 3)
    # READ_HOST n=3 whose second beat has last=1: row 0 written, beat 1 discarded, the
    # instruction ends; beats 2..3 belong to the next READ_HOST.
    p = Program(config).raw(isa.encode(isa.Op.READ_HOST, dst=4, n=3), rows[:2],
                            last=[False, True])
    p.read_host(0, rows[2:]).sync()
    r = Machine(config).run(p)
    assert r.error == isa.Cause.HOST_FRAMING
    assert r.ub[4].tolist() == rows[0].tolist()
    assert not r.ub[5:7].any()
    assert r.ub[0:2].tolist() == rows[2:].tolist()
    assert r.host_in_left == 0


def test_framing_missing_last():
    config = ERR
    rng = np.random.default_rng(6)
    rows = i8(rng, 6, 3)
    # READ_HOST n=2 sent with 4 beats (last on the 4th): rows 0..1 written, 2..3 discarded.
    p = Program(config).raw(isa.encode(isa.Op.READ_HOST, dst=0, n=2), rows[:4])
    p.read_host(4, rows[4:]).sync()
    r = Machine(config).run(p)
    assert r.error == isa.Cause.HOST_FRAMING
    assert r.ub[0:2].tolist() == rows[:2].tolist()
    assert not r.ub[2:4].any()
    assert r.ub[4:6].tolist() == rows[4:].tolist()


def test_framing_weights_early_last_queues_zero_rows():
    config = ERR     # R=3, C=5, depth 2
    rng = np.random.default_rng(7)
    beats = i8(rng, 6, 5)
    # READ_WEIGHTS n=2 with last on beat 1: beat 0 is row 0 of tile 0, beat 1 is discarded,
    # tile 0's other rows and all of tile 1 are zeros; beats 2..5 are the next READ_HOST's.
    p = Program(config).raw(isa.encode(isa.Op.READ_WEIGHTS, n=2), beats[:2],
                            last=[False, True])
    p.raw(isa.encode(isa.Op.READ_HOST, dst=0, n=4), beats[2:, :3])
    p.read_host(4, np.eye(3, dtype=int)).matmul(4, 0, 3).matmul(4, 3, 3)
    r = Machine(config).run(p)
    assert r.error == isa.Cause.HOST_FRAMING and r.error_step == 0
    assert r.ub[0:4].tolist() == beats[2:, :3].tolist()
    assert r.acc[0:3].tolist() == [beats[0].tolist(), [0] * 5, [0] * 5]
    assert not r.acc[3:6].any()
    # last=1 on the final beat of tile 0 of 2 is early too
    p = Program(config).raw(isa.encode(isa.Op.READ_WEIGHTS, n=2), beats[:3])
    p.read_host(4, np.eye(3, dtype=int)).matmul(4, 0, 3).matmul(4, 3, 3).matmul(4, 0, 1)
    r = Machine(config).run(p)
    assert r.error == isa.Cause.HOST_FRAMING
    assert r.acc[0:3].tolist() == [*beats[:2].tolist(), [0] * 5]
    assert r.retired == 5      # the third MATMUL: NO_TILE, but the first cause is kept
    # missing last on READ_WEIGHTS: the tile is queued, the extra beats discarded
    p = Program(config).raw(isa.encode(isa.Op.READ_WEIGHTS, n=1), beats[:5])
    p.read_host(0, np.eye(3, dtype=int)).matmul(0, 0, 3).sync()
    r = Machine(config).run(p)
    assert r.error == isa.Cause.HOST_FRAMING
    assert r.acc[0:3].tolist() == beats[0:3].tolist()
    assert r.retired == 4 and r.host_in_left == 0


def test_host_data_shortage_hangs():
    config = ERR
    p = Program(config).raw(isa.encode(isa.Op.READ_HOST, dst=0, n=3), [[1, 2, 3]] * 2,
                            last=[False, False])
    with pytest.raises(ProgramHang, match="step 0"):
        Machine(config).run(p)
    p = Program(config).raw(isa.encode(isa.Op.READ_HOST, dst=0, n=0), [[1]], last=[False])
    with pytest.raises(ProgramHang):
        Machine(config).run(p)


def test_data_attached_to_another_step_is_one_stream():
    config = ERR
    p = Program(config).raw(isa.encode(isa.Op.NOP), [[9, 8, 7]])
    p.raw(isa.encode(isa.Op.READ_HOST, dst=2, n=1))
    r = Machine(config).run(p)
    assert r.error == isa.Cause.NONE and r.ub[2].tolist() == [9, 8, 7]


def test_run_checks_config():
    with pytest.raises(ValueError, match="config"):
        Machine(ERR).run(Program(ERR_T))
    with pytest.raises(TypeError):
        Machine(ERR).run([])
