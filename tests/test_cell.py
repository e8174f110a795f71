"""The MAC cell in the Amaranth simulator: products, wrap, the weight switch, and the
``cell_pipeline`` registers (the product of the inputs offered ``P`` cycles earlier)."""

import random

import pytest
from amaranth.sim import Simulator

from tpugen.hdl.cell import Cell
from tpugen.hdl.config import Config
from tpugen.sim.model import wrap


@pytest.mark.parametrize("pipeline", [0, 1, 2])
@pytest.mark.parametrize("acc_width, ps_width", [(16, None), (18, None), (32, None), (32, 17)])
@pytest.mark.parametrize("fault", [False, True])
def test_cell(acc_width, ps_width, fault, pipeline):
    """Partial sums of ``ps_width`` bits (default ``acc_width``) wrap at that width."""
    cfg = Config(rows=1, cols=1, acc_width=acc_width, cell_pipeline=pipeline)
    dut = Cell(cfg, fault=fault, ps_width=ps_width)
    width = ps_width or acc_width
    assert dut.ps_width == width and len(dut.ps_out) == width
    rng = random.Random(acc_width)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
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
            expected = int(wrap(ps + products.pop(0), width))
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
    for bad in (15, 33, "20", True):
        with pytest.raises(ValueError, match=f"ps_width must be an integer in 16..32, not "
                                             f"{bad!r}"):
            Cell(Config(rows=1, cols=1), ps_width=bad)
    with pytest.raises(ValueError, match="ps_width must be an integer in 32..32, not 24"):
        Cell(Config(rows=1, cols=1, operand="bf16"), ps_width=24)


@pytest.mark.parametrize("rows, acc_width, operand, expected", [
    (1, 32, "int8", 16), (2, 32, "int8", 17), (3, 32, "int8", 18), (16, 32, "int8", 20),
    (17, 32, "int8", 21), (256, 32, "int8", 24), (16, 18, "int8", 18), (4, 32, "int4", 10),
    (8, 32, "bf16", 32)])
def test_psum_width_bounds_every_column_sum(rows, acc_width, operand, expected):
    """``Config.psum_width`` holds the worst sums of R products (all -2**(w-1) squared, and
    the most negative), computed here by brute force."""
    cfg = Config(rows=rows, cols=1, acc_width=acc_width, operand=operand)
    assert cfg.psum_width == expected
    if cfg.operand_type.is_float:
        return
    ot = cfg.operand_type
    extremes = [ot.min * ot.min * rows, ot.min * ot.max * rows]
    need = max(int(v).bit_length() + 1 for v in extremes)   # signed bits of the extremes
    assert cfg.psum_width == min(acc_width, cfg.psum_width) and (
        cfg.psum_width >= need or cfg.psum_width == acc_width)
