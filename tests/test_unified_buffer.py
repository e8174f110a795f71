"""The unified buffer against a cycle-by-cycle Python model: writes, masks, two read ports."""

import random

import pytest
from amaranth.sim import Simulator
from helpers import assert_rejects

from tpugen.hdl.config import Config
from tpugen.hdl.unified_buffer import UnifiedBuffer

CONFIGS = [
    Config(rows=3, cols=5, ub_rows=5),
    Config(rows=4, cols=4, ub_rows=16),
    Config(rows=8, cols=2, ub_rows=4),
    Config(rows=1, cols=1, ub_rows=1),
]


def operand(rng: random.Random) -> int:
    k = rng.random()
    return -128 if k < 0.15 else 127 if k < 0.3 else rng.randint(-128, 127)


def run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_rejects_bad_config():
    assert_rejects(lambda: UnifiedBuffer({}), TypeError, r"config must be a Config, not \{\}")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_zero_init(config):
    dut = UnifiedBuffer(config)

    async def bench(ctx):
        for addr in range(config.ub_rows):
            for n in (0, 1):
                ctx.set(getattr(dut, f"rd{n}_en"), 1)
                ctx.set(getattr(dut, f"rd{n}_addr"), config.ub_rows - 1 - addr if n else addr)
            await ctx.tick()
            for n in (0, 1):
                assert list(ctx.get(getattr(dut, f"rd{n}_data"))) == [0] * config.rows

    run(dut, bench)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_random_traffic_matches_model(config):
    r, depth = config.rows, config.ub_rows
    dut = UnifiedBuffer(config)
    rng = random.Random(config.rows * 100 + depth)
    model = [[0] * r for _ in range(depth)]
    stats = {"collisions": 0, "reads": 0, "masked": 0}

    async def bench(ctx):
        held = [[0] * r, [0] * r]            # what rdN_data shows (holds while rdN_en is low)
        hot = rng.randrange(depth)
        for cycle in range(500):
            for n in (0, 1):
                assert list(ctx.get(getattr(dut, f"rd{n}_data"))) == held[n], (
                    f"rd{n} in cycle {cycle}")
            if rng.random() < 0.3:
                hot = rng.randrange(depth)

            def pick(hot=hot):
                return hot if rng.random() < 0.5 else rng.randrange(depth)

            we = rng.random() < 0.6
            wa, wd = pick(), [operand(rng) for _ in range(r)]
            mask = (1 << r) - 1 if rng.random() < 0.5 else rng.getrandbits(r)
            ctx.set(dut.wr_en, we)
            ctx.set(dut.wr_addr, wa)
            ctx.set(dut.wr_data, wd)
            ctx.set(dut.wr_mask, mask)
            for n in (0, 1):
                en = rng.random() < 0.7
                ra = pick()
                ctx.set(getattr(dut, f"rd{n}_en"), en)
                ctx.set(getattr(dut, f"rd{n}_addr"), ra)
                if en:
                    held[n] = list(model[ra])        # non-transparent: the old row
                    stats["reads"] += 1
                    stats["collisions"] += we and ra == wa and mask != 0
            if we:
                stats["masked"] += mask != (1 << r) - 1
                model[wa] = [wd[k] if mask >> k & 1 else model[wa][k] for k in range(r)]
            await ctx.tick()
        ctx.set(dut.wr_en, 0)
        for addr in range(depth):
            ctx.set(dut.rd1_en, 1)
            ctx.set(dut.rd1_addr, addr)
            await ctx.tick()
            assert list(ctx.get(dut.rd1_data)) == model[addr], f"final row {addr}"

    run(dut, bench)
    assert stats["collisions"] > 20 and stats["reads"] > 300
    assert stats["masked"] > 50 or config.rows == 1


def test_read_during_write_returns_old_row_then_new():
    config = Config(rows=3, cols=5, ub_rows=4)
    dut = UnifiedBuffer(config)

    async def bench(ctx):
        # wr_mask left undriven: its reset value writes whole rows.
        ctx.set(dut.wr_en, 1)
        ctx.set(dut.wr_addr, 2)
        ctx.set(dut.wr_data, [1, -2, 3])
        for n in (0, 1):
            ctx.set(getattr(dut, f"rd{n}_en"), 1)
            ctx.set(getattr(dut, f"rd{n}_addr"), 2)
        await ctx.tick()
        for n in (0, 1):                        # same cycle as the write: old row
            assert list(ctx.get(getattr(dut, f"rd{n}_data"))) == [0, 0, 0]
        ctx.set(dut.wr_data, [-128, 127, 5])
        await ctx.tick()
        for n in (0, 1):                        # one cycle later: the first write's row
            assert list(ctx.get(getattr(dut, f"rd{n}_data"))) == [1, -2, 3]
        ctx.set(dut.wr_en, 0)
        await ctx.tick()
        for n in (0, 1):
            assert list(ctx.get(getattr(dut, f"rd{n}_data"))) == [-128, 127, 5]
        # A masked write changes only the selected lanes.
        ctx.set(dut.wr_en, 1)
        ctx.set(dut.wr_mask, 0b010)
        ctx.set(dut.wr_data, [9, 9, 9])
        await ctx.tick()
        ctx.set(dut.wr_en, 0)
        await ctx.tick()
        assert list(ctx.get(dut.rd0_data)) == [-128, 9, 5]

    run(dut, bench)
