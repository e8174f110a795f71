"""Exhaustive simulation where a proof is too wide: every operand pair, in the Amaranth simulator.

- ``int8_cell_products()``: all 65,536 int8 pairs ``(a, w)`` through a real ``Cell`` (int8,
  partial sums as wide as a product, ``ps_in`` 0): each weight loaded into the shadow register,
  switched in by ``first_in``, then the 256 activations one per cycle; ``ps_out`` must be
  ``a * w`` exactly. (k-induction proves the int8 cell too, in about 20 s: ``formal`` tests.)
- ``fp8_products(name)``: all 65,536 operand pairs of ``fp8_e4m3`` or ``fp8_e5m2`` through the
  float multiplier (``hdl.float_mul.FloatMul``), against the golden model
  ``tpugen.sim.float_golden.product`` (itself checked against exact fractions): bit for bit,
  any NaN matching any NaN.

Each returns the number of mismatches and the first few as ``(a, w, got, want)``.
"""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from tpugen.hdl.cell import Cell
from tpugen.hdl.config import OPERAND_TYPES, Config
from tpugen.hdl.float_mul import FloatMul
from tpugen.sim import float_golden

__all__ = ["int8_cell_products", "fp8_products"]


def int8_cell_products(*, fault: bool = False, weights=range(-128, 128)) -> tuple[int, list]:
    """Run every ``a`` in -128..127 against every weight of ``weights`` through an int8 cell
    (``fault=True``: the cell's debug fault, which must be found)."""
    config = Config(rows=1, cols=1, operand="int8", acc_width=16)
    cell = Cell(config, fault=fault, ps_width=16)
    acts = list(range(-128, 128))
    bad: list = []
    count = 0

    async def bench(ctx):
        nonlocal count
        ctx.set(cell.ps_in, 0)
        for w in weights:
            ctx.set(cell.w_load, 1)
            ctx.set(cell.w_data, w)
            ctx.set(cell.first_in, 0)
            await ctx.tick()
            ctx.set(cell.w_load, 0)
            for k, a in enumerate(acts):
                ctx.set(cell.a_in, a)
                ctx.set(cell.first_in, k == 0)
                await ctx.tick()
                got = ctx.get(cell.ps_out)
                if got != a * w:
                    count += 1
                    if len(bad) < 8:
                        bad.append((a, w, got, a * w))

    sim = Simulator(cell)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return count, bad


def fp8_products(name: str) -> tuple[int, list]:
    """Every pair of ``name`` (``fp8_e4m3`` or ``fp8_e5m2``) bit patterns through ``FloatMul``
    against ``float_golden.product``."""
    fmt = OPERAND_TYPES[name]
    if not fmt.is_float or fmt.width != 8:
        raise ValueError(f"name must be an fp8 operand type, not {name!r}")
    dut = FloatMul(fmt)
    a, w = np.divmod(np.arange(1 << 16), 256)
    want = np.asarray(float_golden.product(a, w, fmt), dtype=np.uint64)
    got = np.zeros(len(a), dtype=np.uint64)

    async def bench(ctx):
        for i in range(len(a)):
            ctx.set(dut.a, int(a[i]))
            ctx.set(dut.b, int(w[i]))
            got[i] = ctx.get(dut.p)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    same = np.asarray(float_golden.same_bits(got, want), dtype=bool)
    idx = np.flatnonzero(~same)
    return len(idx), [(int(a[i]), int(w[i]), int(got[i]), int(want[i])) for i in idx[:8]]
