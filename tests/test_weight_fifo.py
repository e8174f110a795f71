"""The weight FIFO: order, capacity, level, latency and random stalls on both sides."""


import numpy as np
import pytest
from amaranth.sim import Simulator
from helpers import assert_rejects

from tpugen.hdl.config import Config
from tpugen.hdl.weight_fifo import WeightFIFO
from tpugen.sim.amaranth_streams import Sink, Source, run_streams

CONFIGS = [
    Config(rows=3, cols=5, weight_fifo_depth=2),
    Config(rows=4, cols=4, weight_fifo_depth=1),
    Config(rows=1, cols=1, weight_fifo_depth=1),     # capacity 1: storage is 3 beats
    Config(rows=2, cols=5, weight_fifo_depth=1),     # capacity 2: storage is 3 beats
    Config(rows=8, cols=2, weight_fifo_depth=3),
]


def beats(config: Config, n: int, seed: int) -> list[list[int]]:
    """Random int8 tile rows, with -128/127 over-represented."""
    rng = np.random.default_rng(seed)
    b = rng.integers(-128, 127, size=(n, config.cols), endpoint=True)
    pick = rng.random(b.shape)
    b = np.where(pick < 0.15, -128, np.where(pick > 0.85, 127, b))
    return b.tolist()


def run(config: Config, bench_factory):
    dut = WeightFIFO(config)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench_factory(dut))
    sim.run()
    return dut


def test_rejects_bad_config():
    assert_rejects(lambda: WeightFIFO(None), TypeError, r"config must be a Config, not None")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("p_in, p_out", [(0.3, 0.3), (0.0, 0.7), (0.7, 0.0)])
def test_order_and_level_with_stalls(config, p_in, p_out):
    items = beats(config, 6 * config.rows * config.weight_fifo_depth + 7, seed=3)
    got = {}

    def bench_factory(dut):
        cap = dut.storage

        async def bench(ctx):
            seed = int(p_in * 10 + p_out * 100)
            src = Source(dut.w_in, items, p_stall=p_in, seed=seed, name="w_in")
            snk = Sink(dut.w_out, len(items), p_stall=p_out, seed=seed, name="w_out")
            model_level = 0

            def check(ctx, cycle):
                # level is the number of beats accepted and not yet sent
                assert ctx.get(dut.level) == model_level, f"cycle {cycle}"
                assert ctx.get(dut.w_in.ready) == (model_level < cap), f"cycle {cycle}"
                assert ctx.get(dut.w_out.valid) <= (model_level > 0)

            # Track the level: +1 after each w_in transfer, -1 after each w_out transfer.
            cycle = 0
            while not (src.done and snk.done):
                assert cycle < 40 * len(items), "timeout"
                src.drive(ctx)
                snk.drive(ctx)
                check(ctx, cycle)
                n_in, n_out = src.index, len(snk.items)
                src.sample(ctx, cycle)
                snk.sample(ctx, cycle)
                model_level += (src.index - n_in) - (len(snk.items) - n_out)
                assert 0 <= model_level <= cap
                await ctx.tick()
                cycle += 1
            await run_streams(ctx, [], [snk])    # nothing more comes out
            assert ctx.get(dut.level) == 0
            got["items"] = snk.items

        return bench

    run(config, bench_factory)
    assert got["items"] == items


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_fill_to_capacity_then_drain(config):
    cap = max(config.weight_fifo_depth * config.rows, 3)  # WeightFIFO.storage
    items = beats(config, cap + 3, seed=5)
    got = []

    def bench_factory(dut):
        async def bench(ctx):
            ctx.set(dut.w_out.ready, 0)
            # Fill: exactly `cap` beats are taken, then ready stays low.
            taken = 0
            for k in range(cap + 3):
                ctx.set(dut.w_in.valid, 1)
                ctx.set(dut.w_in.payload, items[taken])
                if ctx.get(dut.w_in.ready):
                    taken += 1
                await ctx.tick()
                assert ctx.get(dut.level) == taken, f"cycle {k}"
            assert taken == cap
            assert not ctx.get(dut.w_in.ready)
            # Full and being read: still no beat taken in the same cycle.
            ctx.set(dut.w_out.ready, 1)
            assert ctx.get(dut.w_out.valid)
            assert not ctx.get(dut.w_in.ready)
            ctx.set(dut.w_in.valid, 0)
            got.append(list(ctx.get(dut.w_out.payload)))
            await ctx.tick()
            # Drain the rest; then the queue is empty and stays so.
            while ctx.get(dut.level):
                if ctx.get(dut.w_out.valid):
                    got.append(list(ctx.get(dut.w_out.payload)))
                await ctx.tick()
            for _ in range(4):
                assert not ctx.get(dut.w_out.valid)
                await ctx.tick()

        return bench

    run(config, bench_factory)
    assert got == items[:cap]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_latency_and_throughput(config):
    items = beats(config, 12, seed=9)
    timing = {}

    def bench_factory(dut):
        async def bench(ctx):
            src = Source(dut.w_in, items, p_stall=0.0, name="w_in")
            snk = Sink(dut.w_out, len(items), p_stall=0.0, name="w_out")
            await run_streams(ctx, [src], [snk])
            timing.update(i=src.cycles, o=snk.cycles, got=snk.items)

        return bench

    run(config, bench_factory)
    assert timing["got"] == items
    assert timing["o"][0] - timing["i"][0] == 2
    assert np.diff(timing["i"]).tolist() == [1] * (len(items) - 1)
    assert np.diff(timing["o"]).tolist() == [1] * (len(items) - 1)
