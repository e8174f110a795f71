"""ECP5 builds with the YoWASP tools (a file of their own, so that pytest-xdist runs them
beside the iCE40 builds): a small whole ULX3S board top (2x2) and the array alone, under
``-m fpga`` (``make test-fpga``; the full-size default: ``test_fpga_build``'s
``test_board_default_build``). The default suite builds the iCE40 board top only: the ECP5
tools' first compile on a new machine and the build take minutes."""

import re

import pytest
from fpga_helpers import check_report as _check
from fpga_helpers import need_tools as _tools

from tpugen.fpga.flow.bitstream import build_board
from tpugen.fpga.flow.boards import get_board

#: The small board top of the default suite: the default config with a 2x2 array, and its clock
#: (the 4x4 default itself: ``make test-fpga``).
ULX3S_SMALL = {"rows": 2, "cols": 2, "mhz": 60}


@pytest.fixture
def out(tmp_path_factory, request):
    return tmp_path_factory.mktemp(re.sub(r"\W", "_", request.node.name)[:40])


@pytest.mark.fpga     # with the ECP5 tools' first compile, minutes: make test-fpga
def test_ulx3s_small_board_top(out):
    """The whole board top (link, bridge, core with the pipelined cell on MULT18X18D) of the
    ULX3S's default config with a 2x2 array."""
    _tools("ecp5")
    b = get_board("ulx3s")
    s = ULX3S_SMALL
    cfg = b.config.replace(rows=s["rows"], cols=s["cols"], act_lanes=1)
    rep = build_board(b, cfg, s["mhz"], out_dir=out)
    _check(rep)
    assert rep.top == "board"
    assert rep.dsps[0] >= 4, "every cell's product in a MULT18X18D"


@pytest.mark.fpga
def test_ulx3s_8x8_array(out):
    _tools("ecp5")
    b = get_board("ulx3s")
    cfg = b.config.replace(rows=8, cols=8, act_lanes=1)
    rep = build_board(b, cfg, 137.5, out_dir=out, top="array")
    _check(rep)
    assert rep.dsps == (64, 156)
