"""Bitstreams for boards with the YoWASP tools from PyPI (no system tools).

``build_board(board, config, freq_mhz, ...)`` elaborates a board design (the PLL, the board's
UART pins and LEDs, and the top: ``fpga.gateware.top.BoardTop``, the UART link + bridge + core, or
the array alone, ``fpga.gateware.probes.ArrayProbe``), runs Yosys, nextpnr and the packer through
the
amaranth-boards platform, and returns a ``fpga.flow.report.BuildReport``: LUTs, FFs, DSPs and block
RAMs (used and available), the PLL clock, nextpnr's Fmax, peak GOPS (``2 * R * C * clock``), the
bitstream and the build time. A design that does not fit, or whose Fmax is below the PLL clock,
raises ``BuildError`` whose one-line message gives those numbers (``check=False`` returns the
report instead).

Products that a board's DSP blocks cannot all take are Booth multipliers in LUTs: the array may
use ``dsp_blocks`` DSP blocks (row-major; the pipelined cell instances them itself, two 8 x 8
products per iCE40 SB_MAC16, one per ECP5 MULT18X18D: ``hdl.dsp``, whose plan is passed to the
top's constructor; on an ECP5 with a known DSP layout, whole columns placed by
``fpga.gateware.floorplan``); the other cells' products are mapped by Yosys' ``booth`` pass before
synthesis (the iCE40UP5K has 8 SB_MAC16, the ECP5-85F 156 MULT18X18D).

The tools run as amaranth renders them for the platform, with its overrides
(``script_after_read`` for the Booth mapping, ``synth_opts`` for the board's synthesis options,
``nextpnr_opts`` for nextpnr's JSON report and seed, ``verbose`` for the tools' full output):
``platform.build(..., do_build=False)`` gives the build plan, and its command list
(``build_top.json``) runs here one tool at a time with the YoWASP executables, so that each
tool's output streams to ``progress`` and its time is measured (``fpga.flow.tool_run``, which
also has ``ProgressPrinter``, a ``progress`` for terminals; it is re-exported here).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from numbers import Real
from pathlib import Path

from amaranth.hdl import ClockDomain, Elaboratable, Module
from amaranth.lib import io

from tpugen.fpga.flow.boards import Board, get_board
from tpugen.fpga.flow.report import BuildReport, read_nextpnr, yosys_ffs
from tpugen.fpga.flow.tool_run import ProgressPrinter, children_cpu, progress_of, run_tool
from tpugen.fpga.flow.toolchain import family_tools, tool_env_var, yowasp_env
from tpugen.fpga.gateware.floorplan import MULT18_ROWS, array_floorplan
from tpugen.fpga.gateware.pll import PLLClock, core_clock
from tpugen.fpga.gateware.probes import ArrayProbe
from tpugen.fpga.gateware.top import BoardTop
from tpugen.hdl.block import block_rows
from tpugen.hdl.checks import check_instance, check_int
from tpugen.hdl.config import Config
from tpugen.hdl.dsp import dsp_plan
from tpugen.sim.cache import build_root, entry_dir

__all__ = ["TOPS", "DEFAULT_TIMEOUT", "BuildError", "BoardWrapper", "ProgressPrinter",
           "progress_of", "build_board",
           "build_dir", "bitstream_path", "default_dsp_blocks", "booth_modules",
           "no_rw_check_commands"]

#: What ``build_board`` can build: the whole board top, or the array alone between pins.
TOPS = ("board", "array")

#: The design's name in the build plan (``top.il``, ``top.ys``, ``top.bin`` ...).
_NAME = "top"

#: Seconds a build may take before its tools are stopped (``build_board``'s ``timeout``).
DEFAULT_TIMEOUT = 3600.0

#: nextpnr's words for a design that does not fit the device.
_NO_FIT = re.compile(r"[Uu]nable to place|device has only|too many|exceeds")


class BuildError(RuntimeError):
    """The design does not fit, misses timing, or a tool failed. ``report`` is the
    ``BuildReport`` when there is one."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


