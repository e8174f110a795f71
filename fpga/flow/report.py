"""What a board build produced: ``BuildReport``, filled from the tools' own reports.

Yosys' statistics (its ``.rpt`` log) give the flip-flops; nextpnr's JSON report (``--report``)
gives the utilisation and the Fmax of each clock, and its log the same as text (the fallback
when the JSON is missing, for example after a failed placement) and the critical path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tpugen.hdl.config import Config

__all__ = ["BuildReport", "RESOURCE_NAMES", "parse_utilisation_log", "parse_fmax_log",
           "critical_path", "yosys_ffs", "read_nextpnr"]

#: nextpnr's cell types for the report's resources, per family.
RESOURCE_NAMES = {
    "ice40": {"luts": "ICESTORM_LC", "dsps": "ICESTORM_DSP", "brams": "ICESTORM_RAM"},
    "ecp5": {"luts": "TRELLIS_COMB", "ffs": "TRELLIS_FF", "dsps": "MULT18X18D",
             "brams": "DP16KD"},
}


@dataclass
class BuildReport:
    """What one build produced. Resource fields are ``(used, available)``; LUTs are ICESTORM_LC
    on iCE40 (a logic cell: LUT4 + FF) and TRELLIS_COMB on ECP5 (LUT4 or carry halves).

    ``top`` is ``"board"`` (the whole board top) or ``"array"`` (the array alone,
    ``fpga.gateware.probes.ArrayProbe``); ``clock_mhz`` the PLL clock, ``fmax_mhz`` nextpnr's Fmax
    of it; ``seconds`` the build's wall time, ``cpu_seconds`` the tools' CPU time (less than the
    wall time on a machine shared with other work); ``dsp_cells`` / ``booth_cells`` the array
    cells whose product is a DSP block / a Booth
    multiplier in LUTs; ``failed`` the tool failure (``"fit: ..."`` when the design does not
    fit), empty after a finished build."""

    board: str
    device: str
    config: Config
    top: str
    luts: tuple = (0, 0)
    ffs: tuple = (0, 0)
    dsps: tuple = (0, 0)
    brams: tuple = (0, 0)
    clock_mhz: float = 0.0
    fmax_mhz: float = 0.0
    bitstream: Path | None = None
    seconds: float = 0.0
    step_seconds: dict = field(default_factory=dict)
    cpu_seconds: float = 0.0
    dsp_cells: int = 0
    booth_cells: int = 0
    critical_path: str = ""
    log: Path | None = None
    failed: str = ""

    @property
    def gops(self) -> float:
        """Peak: 2 operations per cell per clock (multiply and add) at the PLL clock."""
        return 2 * self.config.rows * self.config.cols * self.clock_mhz / 1e3

    @property
    def fmax_gops(self) -> float:
        """Peak at nextpnr's Fmax."""
        return 2 * self.config.rows * self.config.cols * self.fmax_mhz / 1e3

    @property
    def fits(self) -> bool:
        return not self.failed.startswith("fit") and all(
            u <= a for u, a in (self.luts, self.ffs, self.dsps, self.brams) if a)

    @property
    def timing_met(self) -> bool:
        return self.fmax_mhz >= self.clock_mhz > 0

    def over(self) -> list[str]:
        """The resources used beyond the device's (``"LUTs 7035/5280"``)."""
        return [f"{n} {u}/{a}" for n, (u, a) in self._resources() if a and u > a]

    def _resources(self):
        return (("LUTs", self.luts), ("FFs", self.ffs), ("DSPs", self.dsps),
                ("BRAMs", self.brams))

    def resources_text(self) -> str:
        return ", ".join(f"{n} {u}/{a} ({100 * u / a:.0f}%)" if a else f"{n} {u}"
                         for n, (u, a) in self._resources())

    def summary(self) -> str:
        c = self.config
        return (f"{self.board} {c.rows}x{c.cols} ({self.top}): {self.resources_text()}; "
                f"clock {self.clock_mhz:.2f} MHz, Fmax {self.fmax_mhz:.2f} MHz, "
                f"{self.gops:.2f} GOPS peak; {self.seconds:.0f} s "
                f"({self.cpu_seconds:.0f} s of CPU)")

    def to_dict(self) -> dict:
        return {
            "board": self.board, "device": self.device, "config": self.config.to_dict(),
            "top": self.top, "luts": self.luts, "ffs": self.ffs, "dsps": self.dsps,
            "brams": self.brams, "clock_mhz": self.clock_mhz, "fmax_mhz": self.fmax_mhz,
            "gops": self.gops, "fits": self.fits, "timing_met": self.timing_met,
            "bitstream": str(self.bitstream) if self.bitstream else None,
            "seconds": self.seconds, "step_seconds": self.step_seconds,
            "cpu_seconds": self.cpu_seconds,
            "dsp_cells": self.dsp_cells, "booth_cells": self.booth_cells,
            "failed": self.failed,
        }

    @classmethod
    def from_dict(cls, data: dict) -> BuildReport:
        """The report ``to_dict`` wrote (``build_report.json`` in a build folder); the derived
        fields (``gops``, ``fits``, ``timing_met``) are recomputed, not read."""
        if not isinstance(data, dict):
            raise TypeError(f"data must be a dict, not {data!r}")
        fields = {k: v for k, v in data.items() if k not in ("gops", "fits", "timing_met")}
        try:
            fields["config"] = Config.from_dict(fields["config"])
            for k in ("luts", "ffs", "dsps", "brams"):
                if k in fields:
                    fields[k] = tuple(fields[k])
            if fields.get("bitstream"):
                fields["bitstream"] = Path(fields["bitstream"])
            return cls(**fields)
        except (KeyError, TypeError) as e:
            raise ValueError(f"data is not a build report ({e}): {data!r:.200}") from None


