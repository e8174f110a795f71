"""The batching cliff (issue 24): a chain of layers shaped like DS-CNN's must not cost more per
row of M when M grows (a batch folds its samples into M).

DS-CNN's depthwise/pointwise pairs are chains of a block-diagonal 576 x 64 layer (a 3 x 3
depthwise convolution over 64 channels, as ``tpugen.tflite.lowering`` lays it out) and a
64 x 64 pointwise layer kept on chip. On an 8 x 8 array with the default buffers, the hidden
activations take 8 unified-buffer rows per row of an m-block, so m-blocks of 100 rows leave
room for one A buffer of one k-tile (91 rows: two). The planner used to count the waits of a
single buffer's reloads for single GEMMs only, chose one for this pair from M = 375 rows on
(where m-blocks of 94-100 rows become possible), and the chains fell from
96 % to 79 % utilization (docs/compiler.md, "The batching cliff").

The unit tests count, from the compiled program alone, the A rows whose READ_HOST overwrites
rows the MATMUL just before it reads (it must wait for that MATMUL, and the next MATMUL for
it); the Verilator test measures cycles per row.
"""

import numpy as np
import pytest

from tpugen import Accelerator
from tpugen.chain import run_layers
from tpugen.compiler import compile_chain
from tpugen.compiler.gemm import compile_stage
from tpugen.compiler.layers import layer_specs, stage_dims
from tpugen.compiler.plan import MATMUL_GAP, Plan, best_plan, estimate_cycles
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.requant import QuantParams

CONFIG = Config(rows=8, cols=8)


def depthwise(rng, channels: int, taps: int = 9) -> np.ndarray:
    """A 3 x 3 depthwise convolution as a block-diagonal (taps * channels) x channels GEMM
    (rows in (tap, channel) order, as the TFLite importer lays it out)."""
    w = np.zeros((taps, channels, channels), np.int64)
    for c in range(channels):
        w[:, c, c] = rng.integers(-128, 128, taps)
    return w.reshape(taps * channels, channels)


def quant(rng, n: int) -> QuantParams:
    return QuantParams(bias=rng.integers(-2000, 2000, n),
                       multiplier=rng.integers(1 << 29, 1 << 30, n), shift=np.full(n, -9),
                       out_zp=-128, act_min=-128, act_max=127)


def separable(M: int, channels: int, out_channels: int, seed: int = 0):
    """X (M x 9*channels) and a depthwise -> pointwise chain (int8 out), ReLU-like clamp."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-128, 128, (M, 9 * channels))
    layers = [(depthwise(rng, channels), quant(rng, channels), -5),
              (rng.integers(-128, 128, (channels, out_channels)), quant(rng, out_channels))]
    return X, layers


#: (channels in, channels out, small M, large M): DS-CNN's pairs (25 x 5 pixels a sample:
#: batch 1 and batch 8), and person detection's first pair (48 x 48 pixels, 8 -> 16).
SHAPES = [(64, 64, 125, 1000), (8, 16, 144, 2304)]


def waits(program) -> tuple[int, int]:
    """(A rows loaded by READ_HOSTs that overwrite rows of the MATMUL just before them, the
    MATMUL engine's busy cycles: rows + its gap, at least R each)."""
    R = CONFIG.rows
    last, waiting, busy = None, 0, 0
    for step in program:
        f = step.fields
        if f["op"] == isa.Op.MATMUL:
            last = (f["src"], f["src"] + f["n"])
            busy += max(f["n"] + MATMUL_GAP, R)
        elif (f["op"] == isa.Op.READ_HOST and last is not None
              and f["dst"] < last[1] and last[0] < f["dst"] + f["n"]):
            waiting += f["n"]
    return waiting, busy


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}to{s[1]}")
@pytest.mark.parametrize("large", [False, True], ids=["small_M", "large_M"])
def test_chain_loads_do_not_wait_for_the_array(shape, large):
    """Almost no A load waits for the MATMUL before it, whatever M (the cliff: 143,000 of the
    large DS-CNN chain's 640,000 rows did)."""
    cin, cout, small_m, large_m = shape
    X, layers = separable(large_m if large else small_m, cin, cout)
    waiting, busy = waits(compile_chain(CONFIG, X, layers).program)
    assert waiting <= 0.01 * busy, (waiting, busy)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}to{s[1]}")
def test_the_estimate_per_row_does_not_grow_with_m(shape):
    cin, cout, small_m, large_m = shape
    specs = layer_specs(separable(1, cin, cout)[1], 0)
    dims = stage_dims(CONFIG, specs)
    per_row = [best_plan(CONFIG, m, dims, True).estimate / m for m in (small_m, large_m)]
    assert per_row[1] <= per_row[0], per_row


def test_the_estimate_counts_a_single_buffers_reloads_in_a_chain():
    """The plan the planner chose at M = 1000 before the fix (one A buffer of one k-tile):
    its estimate is at least the MATMUL engine's busy time plus the rows it waits for, both
    counted from its program (the old estimate, 662,496, left the waits out; Verilator
    measured 806,505 cycles)."""
    X, layers = separable(1000, 64, 64)
    specs = layer_specs(layers, 0)
    plan = Plan(mb=100, slots=5, nb=4, kb=1, abuf=1, stage=50, nstage=2, hidden=(8, 0),
                estimate=0)
    compiled = compile_stage(CONFIG, X, specs, "int8", 1, plan)
    waiting, busy = waits(compiled.program)
    assert waiting > 0.1 * busy                   # the cliff is there with this plan
    est = estimate_cycles(CONFIG, 1000, stage_dims(CONFIG, specs), True, plan.mb, plan.slots,
                          plan.nb, plan.kb, plan.abuf, plan.stage, plan.nstage)
    assert est >= busy + waiting, (est, busy, waiting)


@pytest.mark.parametrize("backend", ["verilator"])
def test_cycles_per_row_do_not_grow_with_m(backend):
    """DS-CNN's pair on the compiled harness: cycles per row at M = 1000 (batch 8) at most
    those at M = 125 (batch 1), and the results bit-exact (``run_layers`` checks them)."""
    acc = Accelerator(CONFIG, backend=backend)
    per_row = []
    for m in (125, 1000):
        X, layers = separable(m, 64, 64, seed=1)
        _, report = run_layers(acc, X, layers)
        per_row.append(report.cycles / m)
    assert per_row[1] <= per_row[0], per_row