class BoardWrapper(Elaboratable):
    """The board design: the ``sync`` domain (driven by ``pll``, a ``PLLClock``), the top
    ``inner`` (ports ``rx``, ``tx``, ``led_busy``, ``led_error`` and optionally ``led_link``)
    and the board's UART and LED pins."""

    def __init__(self, board: Board, pll: PLLClock, inner):
        self.board, self.pll, self.inner = board, pll, inner

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.submodules.pll = self.pll
        m.submodules.top = top = self.inner
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [top.rx.eq(rx.i), tx.o.eq(top.tx)]
        members = top.signature.members
        for port, pin in (("led_busy", self.board.led_busy),
                          ("led_error", self.board.led_error),
                          ("led_link", self.board.led_link)):
            if pin is None or port not in members:
                continue
            m.submodules[port] = led = io.Buffer("o", platform.request(*pin, dir="-"))
            m.d.comb += led.o.eq(getattr(top, port))
        return m


def default_dsp_blocks(board: Board, config: Config, top: str = "board") -> int:
    """The DSP blocks the array may use by default: the board's choice, else what the rest of
    the design leaves. Each parallel activation lane (``acc_width`` x 32 bits, low 64 kept)
    takes 4 DSP blocks on both families (16x16 / 18x18 pieces), serial lanes none."""
    if board.dsp_blocks is not None:
        return board.dsp_blocks
    lanes = config.activation_lanes if config.act_mult == "parallel" else 0
    other = 0 if top == "array" else 4 * lanes
    return max(0, board.dsps - other)


def booth_modules(config: Config, dsp_cells) -> list[str]:
    """Yosys selection patterns of the modules whose ``$mul`` becomes a Booth multiplier in
    LUTs: the array cells (their RTLIL modules, ``<...>.block_<b>.row_<k>.cell_<j>`` as
    ``hdl.array`` names them) that are not in ``dsp_cells``, and with the window walk
    (``Config.window``) the matmul engine (``<...>.ctrl.mm``), whose few small products
    (``iy * in_w``, ``stride * in_w``, ``in_w * in_h``) would otherwise take the DSP blocks
    the floorplan leaves, far from the controller: a 16 x 16 ULX3S build with 8 activation
    lanes measured 52.28 MHz on that route."""
    g = block_rows(config)
    cells = [f"*.block_{i // g}.row_{i % g}.cell_{j}"
             for i in range(config.rows) for j in range(config.cols) if (i, j) not in dsp_cells]
    return cells + (["*.ctrl.mm"] if config.window else [])


def no_rw_check_commands(rtlil: str) -> list[str]:
    """Yosys commands (for right after ``read_rtlil``) that make the read ports of the memories
    marked ``no_rw_check`` undefined on a read of the row being written
    (``COLLISION_X_MASK``), so that no collision logic is built for them.

    Amaranth's RTLIL gives every synchronous read port a defined collision result (the old
    row), and Yosys keeps it even for memories with the ``no_rw_check`` attribute: for a block
    RAM without that behaviour it adds a register of the write data and address and a
    multiplexer per bit and read port (``memory_libmap``: "emulate read-first behavior"). The
    memories marked so (``hdl.unified_buffer``, ``hdl.accumulator``, the link's and the
    bridge's buffers) are never read at a row in the cycle it is written."""
    out = []
    for module, body in re.findall(r"^module (\S+)\n(.*?)^end$", rtlil, re.M | re.S):
        marked = set(re.findall(r"^\s*attribute \\no_rw_check 1\n(?:\s*attribute .*\n)*"
                                r"\s*memory .* (\S+)$", body, re.M))
        for cell, params in re.findall(r"^\s*cell \$memrd_v2 (\S+)\n((?:\s*parameter .*\n)*)",
                                       body, re.M):
            memid = re.search(r'parameter \\MEMID "(.*)"', params)[1].replace("\\\\", "\\")
            width = int(re.search(r"parameter \\COLLISION_X_MASK (\d+)'", params)[1])
            if memid in marked:
                out.append(f"setparam -set COLLISION_X_MASK {width}'{'1' * width} "
                           f"{_select_name(module)}/{_select_name(cell)}")
    return out


