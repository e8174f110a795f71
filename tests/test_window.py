"""The window walk (``hdl.window``) in the golden model: convolutions from unified-buffer
planes equal a direct NumPy convolution, and its errors are the documented ones."""

import numpy as np
import pytest
from support.window_cases import CASES, Conv, random_case

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.window import at_fields, extent_part, shape_fields, unpack_at, unpack_shape
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.window_walk import walk_pixels

CFG = Config(rows=4, cols=4, ub_rows=512, acc_rows=128, window=1)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("operand", ["int8", "int4"])
def test_convolution_equals_numpy(name, operand):
    cfg = CFG.replace(operand=operand)
    rng = np.random.default_rng(sum(map(ord, name + operand)))
    prog, want = random_case(cfg, CASES[name], rng)
    res = Machine(cfg).run(prog)
    assert res.error == isa.Cause.NONE
    np.testing.assert_array_equal(res.host_out, want)


def test_the_reference_is_a_convolution():
    """The reference itself, against a hand-computed 1-channel case with zero-point padding."""
    from support.window_cases import reference
    x = np.arange(9).reshape(3, 3, 1)
    k = np.ones((3, 3, 1, 1), dtype=np.int64)
    out = reference(Conv(h=3, w=3, cin=1, cout=1, kh=3, kw=3, top=1, left=1), x, k, zp=10)
    # corner (0, 0): 0 + 1 + 3 + 4 and five pads of 10
    assert out[0, 0] == 8 + 50 and out[4, 0] == 36


def test_walk_wraps_rows_and_keeps_the_at_register():
    shape = {"in_w": 5, "in_h": 5, "out_w": 3, "stride": 2}
    at = {"iy": -1, "ix": 1, "ixr": -1, "ox": 1}
    assert walk_pixels(shape, at, 5) == [(-1, 1), (-1, 3), (1, -1), (1, 1), (1, 3)]


def test_fields_round_trip_and_are_checked():
    s = shape_fields(in_w=28, in_h=3, out_w=14, stride=2, pad=-128)
    assert unpack_shape(s) == {"in_w": 28, "in_h": 3, "out_w": 14, "stride": 2,
                               "pad": 0xFF80}
    a = at_fields(iy=-3, ix=200, ixr=-32768, ox=255)
    assert unpack_at(a) == {"iy": -3, "ix": 200, "ixr": -32768, "ox": 255}
    with pytest.raises(ValueError, match=r"^stride must be an integer in 1\.\.15, not 0$"):
        shape_fields(in_w=1, in_h=1, out_w=1, stride=0, pad=0)
    with pytest.raises(ValueError, match=r"^in_w must be an integer in 1\.\.255, not 256$"):
        shape_fields(in_w=256, in_h=1, out_w=1, stride=1, pad=0)
    with pytest.raises(ValueError, match=r"^ox must be an integer in 0\.\.255, not -1$"):
        at_fields(iy=0, ix=0, ixr=0, ox=-1)
    assert extent_part(64) == 0 and extent_part(65) == 1
    with pytest.raises(ValueError, match=r"^rows must be an integer"):
        extent_part(0)


def _run_window(cfg, *, shape=True, extent=64, src=0):
    p = Program(cfg)
    p.read_host(0, np.ones((4, cfg.rows), dtype=np.int64))
    if shape:
        p.window_shape(in_w=2, in_h=2, out_w=2, stride=1, pad=0)
    p.window_at(iy=0, ix=0, ixr=0, ox=0)
    p.read_weights(np.ones((1, cfg.rows, cfg.cols), dtype=np.int64))
    p.matmul_window(src, 0, 4, extent=extent)
    p.write_host(0, 4, from_acc=True)
    return Machine(cfg).run(p)


def test_errors():
    assert _run_window(CFG).error == isa.Cause.NONE
    # no window walk in the config: the word alone is OUT_OF_RANGE
    assert _run_window(CFG.replace(window=0)).error == isa.Cause.OUT_OF_RANGE
    # no SHAPE since reset (all zero): OUT_OF_RANGE at issue, before NO_TILE
    assert _run_window(CFG, shape=False).error == isa.Cause.OUT_OF_RANGE
    # the extent past the buffer
    assert _run_window(CFG, src=CFG.ub_rows - 63).error == isa.Cause.OUT_OF_RANGE
    r = _run_window(CFG, src=CFG.ub_rows - 64)
    assert r.error == isa.Cause.NONE


def test_plane_past_its_extent_is_refused():
    p = Program(CFG)
    p.window_shape(in_w=13, in_h=5, out_w=1, stride=1, pad=0)     # 65 rows > 64
    p.read_weights(np.ones((1, 4, 4), dtype=np.int64))
    p.matmul_window(0, 0, 1, extent=64)
    assert Machine(CFG).run(p).error == isa.Cause.OUT_OF_RANGE
    q = Program(CFG)
    q.window_shape(in_w=13, in_h=5, out_w=1, stride=1, pad=0)
    q.read_weights(np.ones((1, 4, 4), dtype=np.int64))
    q.matmul_window(0, 0, 1, extent=65)
    assert Machine(CFG).run(q).error == isa.Cause.NONE


def test_nop_without_the_walk_is_a_nop():
    cfg = CFG.replace(window=0)
    p = Program(cfg)
    p.window_shape(in_w=2, in_h=2, out_w=2, stride=1, pad=0)
    p.read_weights(np.ones((1, 4, 4), dtype=np.int64))
    p.matmul(0, 0, 1)
    assert Machine(cfg).run(p).error == isa.Cause.NONE
