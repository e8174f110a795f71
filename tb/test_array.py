"""cocotb tests of the generated array Verilog (run by tests/test_array_cocotb.py and the demo).

Environment: ``TPUGEN_CONFIG`` (the Config as JSON), ``TPUGEN_SEED``, optionally
``TPUGEN_REPORT`` (a JSON file the demo test writes its numbers to).
"""

import json
import os

import cocotb
import numpy as np

from tpugen.hdl.array import array_latency
from tpugen.tb.array_tb import TB, config_from_env


def _seed():
    return int(os.environ.get("TPUGEN_SEED", "1"))


@cocotb.test()
async def test_corners(dut):
    """Worst cases: all -128 x all -128, all 127, zeros, identity; tiles back to back."""
    cfg = config_from_env()
    tb = TB(dut, cfg, seed=_seed())
    await tb.start()
    r, c = cfg.rows, cfg.cols
    lo, hi = cfg.operand_type.min, cfg.operand_type.max
    m = max(r, 3)
    full = lambda v, shape: np.full(shape, v)  # noqa: E731
    tb.add_tile(full(lo, (r, c)), full(lo, (m, r)))
    tb.add_tile(full(hi, (r, c)), full(hi, (m, r)))
    tb.add_tile(full(lo, (r, c)), full(hi, (m, r)))
    tb.add_tile(full(0, (r, c)), tb.random_tile(m)[1])
    eye = np.eye(r, c, dtype=np.int64)
    tb.add_tile(eye, tb.random_tile(m)[1])
    tb.add_tile(tb.random_tile(m)[0], full(0, (m, r)))
    tb.add_tile(-eye, full(lo, (1, r)))  # -1 x -128 per lane
    await tb.wait_done()


@cocotb.test()
async def test_random_stalls(dut):
    """Random tiles of random length, random gaps in both input streams."""
    cfg = config_from_env()
    tb = TB(dut, cfg, seed=_seed() + 1, act_gap=0.3, weight_gap=0.3)
    await tb.start()
    for _ in range(8):
        m = tb.rng.randint(1, 2 * cfg.rows + 3)
        tb.add_tile(*tb.random_tile(m))
    await tb.wait_done()


@cocotb.test()
async def test_cycles(dut):
    """Exact cycle counts: latency R + C - 1 + cell_pipeline, one vector per cycle, and tiles
    of M = R, M > R, M < R and M = 1 starting every max(M, R) cycles (zero idle cycles when
    M >= R)."""
    cfg = config_from_env()
    r = cfg.rows
    tb = TB(dut, cfg, seed=_seed() + 2)
    await tb.start()
    ms = [r, r + 3, max(1, r - 1), 1, r, 2 * r, 1, 1]
    for m in ms:
        tb.add_tile(*tb.random_tile(m))
    await tb.wait_done()

    acts = tb.acts.transfers
    weights = tb.weights.transfers
    assert len(acts) == sum(ms)
    assert weights[:r] == list(range(weights[0], weights[0] + r)), "weight beats not one per cycle"
    starts, k = [], 0
    for m in ms:
        starts.append(acts[k])
        assert acts[k:k + m] == list(range(acts[k], acts[k] + m)), "tile vectors not contiguous"
        k += m
    assert starts[0] == weights[0] + r, f"first tile started at {starts[0]}, weights {weights[0]}"
    for i in range(1, len(ms)):
        gap = starts[i] - starts[i - 1]
        assert gap == max(ms[i - 1], r), (
            f"tile {i} started {gap} cycles after tile {i - 1} (M={ms[i - 1]}, R={r}); "
            f"expected {max(ms[i - 1], r)}")
    latency = array_latency(cfg)
    outs = [cyc for cyc, _, _ in tb.received]
    assert [o - a for o, a in zip(outs, acts, strict=True)] == [latency] * len(acts), (
        f"latency differs from R + C - 1 + cell_pipeline = {latency}")


@cocotb.test()
async def test_demo(dut):
    """The demo's run: a sequence of random tiles with random stalls; writes a report."""
    cfg = config_from_env()
    tb = TB(dut, cfg, seed=_seed() + 3, act_gap=0.1, weight_gap=0.1)
    await tb.start()
    tiles = int(os.environ.get("TPUGEN_TILES", "6"))
    for _ in range(tiles):
        tb.add_tile(*tb.random_tile(tb.rng.randint(cfg.rows, 3 * cfg.rows)))
    await tb.wait_done()
    path = os.environ.get("TPUGEN_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"tiles": tiles, "vectors": len(tb.received), "cycles": tb.cycle_count,
                       "matched": len(tb.received)}, f)