def _select_name(name: str) -> str:
    """An RTLIL identifier as a Yosys selection pattern (public names without the backslash,
    pattern characters escaped)."""
    name = name[1:] if name.startswith("\\") else name
    return "".join(f"[{c}]" if c in "*?[]" else c for c in name)


def build_dir(board, config: Config | None = None, top: str = "board") -> Path:
    """Where ``build_board`` builds by default: ``<build root>/fpga/<board>_<config>``
    (``_array`` appended for the array alone; the build root is ``tpugen.sim.cache``'s)."""
    board = get_board(board)
    config = board.config if config is None else config
    suffix = "" if top == "board" else f"_{top}"
    return build_root() / "fpga" / f"{board.name}_{config.name}{suffix}"


def bitstream_path(board, out_dir) -> Path:
    """The bitstream a build in ``out_dir`` writes (``top.bin`` on iCE40, ``top.bit`` on
    ECP5)."""
    board = get_board(board)
    return Path(out_dir) / f"{_NAME}.{'bin' if board.family == 'ice40' else 'bit'}"


def build_board(board, config: Config | None = None, freq_mhz: float | None = None, *,
                out_dir=None, progress: Callable | None = None, baud: int | None = None,
                top: str = "board", dsp_blocks: int | None = None, seed: int | None = None,
                check: bool = True, do_pack: bool = True,
                timeout: float | None = DEFAULT_TIMEOUT, floorplan: bool = True) -> BuildReport:
    """Build ``board`` (a name from ``fpga.flow.boards.BOARDS`` or a ``Board``) and report.

    ``config``, ``freq_mhz`` (the PLL clock) and ``baud`` default to the board's. ``out_dir``:
    the build directory (default ``build_dir``; created; the tools' files, the bitstream,
    nextpnr's ``report.json`` and ``build_report.json`` land there). ``progress(step, line)``
    gets ``line=None`` when a step (``yosys``, ``nextpnr-ice40``, ...) starts, then each line
    of its output. ``top``: one of ``TOPS``. ``dsp_blocks``: DSP blocks the array may use
    (default ``default_dsp_blocks``). ``seed``: nextpnr's placement seed (default the
    board's, ``Board.seed``). ``check``: raise
    ``BuildError`` when the design does not fit or misses timing. ``do_pack``: also write the
    bitstream. ``timeout``: seconds for the whole build (default ``DEFAULT_TIMEOUT``; ``None``:
    no limit); past it the running tool is stopped and ``BuildError`` says so (always, also
    with ``check=False``). ``floorplan``: on an ECP5 whose DSP sites ``fpga.gateware.floorplan``
    knows, place the array's DSP cells by its floorplan (whole columns on the DSP rows; the DSP
    budget's remainder goes unused by the array); otherwise the DSP cells are the first
    ``dsp_blocks`` in row-major order, placed by nextpnr.

    ``TypeError`` for an argument of the wrong type, ``ValueError`` for one out of range.
    """
    board = get_board(board)
    config = check_instance("config", board.config if config is None else config, Config)
    freq_mhz = board.clock_mhz if freq_mhz is None else freq_mhz
    _check_positive("freq_mhz", freq_mhz, "MHz")
    baud = board.baud if baud is None else baud
    if top not in TOPS:
        raise ValueError(f"top must be one of {', '.join(TOPS)}, not {top!r}")
    dsp_blocks = check_int("dsp_blocks", default_dsp_blocks(board, config, top)
                           if dsp_blocks is None else dsp_blocks, 0)
    seed = board.seed if seed is None else seed
    if seed is not None:
        seed = check_int("seed", seed, 0)
    if timeout is not None:
        _check_positive("timeout", timeout, "seconds")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, not {progress!r}")
    progress = progress or (lambda step, line: None)
    out_dir = entry_dir(build_dir(board, config, top)) if out_dir is None else Path(out_dir)
    f_in, f_out = board.clk_in_mhz * 1e6, float(freq_mhz) * 1e6
    core_clock(board.family, f_in, f_out)     # a clock the PLL cannot make: ValueError, here
    tools = family_tools(board.family, pack=bool(do_pack))
    env = yowasp_env(tools)
    t0 = time.monotonic()
    pll = PLLClock(board.family, f_in, f_out, pad=board.pll_pad)
    inner, dsp_cells, booth = _design(board, config, pll.f_achieved, baud, top, dsp_blocks,
                                      floorplan)
    commands = _extract_plan(board, BoardWrapper(board, pll, inner), booth, seed, out_dir)

    report = BuildReport(board=board.name, device=board.device, config=config, top=top,
                         clock_mhz=pll.f_achieved / 1e6, dsp_cells=len(dsp_cells),
                         booth_cells=len(booth), log=out_dir / f"{_NAME}.tim")
    deadline = None if timeout is None else t0 + float(timeout)
    tool_failed, timed_out = _run_tools(commands, tools, env, out_dir, progress, deadline,
                                        timeout, board, report)
    report.seconds = round(time.monotonic() - t0, 1)
    bitstream = bitstream_path(board, out_dir)
    if do_pack and tool_failed is None and bitstream.is_file():
        report.bitstream = bitstream
    if tool_failed is not None:
        no_fit = report.over() or _NO_FIT.search(tool_failed)
        report.failed = f"fit: {tool_failed}" if no_fit else tool_failed
    (out_dir / "build_report.json").write_text(json.dumps(report.to_dict(), indent=2))
    _raise_on_failure(report, board, config, out_dir, tool_failed, timed_out, timeout, check)
    return report


