"""The board listing of ``tpugen build --list``: each board, its default and its measured
figures (from ``fpga/flow/measured.json``, ``fpga.flow.measured``)."""

from __future__ import annotations

from tpugen.fpga.flow.boards import BOARDS
from tpugen.fpga.flow.measured import board_measurements, load_measured

__all__ = ["list_boards"]


def list_boards(measurements=None) -> str:
    """The text of ``tpugen build --list`` (``measurements``: default, those of record)."""
    measurements = load_measured() if measurements is None else measurements
    pad = " " * 12
    lines = []
    for b in BOARDS.values():
        c = b.config
        peak = 2 * c.rows * c.cols * b.clock_mhz / 1e3
        r = b.resources
        lines.append(f"{b.name:12s} {b.title}")
        lines.append(f"{pad} default {c.rows}x{c.cols} at {b.clock_mhz:g} MHz "
                     f"({peak:.2f} GOPS peak), {b.baud / 1e6:g} Mbaud, ub_rows {c.ub_rows}, "
                     f"acc_rows {c.acc_rows}, act_lanes {c.activation_lanes}")
        ours = board_measurements(b, measurements)
        default = [m for m in ours if m.is_default(b)]
        if default:
            lines.append(f"{pad} measured: {default[0].figures()}")
        else:
            lines.append(f"{pad} measured: not yet (bench/fpga.py --record)")
        for m in ours:
            if not m.is_default(b):
                lines.append(f"{pad} also measured, {m.shape()}: {m.figures()}")
        lines.append(f"{pad} device {r['luts']:,} LUTs, {r['dsps']} DSPs, {r['brams']} BRAMs; "
                     f"board clock {b.clk_in_mhz:g} MHz; flash with {b.programmer}")
        if b.notes:
            lines.append(f"{pad} {b.notes}")
    return "\n".join(lines)
