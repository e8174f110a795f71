"""The ECP5 DSP floorplan (``fpga.gateware.floorplan``): which cells get a MULT18X18D, at which
site, and that the site reaches the block's ``BEL`` attribute in the elaborated design."""

import re

import pytest
from amaranth.back import rtlil

from tpugen.fpga.gateware.floorplan import MULT18_ROWS, array_floorplan, ecp5_mult18_rows
from tpugen.fpga.gateware.probes import ArrayProbe
from tpugen.hdl.config import Config
from tpugen.hdl.core import Core
from tpugen.hdl.dsp import check_dsp_plan, check_dsp_sites

ROWS = MULT18_ROWS["LFE5U-85F"]


def _xy(site):
    x, y = re.fullmatch(r"X(\d+)/Y(\d+)/MULT18_[0145]", site).groups()
    return int(x), int(y)


def test_lfe5u_85f_has_156_distinct_sites_in_x_order():
    assert [len(r) for r in ROWS] == [52, 52, 52]
    sites = [s for r in ROWS for s in r]
    assert len(set(sites)) == 156
    for row in ROWS:
        xs = [_xy(s)[0] for s in row]
        assert xs == sorted(xs) and len({_xy(s)[1] for s in row}) == 1
    # A block at x holds MULT18_0, _1, _4, _5 at x, x + 1, x + 4, x + 5.
    assert ecp5_mult18_rows((7,), (10,)) == (("X10/Y7/MULT18_0", "X11/Y7/MULT18_1",
                                              "X14/Y7/MULT18_4", "X15/Y7/MULT18_5"),)


def test_16x16_whole_columns_interleaved_three_per_row():
    cfg = Config(rows=16, cols=16, cell_pipeline=2)
    plan, sites = array_floorplan(cfg, ROWS, 152)
    # 52 sites a row hold 3 columns of 16: 9 columns, 144 cells; columns 9.. are Booth cells.
    assert sorted(plan) == [(i, j) for i in range(16) for j in range(9)]
    assert set(plan.values()) == {"mult18"} and set(sites) == set(plan)
    assert check_dsp_sites(cfg, check_dsp_plan(cfg, plan), sites) == sites
    for (i, j), site in sites.items():
        assert site == ROWS[j // 3][3 * i + j % 3]
    # Neighbours are near: the next row's cell 3 sites on (same DSP row), the next column's
    # one site on, or straight above in the next DSP row.
    x00, y00 = _xy(sites[(0, 0)])
    assert _xy(sites[(1, 0)])[1] == y00 and _xy(sites[(1, 0)])[0] - x00 <= 5
    assert _xy(sites[(0, 1)])[1] == y00 and _xy(sites[(0, 1)])[0] - x00 == 1
    assert _xy(sites[(5, 3)])[0] == _xy(sites[(5, 0)])[0] and _xy(sites[(5, 3)])[1] == 34


@pytest.mark.parametrize("rows, cols, blocks, columns", [
    (16, 16, 40, 2),        # the budget: whole columns only
    (8, 8, 156, 8),         # 6 columns a DSP row, the 7th and 8th in the second
    (4, 64, 156, 39),       # 13 columns a row, 3 rows
    (52, 3, 156, 3),        # one column a DSP row
    (16, 16, 0, 0),
])
def test_columns_fit_the_budget_and_the_rows(rows, cols, blocks, columns):
    cfg = Config(rows=rows, cols=cols, cell_pipeline=2)
    plan, sites = array_floorplan(cfg, ROWS, blocks)
    assert sorted({j for _, j in plan}) == list(range(columns))
    assert len(plan) == rows * columns <= blocks and len(set(sites.values())) == len(sites)


@pytest.mark.parametrize("cfg", [
    Config(rows=53, cols=4, cell_pipeline=2),      # a column longer than a DSP row
    Config(rows=4, cols=4, cell_pipeline=1),       # no DSP cell without the pipelined cell
    Config(rows=4, cols=4, cell_pipeline=2, operand="bf16"),
])
def test_no_floorplan(cfg):
    assert array_floorplan(cfg, ROWS, 156) is None


def test_bad_arguments():
    cfg = Config(rows=4, cols=4, cell_pipeline=2)
    with pytest.raises(TypeError, match="config must be a Config"):
        array_floorplan("4x4", ROWS, 4)
    with pytest.raises(ValueError, match="blocks must be a non-negative integer, not -1"):
        array_floorplan(cfg, ROWS, -1)
    plan, sites = array_floorplan(cfg, ROWS, 16)
    with pytest.raises(ValueError, match="is not a 'mult18' cell"):
        check_dsp_sites(cfg, {}, sites)
    with pytest.raises(ValueError, match="a BEL of its own"):
        check_dsp_sites(cfg, plan, {(0, 0): "X4/Y10/MULT18_0", (0, 1): "X4/Y10/MULT18_0"})
    with pytest.raises(ValueError, match="is not a 'mult18' cell"):
        Core(cfg, dsp_plan={}, dsp_sites={(0, 0): "X4/Y10/MULT18_0"})


def test_sites_reach_the_blocks_bel_attributes():
    cfg = Config(rows=3, cols=5, cell_pipeline=2)
    plan, sites = array_floorplan(cfg, ROWS, 9)
    text = rtlil.convert(ArrayProbe(cfg, dsp_plan=plan, dsp_sites=sites), name="top")
    bels = re.findall(r'attribute \\BEL "([^"]+)"\n\s*cell \\MULT18X18D', text)
    assert sorted(bels) == sorted(sites.values()) and len(bels) == 9
