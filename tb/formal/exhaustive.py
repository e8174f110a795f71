"""Exhaustive simulation where a proof is too wide: every operand pair, in the Amaranth simulator.

- ``int8_cell_products()``: all 65,536 int8 pairs ``(a, w)`` through a real ``Cell`` (int8,
  partial sums as wide as a product, ``ps_in`` 0): each weight loaded into the shadow register,
  switched in by ``first_in``, then the 256 activations one per cycle; ``ps_out`` must be
  ``a * w`` exactly. (k-induction proves the int8 cell too, in about 20 s: ``formal`` tests.)
- ``fp8_products(name)``: all 65,536 operand pairs of ``fp8_e4m3`` or ``fp8_e5m2`` through the
  float multiplier (``hdl.float_mul.FloatMul``), against the golden model
  ``tpugen.sim.float_golden.product`` (itself checked against exact fractions): bit for bit,
  any NaN matching any NaN.

- ``requant_corners(act_mult)``: every rounding corner of the requantizer through a real
  ``ActivationUnit`` (``"parallel"`` or ``"serial"`` datapath), against
  ``tpugen.sim.requant.requantize_lanes`` (``requant_cases`` lists them): the rounding divide
  by every power of two 2**0 .. 2**32 at each tie (``2**(s-1)`` past a multiple), one below and
  one above, both signs; the high multiply's ties by every power-of-two multiplier
  ``+-2**0 .. 2**30`` (products ``2**30`` past a multiple of ``2**31``, +-1, both signs);
  ``INT32_MIN * INT32_MIN`` (saturated); every left shift 1..31 of values that wrap (and a
  bias add that wraps); the clamp one below, at and one above each bound, with a zero point
  that moves the result across them, and bounds crossed (``act_min > act_max``).

Each returns the number of mismatches and the first few as ``(a, w, got, want)`` (the
requantizer: ``(lane case, got, want)``).
"""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from tpugen.hdl.activation import ActivationUnit
from tpugen.hdl.cell import Cell
from tpugen.hdl.config import OPERAND_TYPES, Config
from tpugen.hdl.float_mul import FloatMul
from tpugen.sim import float_golden
from tpugen.sim.amaranth_streams import Sink, Source, run_streams
from tpugen.sim.quant_beats import raw_set_beats
from tpugen.sim.requant import INT32_MAX, INT32_MIN, requantize_lanes

__all__ = ["int8_cell_products", "fp8_products", "requant_cases", "requant_corners"]


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


#: Lanes of the requantizer runs (one row: a case per lane).
_LANES = 8


