"""The window walk (``hdl.window``) on the RTL: convolutions from unified-buffer planes on the
Amaranth simulator and the compiled Verilator harness, with random stalls, beat for beat as
the golden model (itself checked against NumPy in ``test_window.py``)."""

import numpy as np
import pytest
from support.window_cases import CASES, random_case

from tpugen.backends import get_backend
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program

CFG = Config(rows=4, cols=4, ub_rows=512, acc_rows=128, window=1)


def _checked(backend, cfg, prog, want, seed):
    np.testing.assert_array_equal(Machine(cfg).run(prog).host_out, want)
    result = get_backend(backend, cfg).run(prog, stalls=(0.25, 0.25, 0.25), seed=seed)
    assert result.mismatches == []
    assert result.error == isa.Cause.NONE


@pytest.mark.parametrize("name", ["3x3_valid_split", "stride2_same", "1x3_planes"])
def test_amaranth(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    _checked("amaranth", CFG, *random_case(CFG, CASES[name], rng), seed=1)


def test_verilator_every_case():
    """Every case in one program each, on one Verilator build (walks back to back, SHAPE and
    AT changed while a walk runs)."""
    rng = np.random.default_rng(7)
    for k, name in enumerate(sorted(CASES)):
        _checked("verilator", CFG, *random_case(CFG, CASES[name], rng), seed=k)


def test_refusals_on_the_rtl():
    """A window MATMUL with no SHAPE since reset, one whose plane passes its extent: both
    OUT_OF_RANGE, as in the model; a later good one runs."""
    p = Program(CFG)
    p.read_weights(np.ones((2, 4, 4), dtype=np.int64))
    p.matmul_window(0, 0, 2, extent=64)                    # no SHAPE yet
    p.window_shape(in_w=13, in_h=5, out_w=2, stride=1, pad=3)
    p.window_at(iy=-1, ix=-1, ixr=-1, ox=0)
    p.matmul_window(0, 0, 2, extent=64)                    # 65 rows > 64
    p.matmul_window(0, 0, 2, extent=65)
    p.write_host(0, 2, from_acc=True).sync()
    model = Machine(CFG).run(p)
    assert model.error == isa.Cause.OUT_OF_RANGE and model.error_step == 1
    assert model.host_out[0].tolist() == [12, 12, 12, 12]     # pads (3) times ones
    result = get_backend("amaranth", CFG).run(p, stalls=(0.2, 0.2, 0.2), seed=3)
    assert result.mismatches == [] and result.error == isa.Cause.OUT_OF_RANGE


@pytest.mark.parametrize("backend", ["amaranth", "verilator"])
def test_start_row_follows_the_last_shape_and_at(backend):
    """The walk's start row (``iy * in_w + ix``) follows whichever of SHAPE and AT came last,
    the MATMUL right behind it: AT, then a SHAPE of another width; then SHAPE kept and a new
    AT. An identity tile makes each output row the input row the walk read."""
    x = np.random.default_rng(11).integers(-128, 128, size=(64, 4))
    p = Program(CFG)
    p.read_host(0, x)
    p.read_weights(np.stack([np.eye(4, dtype=np.int64)] * 2))
    p.window_shape(in_w=13, in_h=4, out_w=3, stride=1, pad=0)
    p.window_at(iy=2, ix=1, ixr=0, ox=0)                  # row 2 * 13 + 1 = 27 ...
    p.window_shape(in_w=7, in_h=8, out_w=3, stride=2, pad=0)
    p.matmul_window(0, 0, 4, extent=64)                   # ... is row 2 * 7 + 1 = 15 now
    p.window_at(iy=3, ix=2, ixr=1, ox=1)
    p.matmul_window(0, 4, 4, extent=64)
    p.write_host(0, 8, from_acc=True).sync()
    want = x[[15, 17, 19, 28, 23, 25, 36, 38]]            # (2,1) (2,3) (2,5) (4,0); (3,2) ...
    np.testing.assert_array_equal(Machine(CFG).run(p).host_out[:8], want)
    result = get_backend(backend, CFG).run(p, stalls=(0.25, 0.25, 0.25), seed=2)
    assert result.mismatches == [] and result.error == isa.Cause.NONE
