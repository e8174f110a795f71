"""The array as elaborated for an FPGA: MAC cells on DSP blocks (``hdl.dsp``).

The plan (which cells get a block, how iCE40 cells pair up), and the flat array Verilog that
a board build synthesizes (DSP primitives instanced, Booth cells beside them), run by the
array testbench on Icarus and Verilator with models of the primitives (Yosys' own SB_MAC16
model; our MULT18X18D model, ``sim.primitives``).
"""

import re

import numpy as np
import pytest
from support.core_cases import check_results, gemm_cases

from tpugen.backends.cocotb_sim import CocotbBackend
from tpugen.hdl.array import SystolicArray
from tpugen.hdl.cell import mac16_hold
from tpugen.hdl.config import Config
from tpugen.hdl.convert import to_verilog
from tpugen.hdl.core import Core
from tpugen.hdl.dsp import check_dsp_plan, dsp_plan
from tpugen.sim.cache import build_root
from tpugen.sim.primitives import primitive_models
from tpugen.sim.runner import build
from tpugen.tb import ARRAY_TEST_MODULE

ARRAY_TESTS = 4
CFG = Config(rows=3, cols=5, acc_width=18, cell_pipeline=2)
# iCE40: 5 blocks = row 0 (0,1) (2,3) (4 alone), row 1 (0,1) (2,3); the rest Booth/$mul.
# ECP5: 7 blocks = row 0 and cells (1, 0), (1, 1).
BLOCKS = {"ice40": 5, "ecp5": 7}


def test_plan_ice40_pairs_cells():
    plan = dsp_plan(CFG, "ice40", 5)
    assert plan == {(0, 0): "mac16_lo", (0, 1): "mac16_hi", (0, 2): "mac16_lo",
                    (0, 3): "mac16_hi", (0, 4): "mac16_one", (1, 0): "mac16_lo",
                    (1, 1): "mac16_hi", (1, 2): "mac16_lo", (1, 3): "mac16_hi"}
    # 8 blocks take all 16 products of a 4x4 array.
    assert len(dsp_plan(Config(rows=4, cols=4, cell_pipeline=2), "ice40", 8)) == 16


def test_plan_ecp5_one_cell_per_block():
    plan = dsp_plan(CFG, "ecp5", 7)
    assert sorted(plan) == [(0, j) for j in range(5)] + [(1, 0), (1, 1)]
    assert set(plan.values()) == {"mult18"}
    assert len(dsp_plan(CFG, "ecp5", 1000)) == 15


def test_plan_needs_the_pipelined_cell():
    assert dsp_plan(CFG.replace(cell_pipeline=1), "ecp5", 10) == {}
    with pytest.raises(ValueError, match="dsp_plan needs cell_pipeline 2"):
        SystolicArray(CFG.replace(cell_pipeline=1), dsp_plan={(0, 0): "mult18"})


@pytest.mark.parametrize("plan,match", [
    ({(3, 0): "mult18"}, "cells must be"),
    ({(0, 0): "mult36"}, "roles must be one of"),
    ({(0, 0): "mac16_lo"}, "is not 'mac16_hi'"),
    ({(0, 1): "mac16_hi"}, "is not 'mac16_lo'"),
    ([(0, 0)], "dsp_plan must be a dict"),
])
def test_plan_checked_where_it_is_passed(plan, match):
    """The plan is a constructor argument (not read from the platform), checked there."""
    with pytest.raises((TypeError, ValueError), match=match):
        check_dsp_plan(CFG, plan)
    with pytest.raises((TypeError, ValueError), match=match):
        Core(CFG, dsp_plan=plan)
    assert check_dsp_plan(CFG, None) == {}


def test_plan_needs_the_flat_elaboration():
    with pytest.raises(ValueError, match="flat elaboration"):
        Core(CFG, hierarchical=True, array_module="a", dsp_plan=dsp_plan(CFG, "ecp5", 1))


@pytest.mark.parametrize("kwargs,match", [
    ({"family": "xilinx", "blocks": 1}, "family must be one of"),
    ({"family": "ecp5", "blocks": -1}, "blocks must be a non-negative integer"),
    ({"family": "ecp5", "blocks": 1.5}, "blocks must be a non-negative integer"),
])
def test_plan_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dsp_plan(CFG, **kwargs)


def _verilog(family):
    array = SystolicArray(CFG, dsp_plan=dsp_plan(CFG, family, BLOCKS[family]))
    return to_verilog(array, f"dsp_array_{family}")


@pytest.mark.parametrize("family,primitive,count", [("ice40", "SB_MAC16", 5),
                                                    ("ecp5", "MULT18X18D", 7)])