def _i32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def requant_cases() -> list[dict]:
    """The requantizer's corner cases, grouped into parameter sets: each a dict of per-lane
    ``bias``, ``mult``, ``shift`` (lists of ``_LANES``), ``zp``, ``lo``, ``hi`` and ``rows``
    (lists of ``_LANES`` accumulators)."""
    groups = []

    def add(lanes, zp=0, lo=-128, hi=127):
        """``lanes``: per lane (bias, mult, shift, [acc, ...]), all the same number of accs."""
        for k in range(0, len(lanes), _LANES):
            part = list(lanes[k:k + _LANES])
            part += [part[-1]] * (_LANES - len(part))
            depth = max(len(p[3]) for p in part)
            rows = [[p[3][r % len(p[3])] for p in part] for r in range(depth)]
            groups.append({"bias": [p[0] for p in part], "mult": [p[1] for p in part],
                           "shift": [p[2] for p in part], "zp": zp, "lo": lo, "hi": hi,
                           "rows": rows})

    # RoundingDivideByPOT: multiplier INT32_MIN makes h = -x exactly (x = INT32_MIN
    # saturates to INT32_MAX); the shift s = 0..32 is a right shift by -e.
    lanes = []
    for s in range(33):
        hs = [0, 1, -1, INT32_MAX, INT32_MIN + 1]
        for k in (0, 1, 100, 127, 128):
            for sign in (1, -1):
                tie = sign * (k * (1 << s) + ((1 << s) >> 1))
                hs += [tie - 1, tie, tie + 1]
        accs = [-h for h in hs if INT32_MIN < -h <= INT32_MAX] + [INT32_MIN]
        lanes.append((0, INT32_MIN, -s, accs))
    add(lanes)
    # SaturatingRoundingDoublingHighMul: q = +-2**k, x * q 2**30 past a multiple of 2**31.
    lanes = []
    for k in range(31):
        for sign in (1, -1):
            step, half = 1 << (31 - k), 1 << (30 - k)
            accs = [_i32(m * step + half + d) for m in (0, 1, 5, -1, -2, -6) for d in (-1, 0, 1)]
            lanes.append((0, sign * (1 << k), 0, accs))
    lanes.append((0, INT32_MIN, 0, [INT32_MIN, INT32_MIN + 1, INT32_MAX, -1, 1]))
    add(lanes)
    # Left shifts that wrap, and a bias add that wraps (multiplier 2**30: h = x / 2, rounded).
    lanes = []
    for e in range(1, 32):
        top = 1 << (31 - e)
        accs = [1, -1, top, top - 1, -top, top + 1, INT32_MAX, INT32_MIN, 3, -3]
        lanes.append((0, 1 << 30, e, accs))
    lanes.append((1, 1 << 30, 0, [INT32_MAX, INT32_MAX - 1, -1]))
    lanes.append((INT32_MIN, 1 << 30, 1, [INT32_MIN, -1, 1, INT32_MAX]))
    add(lanes)
    # The clamp: y = -acc (multiplier INT32_MIN, no shift); y + zp one below, at and one above
    # each bound, for zero points that move it there; crossed bounds.
    for zp, lo, hi in ((0, -128, 127), (5, -3, 9), (-128, -128, 127), (127, -128, 127),
                       (-20, 10, 20), (3, 7, -7), (0, 0, 0), (100, -100, 100)):
        ys = sorted({b + d - zp for b in (lo, hi) for d in (-1, 0, 1)} | {-zp, 300, -300})
        add([(0, INT32_MIN, 0, [-y for y in ys])], zp=zp, lo=lo, hi=hi)
    return groups


def requant_corners(act_mult: str = "parallel") -> tuple[int, list]:
    """Every case of ``requant_cases`` through an ``ActivationUnit`` with ``act_mult``
    (``"parallel"`` or ``"serial"``), 32-bit accumulators, against ``requantize_lanes``."""
    groups = requant_cases()
    bad: list = []
    count = 0
    for first in range(0, len(groups), 16):
        part = groups[first:first + 16]
        config = Config(rows=1, cols=_LANES, operand="int8", acc_width=32,
                        quant_sets=len(part), act_mult=act_mult)
        dut = ActivationUnit(config)
        beats = [{"set": k, "beat": b, "data": row.tolist()}
                 for k, g in enumerate(part)
                 for b, row in enumerate(raw_set_beats(g["bias"], g["mult"], g["shift"],
                                                       g["zp"], g["lo"], g["hi"]))]
        items = [{"row": row, "qset": k} for k, g in enumerate(part) for row in g["rows"]]
        want = [requantize_lanes(np.array(row), np.array(g["bias"]), np.array(g["mult"]),
                                 np.array(g["shift"]), g["zp"], g["lo"], g["hi"]).tolist()
                for g in part for row in g["rows"]]
        got = _run_unit(dut, beats, items, 1 if act_mult == "parallel" else 120)
        for case, (g_row, w_row) in enumerate(zip(got, want, strict=True)):
            for lane, (g, w) in enumerate(zip(g_row, w_row, strict=True)):
                if g != w:
                    count += 1
                    if len(bad) < 8:
                        bad.append(((first, case, lane), g, w))
    return count, bad


def _run_unit(dut, beats, items, per_row: int) -> list:
    """Load ``beats`` through ``dut.qw``, then run ``items`` through ``i`` / ``o``; the rows out."""
    out: list = []

    async def bench(ctx):
        qw = Source(dut.qw, beats, name="qw")
        cycle = await run_streams(ctx, [qw], [], max_cycles=20 * len(beats) + 100, tail=0)
        src = Source(dut.i, items, name="i")
        snk = Sink(dut.o, len(items), name="o")
        await run_streams(ctx, [src], [snk], start=cycle, max_cycles=200 + per_row * len(items))
        out.extend(snk.items)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out