def parse_utilisation_log(text: str) -> dict:
    """``{cell type: (used, available)}`` from nextpnr's "Device utilisation" log lines."""
    return {name: (int(used), int(avail)) for name, used, avail in re.findall(
        r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", text)}


def parse_fmax_log(text: str) -> dict:
    """``{clock: Fmax in MHz}`` from nextpnr's log (the last "Max frequency" line of each)."""
    return {clk: float(mhz) for clk, mhz in re.findall(
        r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz", text)}


def critical_path(text: str, limit: int = 25) -> str:
    """The last (post-route) critical path of nextpnr's log, condensed: its steps of 0.3 ns or
    more (carry-chain hops folded away), the first and last, and the logic/routing totals."""
    starts = [m.start() for m in re.finditer(r"Info: Critical path report for clock", text)]
    if not starts:
        return ""
    block = text[starts[-1]:].splitlines()
    head, steps, total = block[0].replace("Info: ", ""), [], ""
    for line in block[1:]:
        mm = re.search(r"(clk-to-q|logic|setup|routing)\s+([\d.]+)\s+([\d.]+)\s+"
                       r"(?:Source|Net)\s+(\S+)(.*)", line)
        if mm:
            steps.append((mm[1], float(mm[2]), float(mm[3]), mm[4], mm[5].strip()))
        elif re.search(r"ns logic, [\d.]+ ns routing", line):
            total = line.replace("Info: ", "").strip()
            break
    keep = [s for i, s in enumerate(steps) if s[1] >= 0.3 or i in (0, len(steps) - 1)]
    out = [head] + [f"  {k:8s} {d:5.2f} {t:6.2f}  {n[:110]} {x[:24]}" for k, d, t, n, x in
                    keep[:limit]]
    if total:
        out.append("  " + total)
    return "\n".join(out)


def yosys_ffs(text: str) -> int:
    """Flip-flops in Yosys' final statistics (iCE40: SB_DFF*, ECP5: TRELLIS_FF)."""
    sections = text.split("Printing statistics.")
    if len(sections) < 2:
        return 0
    last = sections[-1]
    # The design-wide totals come last ("=== design hierarchy ===" for hierarchies).
    if "=== design hierarchy ===" in last:
        last = last.split("=== design hierarchy ===")[-1]
    total = 0
    for a, b in re.findall(r"^\s*(\S+)\s+(\S+)\s*$", last, re.M):
        name, count = (a, b) if b.isdigit() else (b, a) if a.isdigit() else (None, None)
        if name and (name.startswith("SB_DFF") or name == "TRELLIS_FF"):
            total += int(count)
    return total


def _read_json_report(path: Path, clock_mhz: float):
    """``(utilisation, fmax)`` from nextpnr's JSON report; the Fmax of the clocks constrained
    near ``clock_mhz`` only (the PLL output, not the board clock that feeds the PLL)."""
    try:
        data = json.loads(path.read_text())
        util = {k: (v["used"], v["available"]) for k, v in data.get("utilization", {}).items()}
        fmax = {k: v["achieved"] for k, v in data.get("fmax", {}).items()}
        target = {k: v.get("constraint", 0) for k, v in data.get("fmax", {}).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, {}
    near = [k for k, v in target.items() if abs(v - clock_mhz) < 0.01 * clock_mhz]
    if near:
        fmax = {k: fmax[k] for k in near}
    return util, fmax


def read_nextpnr(report: BuildReport, family: str, json_report: Path, log_text: str) -> None:
    """Fill ``report``'s LUTs, DSPs, BRAMs (and FFs on ECP5), Fmax and critical path from
    nextpnr's JSON report ``json_report`` (when it exists) and its log text."""
    if family not in RESOURCE_NAMES:
        raise ValueError(f"family must be one of {', '.join(RESOURCE_NAMES)}, not {family!r}")
    names = RESOURCE_NAMES[family]
    util, fmax = _read_json_report(json_report, report.clock_mhz)
    util = util or parse_utilisation_log(log_text)
    fmax = fmax or parse_fmax_log(log_text)
    for key in ("luts", "dsps", "brams", "ffs"):
        if key in names and names[key] in util:
            setattr(report, key, util[names[key]])
    if family == "ice40" and report.ffs[1] == 0:
        # iCE40 logic cells each hold a flip-flop: as many FFs as cells.
        report.ffs = (report.ffs[0], util.get("ICESTORM_LC", (0, 0))[1])
    # The core clock: the PLL's output net (the fastest constrained clock; the board clock
    # itself only feeds the PLL).
    if fmax:
        report.fmax_mhz = round(min(fmax.values()), 2)
    report.critical_path = critical_path(log_text)
