"""ECP5 builds with the YoWASP tools (a file of their own, so that pytest-xdist runs them
beside the iCE40 builds): the whole ULX3S board top at 4x4 in the default suite, the array
alone under ``-m fpga``."""

import re

import pytest
from fpga_helpers import check_report as _check
from fpga_helpers import need_tools as _tools

from tpugen.fpga.boards import get_board
from tpugen.fpga.build import build_board

#: The clock the 4x4 board top must meet in the default suite.
ULX3S_4X4_MHZ = 60


@pytest.fixture
def out(tmp_path_factory, request):
    return tmp_path_factory.mktemp(re.sub(r"\W", "_", request.node.name)[:40])


def test_ulx3s_4x4_board_top(out):
    """``tpugen build --board ulx3s``'s design: the whole board top (link, bridge, core with the
    pipelined cell on MULT18X18D), 4x4, at the board's default clock."""
    _tools("ecp5")
    b = get_board("ulx3s")
    cfg = b.config
    assert (cfg.rows, cfg.cols) == (4, 4) and b.clock_mhz == ULX3S_4X4_MHZ
    rep = build_board(b, cfg, ULX3S_4X4_MHZ, out_dir=out)
    _check(rep)
    assert rep.top == "board"
    assert rep.dsps[0] >= 16, "every cell's product in a MULT18X18D"


@pytest.mark.fpga
def test_ulx3s_8x8_array(out):
    _tools("ecp5")
    b = get_board("ulx3s")
    cfg = b.config.replace(rows=8, cols=8, act_lanes=1)
    rep = build_board(b, cfg, 137.5, out_dir=out, top="array")
    _check(rep)
    assert rep.dsps == (64, 156)