def _check_positive(name, value, unit) -> None:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number of {unit}, not {value!r}")
    if not value > 0:
        raise ValueError(f"{name} must be a positive number of {unit}, not {value!r}")


def _design(board: Board, config: Config, clk_hz: float, baud: int, top: str, dsp_blocks: int,
            floorplan: bool):
    """The top for ``build_board`` (``BoardTop`` or ``ArrayProbe``), the array cells whose
    product is on a DSP block, and the Yosys patterns of the others (``booth_modules``)."""
    family = board.family
    # The pipelined cell instances its DSP block itself (the plan); otherwise Yosys maps the
    # first cells' $mul to DSP blocks, one product per block.
    plan, sites = dsp_plan(config, family, dsp_blocks), {}
    if floorplan and family == "ecp5" and board.device in MULT18_ROWS:
        fp = array_floorplan(config, MULT18_ROWS[board.device], dsp_blocks)
        if fp is not None:
            plan, sites = fp
    if config.cell_pipeline == 2:
        dsp_cells = set(plan)
    else:
        dsp_cells = {divmod(n, config.cols)
                     for n in range(min(dsp_blocks, config.rows * config.cols))}
    if top == "board":
        inner = BoardTop(config, clk_hz, baud, dsp_plan=plan, dsp_family=family,
                         dsp_sites=sites)
    else:
        inner = ArrayProbe(config, dsp_plan=plan, dsp_sites=sites)
    return inner, dsp_cells, booth_modules(config, dsp_cells)


