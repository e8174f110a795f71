"""The board measurements of record: ``fpga/flow/measured.json``, one checked-in data file.

Each entry is one place-and-route build measured with the YoWASP tools: the board, the top
(``"board"``: the whole board top; ``"array"``: the array alone between pins), the ``Config``,
the PLL clock, nextpnr's Fmax, LUTs / FFs / DSPs / BRAMs as ``[used, available]``, the build's
seconds (wall time) and, when measured, the tools' CPU seconds (the machine is shared: the wall
time is longer when other work runs), the tool versions and the date. A figure that was not
measured is ``null``.

``bench/fpga.py --record`` adds or replaces entries (``record``) and ``bench/fpga.py --readme``
rewrites the README's board table from them (``readme_table``, ``replace_readme_table``);
``tpugen build --list`` shows them next to each board's default. Nothing else states these
numbers, so the README, the CLI and the file cannot disagree.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import textwrap
from importlib import resources

from tpugen.fpga.flow.boards import BOARDS, Board, get_board
from tpugen.hdl.config import Config

__all__ = ["Measurement", "MEASURED_FILE", "README_BEGIN", "README_END", "load_measured",
           "parse_measured", "dump_measured", "record", "default_measurement",
           "board_measurements", "readme_table", "readme_section", "replace_readme_table"]

#: The data file, in the ``tpugen.fpga.flow`` package (``fpga/flow/measured.json``).
MEASURED_FILE = "measured.json"

#: The comments around the README's generated board table.
README_BEGIN = ("<!-- BEGIN board table: generated from fpga/flow/measured.json by "
                "`bench/fpga.py --readme`; do not edit -->")
README_END = "<!-- END board table -->"

_TOPS = ("board", "array")
_RESOURCES = ("luts", "ffs", "dsps", "brams")
#: Two clocks closer than this (relative) are the same clock (a PLL's reach, ``fpga.gateware.pll``).
_SAME_CLOCK = 0.01


def _pair(name, value):
    if value is None:
        return None
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                       for v in value)):
        raise ValueError(f"{name} must be [used, available] (integers) or null, not {value!r}")
    return tuple(value)


def _number(name, value, *, positive=True):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            positive and not value > 0) or value < 0:
        raise ValueError(f"{name} must be a {'positive ' if positive else ''}number or null, "
                         f"not {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One measured build (see the module docstring); validated on construction."""

    board: str
    top: str
    config: Config
    clock_mhz: float | None
    fmax_mhz: float | None
    luts: tuple | None
    ffs: tuple | None
    dsps: tuple | None
    brams: tuple | None
    seconds: float | None
    tools: dict = dataclasses.field(default_factory=dict)
    date: str = ""
    cpu_seconds: float | None = None

    def __post_init__(self):
        get_board(self.board)
        if self.top not in _TOPS:
            raise ValueError(f"top must be one of {', '.join(_TOPS)}, not {self.top!r}")
        if not isinstance(self.config, Config):
            raise TypeError(f"config must be a Config, not {self.config!r}")
        for name in ("clock_mhz", "fmax_mhz"):
            object.__setattr__(self, name, _number(name, getattr(self, name)))
        object.__setattr__(self, "seconds", _number("seconds", self.seconds, positive=False))
        object.__setattr__(self, "cpu_seconds", _number("cpu_seconds", self.cpu_seconds,
                                                        positive=False))
        for name in _RESOURCES:
            object.__setattr__(self, name, _pair(name, getattr(self, name)))
        if not isinstance(self.tools, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.tools.items()):
            raise ValueError(f"tools must map tool names to versions, not {self.tools!r}")
        try:
            datetime.date.fromisoformat(self.date)
        except (TypeError, ValueError):
            raise ValueError(f"date must be an ISO date (YYYY-MM-DD), not {self.date!r}") from None

    @property
    def fits(self) -> bool:
        """No measured resource is used beyond the device's."""
        return not any(p[0] > p[1] for p in self._pairs() if p is not None)

    @property
    def timing_met(self) -> bool:
        return (self.fmax_mhz is not None and self.clock_mhz is not None
                and self.fmax_mhz >= self.clock_mhz)

    @property
    def cells(self) -> int:
        return self.config.rows * self.config.cols

    @property
    def gops(self) -> float | None:
        """Peak GOPS at the clock (2 operations per cell per cycle)."""
        return None if self.clock_mhz is None else 2 * self.cells * self.clock_mhz / 1e3

    @property
    def fmax_gops(self) -> float | None:
        """Peak GOPS at nextpnr's Fmax."""
        return None if self.fmax_mhz is None else 2 * self.cells * self.fmax_mhz / 1e3

    def _pairs(self):
        return (self.luts, self.ffs, self.dsps, self.brams)

    def same_build(self, other: Measurement) -> bool:
        """Whether ``other`` measures the same build (board, top, config, clock)."""
        return (self.board, self.top, self.config) == (other.board, other.top, other.config) \
            and _same_clock(self.clock_mhz, other.clock_mhz)

    def is_default(self, board: Board | None = None) -> bool:
        """Whether this is the board's default build: the whole board top with the board's
        ``config`` at its ``clock_mhz``."""
        board = get_board(self.board) if board is None else board
        return (self.board == board.name and self.top == "board"
                and self.config.same_hardware(board.config)
                and _same_clock(self.clock_mhz, board.clock_mhz))

    def shape(self) -> str:
        """``"4x4 board top"`` / ``"4x4 array alone"`` (``"4x4 bf16 board top"`` for an operand
        type other than int8; ``", with memories"`` after it for a config with a weight
        memory or a program memory)."""
        c = self.config
        what = "board top" if self.top == "board" else "array alone"
        operand = "" if c.operand == "int8" else f" {c.operand}"
        memories = ", with memories" if c.weight_tiles or c.program_words else ""
        return f"{c.rows}x{c.cols}{operand} {what}{memories}"

    @property
    def unit(self) -> str:
        """``"GFLOPS"`` for float operand types, else ``"GOPS"``."""
        return "GFLOPS" if self.config.operand_type.is_float else "GOPS"

    def figures(self) -> str:
        """The measured figures on one line (what ``tpugen build --list`` prints)."""
        parts = []
        if self.clock_mhz is not None:
            parts.append(f"clock {self.clock_mhz:g} MHz")
        if self.fmax_mhz is not None:
            parts.append(f"Fmax {self.fmax_mhz:.2f} MHz")
        for name, pair in zip(("LUTs", "FFs", "DSPs", "BRAMs"), self._pairs(), strict=True):
            if pair is not None:
                parts.append(f"{name} {pair[0]:,}/{pair[1]:,}")
        if not self.fits:
            parts.append("no fit")
        elif self.top == "array" and self.fmax_gops is not None:
            parts.append(f"{self.fmax_gops:.2f} {self.unit} peak at Fmax")
        elif self.timing_met:
            parts.append(f"{self.gops:.2f} {self.unit} peak")
        elif self.fmax_mhz is not None:
            parts.append("misses timing")
        if self.seconds is not None:
            cpu = f" ({self.cpu_seconds:.0f} s CPU)" if self.cpu_seconds is not None else ""
            parts.append(f"{self.seconds:.0f} s build{cpu}")
        return ", ".join(parts) + f" ({self.date})"

    def to_dict(self) -> dict:
        return {
            "board": self.board, "top": self.top, "config": self.config.to_dict(),
            "clock_mhz": self.clock_mhz, "fmax_mhz": self.fmax_mhz,
            **{name: list(p) if p is not None else None
               for name, p in zip(_RESOURCES, self._pairs(), strict=True)},
            "seconds": self.seconds, "cpu_seconds": self.cpu_seconds,
            "tools": dict(self.tools), "date": self.date,
        }

    @classmethod
    def from_dict(cls, data) -> Measurement:
        if not isinstance(data, dict):
            raise TypeError(f"a measurement must be a JSON object, not {data!r}")
        names = [f.name for f in dataclasses.fields(cls)]
        optional = {"cpu_seconds"}          # not measured in the first builds of record
        unknown = sorted(set(data) - set(names))
        missing = sorted(set(names) - set(data) - optional)
        if unknown or missing:
            raise ValueError(f"a measurement has fields {', '.join(names)}; "
                             f"{'unknown ' + unknown[0] if unknown else 'missing ' + missing[0]}")
        return cls(**{**data, "config": Config.from_dict(data["config"])})

    @classmethod
    def from_report(cls, report, *, tools: dict, date: str) -> Measurement:
        """The measurement of a ``fpga.flow.report.BuildReport`` (``tools``: ``{package:
        version}``, ``fpga.flow.toolchain.tool_versions``; ``date``: ISO date). Figures the build
        did not reach (no Fmax after a failed placement) are ``None``."""
        def pair(p):
            return tuple(p) if p[1] else None
        return cls(board=report.board, top=report.top, config=report.config,
                   clock_mhz=round(report.clock_mhz, 3), fmax_mhz=report.fmax_mhz or None,
                   luts=pair(report.luts), ffs=pair(report.ffs), dsps=pair(report.dsps),
                   brams=pair(report.brams), seconds=report.seconds,
                   cpu_seconds=getattr(report, "cpu_seconds", None) or None, tools=dict(tools),
                   date=date)


