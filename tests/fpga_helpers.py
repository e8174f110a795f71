"""Helpers of the FPGA build tests."""

import pytest

from tpugen.fpga.flow.boards import get_board
from tpugen.fpga.flow.toolchain import FPGA_EXTRA_HINT, ToolsMissing, family_tools, yowasp_env

__all__ = ["need_tools", "check_report"]


def need_tools(family):
    """Fail (not skip) when the YoWASP tools of ``family`` or amaranth-boards are missing."""
    try:
        yowasp_env(family_tools(family))
    except ToolsMissing as e:
        pytest.fail(f"{e} (the FPGA tests need them: {FPGA_EXTRA_HINT})")
    try:
        get_board("icebreaker").platform_class()
    except RuntimeError as e:
        pytest.fail(str(e))


def check_report(rep):
    """A build that fits, meets timing and wrote its bitstream."""
    assert rep.fits, rep.summary()
    assert rep.timing_met, rep.summary() + "\n" + rep.critical_path
    assert rep.luts[0] > 0 and rep.ffs[0] > 0
    assert rep.bitstream is not None and rep.bitstream.stat().st_size > 0
    assert rep.gops > 0
