"""The MAC cell in the Amaranth simulator: products, wrap, the weight switch, and the
``cell_pipeline`` registers (the product of the inputs offered ``P`` cycles earlier)."""

import random

import pytest
from amaranth.sim import Simulator

from tpugen.hdl.cell import Cell
from tpugen.hdl.config import Config
from tpugen.sim.model import wrap


@pytest.mark.parametrize("pipeline", [0, 1, 2])
@pytest.mark.parametrize("acc_width", [16, 18, 32])
@pytest.mark.parametrize("fault", [False, True])
def test_cell(acc_width, fault, pipeline):
    cfg = Config(rows=1, cols=1, acc_width=acc_width, cell_pipeline=pipeline)
    dut = Cell(cfg, fault=fault)
    rng = random.Random(acc_width)
    lo, hi = -(1 << (acc_width - 1)), (1 << (acc_width - 1)) - 1
    mismatches = []

    async def bench(ctx):
        active = shadow = 0
        products = [0] * pipeline     # in flight: a * w offered 1..P cycles ago
        for step in range(300):
            a = rng.choice([-128, 127, 0, rng.randint(-128, 127)])
            ps = rng.choice([lo, hi, 0, rng.randint(lo, hi)])
            first = rng.random() < 0.2
            load = rng.random() < 0.3
            w_new = rng.randint(-128, 127)
            ctx.set(dut.a_in, a)
            ctx.set(dut.ps_in, ps)
            ctx.set(dut.first_in, first)
            ctx.set(dut.w_load, load)
            ctx.set(dut.w_data, w_new)
            w = shadow if first else active
            products.append(a * w)
            await ctx.tick()
            expected = int(wrap(ps + products.pop(0), acc_width))
            if (ctx.get(dut.ps_out), ctx.get(dut.a_out), ctx.get(dut.first_out)) != (
                    expected, a, first):
                mismatches.append(step)
            if first:
                active = shadow
            if load:
                shadow = w_new

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    if fault:
        assert mismatches, "the debug fault must change the cell's results"
    else:
        assert mismatches == []


def test_cell_rejects_bad_config():
    with pytest.raises(TypeError, match="config must be a Config"):
        Cell("8x8")