def _same_clock(a, b):
    if a is None or b is None:
        return a is b
    return abs(a - b) <= _SAME_CLOCK * max(a, b)


def _order(m: Measurement):
    boards = list(BOARDS)
    return (boards.index(m.board), not m.is_default(), m.top != "board", m.cells,
            m.clock_mhz or 0.0)


def parse_measured(text: str) -> list[Measurement]:
    """The measurements in the text of a ``measured.json``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"measured.json is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("builds"), list):
        raise ValueError("measured.json must be an object with a list 'builds'")
    return [Measurement.from_dict(b) for b in data["builds"]]


def load_measured() -> list[Measurement]:
    """The measurements of record (the package's ``measured.json``)."""
    text = resources.files("tpugen.fpga.flow").joinpath(MEASURED_FILE).read_text(encoding="utf-8")
    return parse_measured(text)


def dump_measured(measurements) -> str:
    """The text of a ``measured.json`` holding ``measurements`` (in the README's order: board,
    its default first, board tops, then arrays alone, smaller first), one field a line."""
    builds = []
    for m in sorted(measurements, key=_order):
        fields = ",\n".join(f"      {json.dumps(k)}: {json.dumps(v)}"
                            for k, v in m.to_dict().items())
        builds.append("    {\n" + fields + "\n    }")
    about = ("Board builds measured with the YoWASP tools (bench/fpga.py --record); "
             "the README's board table and `tpugen build --list` are generated from this file.")
    return ('{\n  "about": ' + json.dumps(about) + ',\n  "builds": [\n'
            + ",\n".join(builds) + "\n  ]\n}\n")


def record(measurements, new: Measurement) -> list[Measurement]:
    """``measurements`` with ``new`` added, replacing a measurement of the same build."""
    if not isinstance(new, Measurement):
        raise TypeError(f"new must be a Measurement, not {new!r}")
    return sorted([m for m in measurements if not m.same_build(new)] + [new], key=_order)


def board_measurements(board, measurements=None) -> list[Measurement]:
    """The measurements of ``board`` (default: of record), its default build first."""
    board = get_board(board)
    measurements = load_measured() if measurements is None else measurements
    return sorted((m for m in measurements if m.board == board.name), key=_order)


def default_measurement(board, measurements=None) -> Measurement | None:
    """The measurement of ``board``'s default build, or ``None`` when it was not measured."""
    board = get_board(board)
    found = [m for m in board_measurements(board, measurements) if m.is_default(board)]
    return found[0] if found else None


def _cell(pair, *, used_only=False):
    if pair is None:
        return ""
    if used_only:
        return f"{pair[0]:,}"
    text = f"{pair[0]:,} / {pair[1]:,}"
    return text + ": no fit" if pair[0] > pair[1] else text


def _row(m: Measurement, first: bool) -> str:
    b = get_board(m.board)
    default = m.is_default(b)
    c = m.config
    shape = f"**{c.rows}x{c.cols}, default**" if default else m.shape()
    if not m.fits:
        gops = ""
    elif m.top == "array":
        gops = f"({m.fmax_gops:.2f} at Fmax)" if m.fmax_gops is not None else ""
    elif m.timing_met:
        gops = f"**{m.gops:.2f}**" if default else f"{m.gops:.2f}"
        gops += " GFLOPS" if m.unit == "GFLOPS" else ""
    else:
        gops = "misses" if m.fmax_mhz is not None else ""
    cells = [
        f"{b.label} ({b.device})" if first else b.label,
        shape,
        f"{m.clock_mhz:g} MHz" if m.clock_mhz is not None else "-",
        f"{m.fmax_mhz:.2f} MHz" if m.fmax_mhz is not None else "-",
        _cell(m.luts), _cell(m.ffs, used_only=True), _cell(m.dsps), _cell(m.brams),
        gops,
        (f"{m.seconds:.0f} s" + (f" ({m.cpu_seconds:.0f} s CPU)" if m.cpu_seconds else ""))
        if m.seconds is not None else "",
    ]
    return "| " + " | ".join(cells) + " |"


def readme_table(measurements) -> str:
    """The README's board section between ``README_BEGIN`` and ``README_END``: the tools and
    dates, then one table row per measurement."""
    measurements = sorted(measurements, key=_order)
    tools = sorted({(k, v) for m in measurements for k, v in m.tools.items()})
    dates = sorted({m.date for m in measurements})
    intro = (f"Measured here ({', '.join(f'{k} {v}' for k, v in tools)}; {', '.join(dates)}). "
             f"A board top is the whole design (UART link, bridge, core); an array alone sits "
             f"between shift registers on the pins. GOPS (GFLOPS for float operands) are peak "
             f"figures (2 R C f); `tpugen build --list` shows the same numbers.")
    lines = [
        textwrap.fill(intro, width=100, break_on_hyphens=False),
        "",
        "| board | array | clock | Fmax | LUTs | FFs | DSPs | BRAMs | peak GOPS | build |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    seen = set()
    for m in measurements:
        lines.append(_row(m, m.board not in seen))
        seen.add(m.board)
    return "\n".join(lines)


def replace_readme_table(readme: str, table: str) -> str:
    """``readme`` with the text between its ``README_BEGIN`` and ``README_END`` lines replaced
    by ``table``; ``ValueError`` when the markers are missing."""
    pattern = re.compile(re.escape(README_BEGIN) + r"\n.*?" + re.escape(README_END), re.S)
    if len(pattern.findall(readme)) != 1:
        raise ValueError("the README must hold one board table between "
                         f"{README_BEGIN!r} and {README_END!r}")
    return pattern.sub(lambda _: f"{README_BEGIN}\n{table}\n{README_END}", readme)


def readme_section(readme: str) -> str:
    """The text between the README's markers (what ``readme_table`` must equal)."""
    pattern = re.compile(re.escape(README_BEGIN) + r"\n(.*?)\n" + re.escape(README_END), re.S)
    found = pattern.findall(readme)
    if len(found) != 1:
        raise ValueError("the README must hold one board table between "
                         f"{README_BEGIN!r} and {README_END!r}")
    return found[0]