def _extract_plan(board: Board, design: BoardWrapper, booth, seed, out_dir: Path) -> list:
    """Render ``design``'s build plan for ``board`` (the tools' options, the Booth mapping and
    the ``no_rw_check`` marks in the Yosys script), write it to ``out_dir`` (removing a
    previous build's reports and bitstreams) and return its command list."""
    overrides = {
        "verbose": True,         # the tools' whole output, for progress and the report
        "nextpnr_opts": ["--report", "report.json", "--timing-allow-fail"]
                        + (["--seed", str(seed)] if seed is not None else [])
                        + list(board.nextpnr_opts),
    }
    if board.synth_opts:
        overrides["synth_opts"] = board.synth_opts
    if booth:
        # Booth multipliers for the cells without a DSP block, before synthesis maps $mul.
        overrides["script_after_read"] = "proc\nbooth " + " ".join(booth)
    build_plan = board.make_platform().build(design, name=_NAME, do_build=False, **overrides)
    # Memories that never read the row being written need no collision logic: mark their
    # read ports so, right after the design is read (``no_rw_check_commands``).
    script = build_plan.files[f"{_NAME}.ys"]
    read = f"read_rtlil {_NAME}.il\n"
    if read not in script:
        raise RuntimeError(f"the build plan's Yosys script does not read {_NAME}.il")
    marks = no_rw_check_commands(build_plan.files[f"{_NAME}.il"])
    if board.lut_wire_delay_ps is not None:
        marks.append(f"scratchpad -set synth_ice40.abc9.W {board.lut_wire_delay_ps}")
    build_plan.files[f"{_NAME}.ys"] = script.replace(read, read + "".join(
        f"{cmd}\n" for cmd in marks), 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("report.json", "build_report.json", f"{_NAME}.tim", f"{_NAME}.bit",
                  f"{_NAME}.bin"):
        (out_dir / stale).unlink(missing_ok=True)
    build_plan.extract(out_dir)
    return json.loads(build_plan.files[f"build_{_NAME}.json"])["commands"]


def _run_tools(commands, tools, env, out_dir: Path, progress, deadline, timeout, board: Board,
               report: BuildReport):
    """Run the plan's ``commands`` of ``tools`` in ``out_dir``, one at a time, each one's time
    and figures (Yosys' FFs, nextpnr's report) into ``report``. Returns ``(failure,
    timed_out)``: what failed (``None``: nothing) and the tool stopped at ``deadline``."""
    for cmd in commands:
        tool = cmd[0]
        if tool not in tools:
            continue
        progress(tool, None)
        ts = time.monotonic()
        cpu = children_cpu()
        rc, lines = run_tool([env[tool_env_var(tool)], *cmd[1:]], out_dir, env, tool, progress,
                             deadline)
        report.step_seconds[tool] = round(time.monotonic() - ts, 1)
        report.cpu_seconds = round(report.cpu_seconds + children_cpu() - cpu, 1)
        if rc is None:
            return f"stopped {tool} at the {float(timeout):g} s timeout", tool
        if tool == "yosys":
            rpt = out_dir / f"{_NAME}.rpt"
            text = rpt.read_text(errors="replace") if rpt.is_file() else "\n".join(lines)
            report.ffs = (yosys_ffs(text), board.resources["ffs"])
        elif tool.startswith("nextpnr"):
            read_nextpnr(report, board.family, out_dir / "report.json", "\n".join(lines))
        if rc != 0:
            tail = [ln for ln in lines if "ERROR" in ln or "Error" in ln] or lines[-3:]
            return f"{tool} failed (exit {rc}): {tail[-1].strip() if tail else ''}", None
    return None, None


def _raise_on_failure(report: BuildReport, board: Board, config: Config, out_dir: Path,
                      tool_failed, timed_out, timeout, check: bool) -> None:
    """``BuildError`` for a build that timed out or whose tool failed, and with ``check`` for
    a design that does not fit or misses timing."""
    what = f"{board.name} {config.rows}x{config.cols}"
    if timed_out is not None:
        raise BuildError(f"{what}: build stopped after {report.seconds:.0f} s: the timeout is "
                         f"{float(timeout):g} s ({timed_out} was running; log in {out_dir})",
                         report)
    if tool_failed is not None:
        if report.failed.startswith("fit"):
            raise BuildError(f"{what} does not fit the {board.device}: "
                             f"{'; '.join(report.over()) or tool_failed}", report)
        raise BuildError(f"{what}: {tool_failed} (log in {out_dir})", report)
    if check and not report.fits:
        raise BuildError(f"{what} does not fit the {board.device}: {report.resources_text()}",
                         report)
    if check and not report.timing_met:
        raise BuildError(
            f"{what} misses timing: Fmax {report.fmax_mhz:.2f} MHz < PLL clock "
            f"{report.clock_mhz:.2f} MHz ({report.resources_text()})", report)