def test_verilog_instances_the_blocks(family, primitive, count):
    text = _verilog(family)
    assert len(re.findall(rf"^\s*{primitive}\b", text, re.M)) == count
    # Cells without a block keep a multiplication for Yosys (Booth in the board build).
    assert re.search(r"\*", text)


@pytest.mark.parametrize("sim,family", [("icarus", "ice40"), ("icarus", "ecp5"),
                                        pytest.param("verilator", "ice40",
                                                     marks=pytest.mark.slow)])
def test_array_on_dsp_models(family, sim):
    """The array testbench (corners, random tiles with stalls, cycle counts) on the flat
    board-build array with its DSP primitives replaced by their simulation models."""
    models = primitive_models(family, build_root() / "primitives")
    top = f"dsp_array_{family}"
    b = build(sim, f"dsp_{family}_{CFG.name}", lambda: _verilog(family), top,
              extra_sources=models)
    env = {"TPUGEN_CONFIG": CFG.to_json(), "TPUGEN_SEED": "5"}
    tests, failed = b.run(ARRAY_TEST_MODULE, env=env, seed=5, name="tests")
    assert (tests, failed) == (ARRAY_TESTS, 0)


def test_two_row_array_on_ice40_models():
    """With R = 2 the shared SB_MAC16 blocks keep the cells' own active weight registers (the
    partner cell's half could take its shadow before its last weight row is written,
    ``hdl.cell.mac16_hold``): the array testbench on that elaboration."""
    cfg = Config(rows=2, cols=4, acc_width=18, cell_pipeline=2)
    assert not mac16_hold(cfg, "mac16_lo") and mac16_hold(CFG, "mac16_lo")
    models = primitive_models("ice40", build_root() / "primitives")
    top = "dsp_array_ice40_two_rows"
    b = build("icarus", f"dsp_ice40_{cfg.name}", lambda: to_verilog(
        SystolicArray(cfg, dsp_plan=dsp_plan(cfg, "ice40", 4)), top), top, extra_sources=models)
    env = {"TPUGEN_CONFIG": cfg.to_json(), "TPUGEN_SEED": "5"}
    assert b.run(ARRAY_TEST_MODULE, env=env, seed=5, name="tests") == (ARRAY_TESTS, 0)


# A board-build core: pipelined cells, the parallel activation unit (its multipliers on
# MULT18X18D blocks), two activation lanes; DSP blocks for 10 of the 15 products.
CORE_CFG = Config(rows=3, cols=5, ub_rows=64, acc_rows=64, act_lanes=2, cell_pipeline=2)


def test_core_on_ecp5_dsp_models():
    """The whole core as an ECP5 board build elaborates it (flat; 10 cells and the activation
    unit's partial products on MULT18X18D models) runs compiled GEMMs and two-layer chains,
    int32 and requantized int8 results at TFLite's rounding edges, with random stalls on every
    stream, bit-exact against the golden model."""
    rng = np.random.default_rng(3)
    cases = gemm_cases(CORE_CFG, rng, random_shapes=1)
    backend = CocotbBackend(CORE_CFG, "icarus", dsp_family="ecp5", dsp_blocks=10)
    text = backend.build().sources[0].read_text()
    assert len(re.findall(r"^\s*MULT18X18D\b", text, re.M)) == 10 + 4 * CORE_CFG.activation_lanes
    results = backend.run_many([c.program for c in cases], stalls=(0.2, 0.3, 0.3), seed=4)
    assert check_results(CORE_CFG, cases, results) == []


def test_core_on_ice40_models():
    """The whole core as an iCE40 board build elaborates it (flat; products on SB_MAC16
    blocks, the accumulator's adders as SB_LUT4 / SB_CARRY cells with the overwrite in their
    sum LUTs, ``hdl.accumulator``) runs compiled GEMMs with accumulation over k-tiles and
    requantized results, with random stalls on every stream, bit-exact against the golden
    model, on Yosys' models of the cells."""
    rng = np.random.default_rng(5)
    cases = gemm_cases(CORE_CFG, rng, random_shapes=1)
    backend = CocotbBackend(CORE_CFG, "icarus", dsp_family="ice40", dsp_blocks=5)
    text = backend.build().sources[0].read_text()
    assert len(re.findall(r"^\s*SB_MAC16\b", text, re.M)) == 5
    assert len(re.findall(r"^\s*SB_LUT4\b", text, re.M)) == CORE_CFG.cols * CORE_CFG.acc_width
    results = backend.run_many([c.program for c in cases], stalls=(0.2, 0.3, 0.3), seed=6)
    assert check_results(CORE_CFG, cases, results) == []
