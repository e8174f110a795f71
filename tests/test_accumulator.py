"""The accumulator buffer against a Python model: request streams heavy in same-row repeats at
the shortest gap the buffer allows (``ACC_REPEAT_GAP``)."""

import random

import pytest
from amaranth.sim import Simulator
from helpers import assert_rejects

from tpugen.hdl.accumulator import (
    ACC_DATA_DELAY,
    ACC_REPEAT_GAP,
    ACC_WRITE_LATENCY,
    AccumulatorBuffer,
)
from tpugen.hdl.config import Config


def wrap(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


class Model:
    def __init__(self, config: Config):
        self.config = config
        self.rows = [[0] * config.cols for _ in range(config.acc_rows)]

    def apply(self, addr: int, accumulate: bool, data: list[int]):
        w = self.config.acc_width
        old = self.rows[addr]
        self.rows[addr] = [wrap(o + d, w) if accumulate else d for o, d in zip(old, data,
                                                                                strict=True)]


def value(rng: random.Random, width: int) -> int:
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    k = rng.random()
    if k < 0.2:
        return hi
    if k < 0.4:
        return lo
    if k < 0.5:
        return rng.choice([-1, 0, 1])
    return rng.randint(lo, hi)


def request_stream(config: Config, n: int, seed: int):
    """``n`` cycles of requests (``None`` = idle) mixing the hazard patterns and random ones; a
    row is requested again ``ACC_REPEAT_GAP`` cycles after the request before at the soonest
    (the buffer's rule), and often exactly then."""
    rng = random.Random(seed)
    rows = config.acc_rows
    gap = ACC_REPEAT_GAP
    reqs = []

    def row():
        return [value(rng, config.acc_width) for _ in range(config.cols)]

    def recent():
        return {r[0] for r in reqs[-(gap - 1):] if r is not None}

    def add(addr, acc):
        """Request ``addr`` as soon as the rule allows (idle cycles before it if needed)."""
        while addr in recent():
            reqs.append(None)
        reqs.append((addr, acc, row()))

    ring = list(range(min(rows, gap)))       # rows taking turns at the minimum gap
    # Accumulates into each row of the ring at the minimum gap, from an overwrite.
    for k in range(7 * len(ring)):
        add(ring[k % len(ring)], int(k >= len(ring)))
    # Overwrite-then-accumulate pairs at the minimum gap; then one row with idle cycles between.
    for k in range(6 * len(ring)):
        add(ring[k % len(ring)], (k // len(ring)) % 2)
    for _ in range(4):
        add(rows - 1, 1)
    while len(reqs) < n:
        k = rng.random()
        if k < 0.15:
            reqs.append(None)
            continue
        hot = rng.sample(range(rows), min(rows, gap + 1))
        free = [x for x in hot if x not in recent()]
        if rng.random() < 0.8 and free:
            reqs.append((rng.choice(free), int(rng.random() < 0.75), row()))
        else:
            add(rng.randrange(rows), int(rng.random() < 0.75))
    return reqs


def spaced(reqs):
    """``reqs`` in order, with idle cycles where a row would come back sooner than the rule
    allows."""
    out = []
    for r in reqs:
        while r is not None and r[0] in {q[0] for q in out[-(ACC_REPEAT_GAP - 1):] if q}:
            out.append(None)
        out.append(r)
    return out


def simulate(config: Config, reqs, *, read_during=True, seed=0):
    """Drive ``reqs`` (one per cycle, each request's data ``ACC_DATA_DELAY`` cycles after it),
    with legal reads in between; then read every row back.

    Returns the final rows read back and the model; checks the in-between reads on the way.
    """
    dut = AccumulatorBuffer(config)
    model = Model(config)
    rng = random.Random(seed)
    result = {}
    w = ACC_WRITE_LATENCY
    lead = ACC_DATA_DELAY

    def junk():
        return [value(rng, config.acc_width) for _ in range(config.cols)]

    async def bench(ctx):
        # Unwritten memory reads zero.
        ctx.set(dut.rd_en, 1)
        ctx.set(dut.rd_addr, config.acc_rows - 1)
        await ctx.tick()
        assert list(ctx.get(dut.rd_data)) == [0] * config.cols

        recent = [[] for _ in range(w)]      # rows requested in the last W cycles
        data = [None] * lead                 # the data of the requests of the last cycles
        expect = None                        # the read issued last cycle and its model value
        checked = 0
        for cycle, req in enumerate(reqs + [None] * lead):
            if req is None:
                ctx.set(dut.wr_valid, 0)
                ctx.set(dut.wr_addr, rng.randrange(config.acc_rows))   # junk, ignored
                ctx.set(dut.wr_accumulate, rng.randrange(2))
            else:
                addr, acc, _ = req
                ctx.set(dut.wr_valid, 1)
                ctx.set(dut.wr_addr, addr)
                ctx.set(dut.wr_accumulate, acc)
            # The data of the request made ``lead`` cycles ago (junk when there was none).
            ctx.set(dut.wr_data, data[-1] if data[-1] is not None else junk())
            data = [req[2] if req is not None else None] + data[:-1]
            # A read of a row with no request now or in the last W - 1 cycles (the rule);
            # prefer the row requested exactly W cycles ago (the earliest legal read).
            now = [req[0]] if req is not None else []
            busy = set(now) | {x for r in recent[:w - 1] for x in r}
            legal = [x for x in range(config.acc_rows) if x not in busy]
            if expect is not None:
                assert list(ctx.get(dut.rd_data)) == expect[1], (
                    f"read of row {expect[0]} issued in cycle {cycle - 1}")
                checked += 1
                expect = None
            rd = read_during and legal and rng.random() < 0.6
            ctx.set(dut.rd_en, bool(rd))
            if rd:
                oldest = [x for x in recent[w - 1] if x in legal]
                addr_rd = rng.choice(oldest) if oldest and rng.random() < 0.7 else \
                    rng.choice(legal)
                ctx.set(dut.rd_addr, addr_rd)
            if req is not None:
                model.apply(*req)
            if rd:
                expect = (addr_rd, list(model.rows[addr_rd]))
            recent = [now] + recent[:-1]
            await ctx.tick()
        ctx.set(dut.wr_valid, 0)
        ctx.set(dut.rd_en, 0)
        if expect is not None:
            assert list(ctx.get(dut.rd_data)) == expect[1]
        for _ in range(w):
            await ctx.tick()
        # Read every row back, one per cycle (pipelined).
        rows = []
        for addr in range(config.acc_rows):
            ctx.set(dut.rd_en, 1)
            ctx.set(dut.rd_addr, addr)
            await ctx.tick()
            rows.append(list(ctx.get(dut.rd_data)))
        result.update(rows=rows, checked=checked)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result, model


CONFIGS = [
    Config(rows=3, cols=5, acc_width=16, acc_rows=4),
    Config(rows=3, cols=5, acc_width=18, acc_rows=5),
    Config(rows=4, cols=4, acc_width=32, acc_rows=8),
    Config(rows=2, cols=3, acc_width=64, acc_rows=3),
    Config(rows=1, cols=1, acc_width=16, acc_rows=1),
]


def test_rejects_bad_config():
    assert_rejects(lambda: AccumulatorBuffer("x"), TypeError, r"config must be a Config, not 'x'")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_random_requests_match_model(config):
    reqs = request_stream(config, 400, seed=config.acc_width + config.acc_rows)
    result, model = simulate(config, reqs, seed=1)
    assert result["rows"] == model.rows
    assert result["checked"] > 100 or config.acc_rows == 1


def test_unwritten_rows_read_zero():
    config = Config(rows=3, cols=5, acc_width=18, acc_rows=7)
    rng = random.Random(4)
    reqs = [(a, rng.randrange(2), [value(rng, 18) for _ in range(5)]) for a in (2, 5, 2, 2, 5)]
    result, model = simulate(config, spaced(reqs), read_during=False)
    assert result["rows"] == model.rows
    for a in (0, 1, 3, 4, 6):
        assert result["rows"][a] == [0] * 5
    assert result["rows"][2] != [0] * 5


def test_accumulates_wrap():
    config = Config(rows=1, cols=2, acc_width=16, acc_rows=2)
    hi, lo = (1 << 15) - 1, -(1 << 15)
    reqs = [(0, 0, [hi, lo]), (0, 1, [1, -1]), (0, 1, [hi, lo]), (1, 1, [lo, lo]),
            (1, 1, [lo, 5])]
    result, _ = simulate(config, spaced(reqs), read_during=False)
    assert result["rows"] == [[wrap(hi + 1 + hi, 16), wrap(lo - 1 + lo, 16)], [0, lo + 5]]


def test_streams_keep_the_rule():
    """The request streams above repeat rows exactly at the gap the rule allows."""
    config = Config(rows=4, cols=4, acc_width=32, acc_rows=8)
    reqs = request_stream(config, 400, seed=3)
    last, gaps = {}, []
    for k, r in enumerate(reqs):
        if r is not None:
            if r[0] in last:
                gaps.append(k - last[r[0]])
            last[r[0]] = k
    assert min(gaps) == ACC_REPEAT_GAP and gaps.count(ACC_REPEAT_GAP) > 40


def test_write_latency_is_three_cycles():
    """A read in the request's cycle or the two after misses it (the documented rule); from W
    on it sees it. The data comes ACC_DATA_DELAY cycles after the request (junk in between),
    and the row is requested again at the minimum gap."""
    config = Config(rows=1, cols=2, acc_width=32, acc_rows=4)
    dut = AccumulatorBuffer(config)
    seen = []
    gap = ACC_REPEAT_GAP

    async def bench(ctx):
        ctx.set(dut.rd_addr, 1)
        ctx.set(dut.rd_en, 1)
        for cycle in range(8):
            if cycle in (0, gap):   # overwrite with 7, then accumulate 3
                ctx.set(dut.wr_valid, 1)
                ctx.set(dut.wr_addr, 1)
                ctx.set(dut.wr_accumulate, int(cycle == gap))
            else:
                ctx.set(dut.wr_valid, 0)
                ctx.set(dut.wr_addr, 1)
                ctx.set(dut.wr_accumulate, 1)
            ctx.set(dut.wr_data, {2: [7, -7], gap + 2: [3, 3]}.get(cycle, [1000, -1000]))
            await ctx.tick()
            seen.append(list(ctx.get(dut.rd_data)))    # the read issued in `cycle`

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert ACC_WRITE_LATENCY == dut.write_latency == 3 == gap
    assert ACC_DATA_DELAY == dut.data_delay == 2
    # request 0 in cycle 0 is visible to reads from cycle 3, request 1 (cycle 3) from cycle 6
    assert seen == [[0, 0]] * 3 + [[7, -7]] * 3 + [[10, -4]] * 2
