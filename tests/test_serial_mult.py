"""The bit-serial multiplier against Python integers: corners, random values, back to back."""

import random

import pytest
from amaranth.sim import Simulator

from tpugen.hdl.serial_mult import SerialMultiplier


@pytest.mark.parametrize("aw,bw", [(32, 32), (18, 32), (8, 8), (5, 3)])
def test_products(aw, bw):
    dut = SerialMultiplier(aw, bw)
    rng = random.Random(aw * 100 + bw)
    alo, ahi = -(1 << (aw - 1)), (1 << (aw - 1)) - 1
    blo, bhi = -(1 << (bw - 1)), (1 << (bw - 1)) - 1
    pairs = [(x, y) for x in (alo, ahi, 0, 1, -1) for y in (blo, bhi, 0, 1, -1)]
    pairs += [(rng.randint(alo, ahi), rng.randint(blo, bhi)) for _ in range(60)]
    got = []

    async def bench(ctx):
        for k, (x, y) in enumerate(pairs):
            ctx.set(dut.a, x)
            ctx.set(dut.b, y)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.a, 0)           # operands are read in the start cycle only
            ctx.set(dut.b, 0)
            cycles = 1
            while not ctx.get(dut.done):
                assert ctx.get(dut.busy)
                await ctx.tick()
                cycles += 1
            assert cycles == dut.latency
            got.append(ctx.get(dut.p))
            if k % 3:                    # sometimes idle between products
                await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [x * y for x, y in pairs]


def test_rejects_bad_widths():
    with pytest.raises(ValueError, match="b_width must be an integer >= 2, not 1"):
        SerialMultiplier(8, 1)
