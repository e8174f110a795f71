"""The array, flat-elaborated, in the Amaranth simulator: results and exact cycle counts."""

import numpy as np
import pytest

from tpugen.hdl.array import SystolicArray, array_latency
from tpugen.hdl.config import Config
from tpugen.sim.array_sim import simulate_array
from tpugen.sim.model import schedule_outputs

SHAPES = [(1, 1), (1, 8), (8, 1), (3, 5), (8, 8), (16, 16), (18, 17)]


def random_tiles(cfg, ms, seed):
    rng = np.random.default_rng(seed)
    return [(rng.integers(-128, 128, (cfg.rows, cfg.cols)), rng.integers(-128, 128, (m, cfg.rows)))
            for m in ms]


PIPELINED = [((3, 5), 1), ((3, 5), 2), ((8, 8), 2), ((1, 1), 2)]


@pytest.mark.parametrize("shape,pipeline", [(s, 0) for s in SHAPES] + PIPELINED,
                         ids=lambda v: f"{v[0]}x{v[1]}" if isinstance(v, tuple) else f"p{v}")
def test_results_with_stalls(shape, pipeline):
    cfg = Config(rows=shape[0], cols=shape[1], cell_pipeline=pipeline)
    ms = [1, cfg.rows, cfg.rows + 2, 2]
    tiles = random_tiles(cfg, ms, seed=sum(shape))
    run = simulate_array(cfg, tiles, act_gap=0.3, weight_gap=0.3, seed=3)
    np.testing.assert_array_equal(run.outputs, schedule_outputs(cfg, tiles))
    firsts = [1 if k == 0 else 0 for m in ms for k in range(m)]
    assert run.out_first == firsts


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_corners(shape):
    cfg = Config(rows=shape[0], cols=shape[1])
    r, c = cfg.rows, cfg.cols
    tiles = [
        (np.full((r, c), -128), np.full((r + 1, r), -128)),
        (np.full((r, c), 127), np.full((2, r), 127)),
        (np.eye(r, c, dtype=np.int64), np.arange(r * 3).reshape(3, r) % 256 - 128),
        (np.zeros((r, c), dtype=np.int64), np.full((1, r), 127)),
    ]
    run = simulate_array(cfg, tiles)
    np.testing.assert_array_equal(run.outputs, schedule_outputs(cfg, tiles))


@pytest.mark.parametrize("acc_width", [16, 18])
def test_wrap(acc_width):
    """Sums that overflow acc_width wrap in two's complement, as the model says."""
    cfg = Config(rows=8, cols=2, acc_width=acc_width)
    tiles = [(np.full((8, 2), -128), np.full((3, 8), -128)),
             (np.full((8, 2), 127), np.full((2, 8), -128))]
    run = simulate_array(cfg, tiles)
    expected = schedule_outputs(cfg, tiles)
    np.testing.assert_array_equal(run.outputs, expected)
    assert (expected != np.array([[8 * 128 * 128] * 2] * 3 + [[-8 * 127 * 128] * 2] * 2)).any()


@pytest.mark.parametrize("pipeline", [0, 1, 2])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (4, 2), (8, 8)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_cycles(shape, pipeline):
    """Latency R + C - 1 + cell_pipeline; tiles start every max(M, R) cycles (M = R, M > R,
    M < R, M = 1)."""
    cfg = Config(rows=shape[0], cols=shape[1], cell_pipeline=pipeline)
    r = cfg.rows
    ms = [r, r + 2, max(1, r - 1), 1, 1, r]
    run = simulate_array(cfg, random_tiles(cfg, ms, seed=1))
    acts = run.act_cycles
    assert acts[0] == r, "the first tile starts once its R weight beats are in"
    starts = np.cumsum([0] + ms[:-1])
    gaps = np.diff([acts[s] for s in starts])
    assert list(gaps) == [max(m, r) for m in ms[:-1]]
    assert array_latency(cfg) == r + cfg.cols - 1 + pipeline
    assert [o - a for o, a in zip(run.out_cycles, acts, strict=True)] == \
        [array_latency(cfg)] * len(acts)


def test_fault_changes_results():
    cfg = Config(rows=3, cols=5)
    tiles = random_tiles(cfg, [4], seed=2)
    run = simulate_array(cfg, tiles, fault=(2, 4))
    assert (run.outputs != schedule_outputs(cfg, tiles)).any()


def test_bad_parameters():
    with pytest.raises(ValueError, match="fault must be a"):
        SystolicArray(Config(rows=2, cols=2), fault=(2, 0))
    with pytest.raises(TypeError, match="config must be a Config"):
        SystolicArray({"rows": 2})
