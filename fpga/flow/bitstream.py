"""Bitstreams for boards with the YoWASP tools from PyPI (no system tools).

``build_board(board, config, freq_mhz, ...)`` elaborates a board design (the PLL, the board's
UART pins and LEDs, and the top: ``fpga.top.BoardTop``, the UART link + bridge + core, or the
array alone, ``fpga.probes.ArrayProbe``), runs Yosys, nextpnr and the packer through the
amaranth-boards platform, and returns a ``fpga.report.BuildReport``: LUTs, FFs, DSPs and block
RAMs (used and available), the PLL clock, nextpnr's Fmax, peak GOPS (``2 * R * C * clock``), the
bitstream and the build time. A design that does not fit, or whose Fmax is below the PLL clock,
raises ``BuildError`` whose one-line message gives those numbers (``check=False`` returns the
report instead).

Products that a board's DSP blocks cannot all take are Booth multipliers in LUTs: the array may
use ``dsp_blocks`` DSP blocks (row-major; the pipelined cell instances them itself, two 8 x 8
products per iCE40 SB_MAC16, one per ECP5 MULT18X18D: ``hdl.dsp``, whose plan is passed to the
top's constructor; on an ECP5 with a known DSP layout, whole columns placed by
``fpga.floorplan``); the other cells' products are mapped by Yosys' ``booth`` pass before
synthesis (the iCE40UP5K has 8 SB_MAC16, the ECP5-85F 156 MULT18X18D).

The tools run as amaranth renders them for the platform, with its overrides
(``script_after_read`` for the Booth mapping, ``synth_opts`` for the board's synthesis options,
``nextpnr_opts`` for nextpnr's JSON report and seed, ``verbose`` for the tools' full output):
``platform.build(..., do_build=False)`` gives the build plan, and its command list
(``build_top.json``) runs here one tool at a time with the YoWASP executables, so that each
tool's output streams to ``progress`` and its time is measured.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from numbers import Real
from pathlib import Path

from amaranth.hdl import ClockDomain, Elaboratable, Module
from amaranth.lib import io

from tpugen.fpga.flow.boards import Board, get_board
from tpugen.fpga.flow.report import BuildReport, read_nextpnr, yosys_ffs
from tpugen.fpga.flow.toolchain import family_tools, tool_env_var, yowasp_env
from tpugen.fpga.gateware.floorplan import MULT18_ROWS, array_floorplan
from tpugen.fpga.gateware.pll import PLLClock, core_clock
from tpugen.fpga.gateware.probes import ArrayProbe
from tpugen.fpga.gateware.top import BoardTop
from tpugen.hdl.block import block_rows
from tpugen.hdl.config import Config
from tpugen.hdl.dsp import dsp_plan
from tpugen.sim.cache import build_root

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


#: nextpnr's progress, as (pattern, what it says): the analytic placer's and the annealer's
#: iterations, the router's (router1's table: arcs still queued, rip-ups; router2's lines:
#: overused wires), the Fmax.
_PROGRESS = (
    (re.compile(r"at iteration #(\d+), type ALL: wirelen solved = (\d+)"),
     "placing (analytic), iteration {0}, wirelength {1}"),
    (re.compile(r"at iteration #(\d+): temp = [\d.]+, timing cost = (\d+), wirelen = (\d+)"),
     "placing (annealing), iteration {0}, timing cost {1}"),
    (re.compile(r"Info:\s+(\d+) \|\s+(\d+)\s+(\d+) \|\s+\d+\s+\d+ \|\s+(\d+)\|"),
     "routing, iteration {0}: {3} arcs queued, {1} rip-ups so far"),
    (re.compile(r"iter=(\d+) wires=(\d+) overused=(\d+)"),
     "routing (router2), iteration {0}: {2} overused wires"),
    (re.compile(r"Info: Routing complete"), "routed"),
    (re.compile(r"Max frequency for clock\s+'[^']+':\s+([\d.]+) MHz"), "Fmax {0} MHz"),
)


def progress_of(line: str) -> str | None:
    """What a tool's output ``line`` says about its progress (placer / router iterations,
    Fmax), or ``None``."""
    for pattern, text in _PROGRESS:
        mm = pattern.search(line)
        if mm:
            return text.format(*mm.groups())
    return None


class ProgressPrinter:
    """A ``progress`` callback for terminals (standard error): a line when a step starts, then
    while it runs a line with its progress (``progress_of``: placer and router iterations) at
    most every ``interval`` seconds, and a dot per 200 other lines."""

    def __init__(self, file=None, interval: float = 20.0):
        self.file = file
        self.interval = interval
        self.lines = 0
        self.started = self.last = 0.0
        self.step = ""

    def __call__(self, step, line):
        out = self.file or sys.stderr
        now = time.monotonic()
        if line is None:
            print(f"\n[{step}] ", end="", file=out, flush=True)
            self.lines, self.step, self.started, self.last = 0, step, now, now
            return
        self.lines += 1
        said = progress_of(line)
        if said is not None and (now - self.last >= self.interval or said.startswith(
                ("routed", "Fmax"))):
            self.last = now
            print(f"\n[{step} {now - self.started:.0f} s] {said}", end="", file=out,
                  flush=True)
        elif self.lines % 200 == 0:
            print(".", end="", file=out, flush=True)


def default_dsp_blocks(board: Board, config: Config, top: str = "board") -> int:
    """The DSP blocks the array may use by default: the board's choice, else what the rest of
    the design leaves. Each parallel activation lane (``acc_width`` x 32 bits, low 64 kept)
    takes 4 DSP blocks on both families (16x16 / 18x18 pieces), serial lanes none."""
    if board.dsp_blocks is not None:
        return board.dsp_blocks
    lanes = config.act_lanes if config.act_mult == "parallel" else 0
    other = 0 if top == "array" else 4 * lanes
    return max(0, board.dsps - other)


def booth_modules(config: Config, dsp_cells) -> list[str]:
    """Yosys selection patterns of the array cells (their RTLIL modules,
    ``<...>.block_<b>.row_<k>.cell_<j>`` as ``hdl.array`` names them) that are not in
    ``dsp_cells``: the cells whose ``$mul`` becomes a Booth multiplier."""
    g = block_rows(config)
    return [f"*.block_{i // g}.row_{i % g}.cell_{j}"
            for i in range(config.rows) for j in range(config.cols) if (i, j) not in dsp_cells]


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


def _check_int(name, value, low=0):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")


def _run(argv, cwd, env, step, progress, deadline=None):
    """Run one tool, its output (stdout and stderr) line by line to ``progress``; returns
    ``(exit status, lines)``, the status ``None`` when it was stopped at ``deadline`` (a
    ``time.monotonic()`` value)."""
    lines = []
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        stopped = threading.Event()
        watchdog = None
        if deadline is not None:
            def stop():
                stopped.set()
                proc.kill()
            watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), stop)
            watchdog.daemon = True
            watchdog.start()
        try:
            for line in proc.stdout:
                line = line.rstrip("\n")
                lines.append(line)
                progress(step, line)
        finally:
            if watchdog is not None:
                watchdog.cancel()
    return (None if stopped.is_set() else proc.returncode), lines


def _children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished child processes."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def build_board(board, config: Config | None = None, freq_mhz: float | None = None, *,
                out_dir=None, progress: Callable | None = None, baud: int | None = None,
                top: str = "board", dsp_blocks: int | None = None, seed: int | None = None,
                check: bool = True, do_pack: bool = True,
                timeout: float | None = DEFAULT_TIMEOUT, floorplan: bool = True) -> BuildReport:
    """Build ``board`` (a name from ``fpga.boards.BOARDS`` or a ``Board``) and report.

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
    with ``check=False``). ``floorplan``: on an ECP5 whose DSP sites ``fpga.floorplan`` knows,
    place the array's DSP cells by its floorplan (whole columns on the DSP rows; the DSP
    budget's remainder goes unused by the array); otherwise the DSP cells are the first
    ``dsp_blocks`` in row-major order, placed by nextpnr.
    """
    board = get_board(board)
    config = board.config if config is None else config
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    freq_mhz = board.clock_mhz if freq_mhz is None else freq_mhz
    if isinstance(freq_mhz, bool) or not isinstance(freq_mhz, Real) or not freq_mhz > 0:
        raise ValueError(f"freq_mhz must be a positive number of MHz, not {freq_mhz!r}")
    baud = board.baud if baud is None else baud
    if top not in TOPS:
        raise ValueError(f"top must be one of {', '.join(TOPS)}, not {top!r}")
    dsp_blocks = default_dsp_blocks(board, config, top) if dsp_blocks is None else dsp_blocks
    _check_int("dsp_blocks", dsp_blocks)
    seed = board.seed if seed is None else seed
    if seed is not None:
        _check_int("seed", seed)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, Real)
                                or not timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, not {progress!r}")
    progress = progress or (lambda step, line: None)
    out_dir = build_dir(board, config, top) if out_dir is None else Path(out_dir)
    family = board.family
    f_in, f_out = board.clk_in_mhz * 1e6, float(freq_mhz) * 1e6
    core_clock(family, f_in, f_out)     # a clock the PLL cannot make: ValueError, here
    tools = family_tools(family, pack=bool(do_pack))
    env = yowasp_env(tools)
    platform = board.make_platform()
    t0 = time.monotonic()
    pll = PLLClock(family, f_in, f_out, pad=board.pll_pad)
    clk_hz = pll.f_achieved
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
    booth = booth_modules(config, dsp_cells)

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
    build_plan = platform.build(BoardWrapper(board, pll, inner), name=_NAME, do_build=False,
                                **overrides)
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
    commands = json.loads(build_plan.files[f"build_{_NAME}.json"])["commands"]

    report = BuildReport(board=board.name, device=board.device, config=config, top=top,
                         clock_mhz=clk_hz / 1e6, dsp_cells=len(dsp_cells),
                         booth_cells=len(booth), log=out_dir / f"{_NAME}.tim")
    tool_failed = None
    timed_out = None
    deadline = None if timeout is None else t0 + float(timeout)
    for cmd in commands:
        tool = cmd[0]
        if tool not in tools:
            continue
        progress(tool, None)
        ts = time.monotonic()
        cpu = _children_cpu()
        rc, lines = _run([env[tool_env_var(tool)], *cmd[1:]], out_dir, env, tool, progress,
                         deadline)
        report.step_seconds[tool] = round(time.monotonic() - ts, 1)
        report.cpu_seconds = round(report.cpu_seconds + _children_cpu() - cpu, 1)
        if rc is None:
            timed_out = tool
            tool_failed = f"stopped {tool} at the {float(timeout):g} s timeout"
            break
        if tool == "yosys":
            rpt = out_dir / f"{_NAME}.rpt"
            text = rpt.read_text(errors="replace") if rpt.is_file() else "\n".join(lines)
            report.ffs = (yosys_ffs(text), board.resources["ffs"])
        elif tool.startswith("nextpnr"):
            read_nextpnr(report, family, out_dir / "report.json", "\n".join(lines))
        if rc != 0:
            tail = [ln for ln in lines if "ERROR" in ln or "Error" in ln] or lines[-3:]
            tool_failed = f"{tool} failed (exit {rc}): {tail[-1].strip() if tail else ''}"
            break
    report.seconds = round(time.monotonic() - t0, 1)
    bitstream = bitstream_path(board, out_dir)
    if do_pack and tool_failed is None and bitstream.is_file():
        report.bitstream = bitstream
    over = report.over()
    if tool_failed is not None:
        no_fit = over or _NO_FIT.search(tool_failed)
        report.failed = f"fit: {tool_failed}" if no_fit else tool_failed
    (out_dir / "build_report.json").write_text(json.dumps(report.to_dict(), indent=2))

    what = f"{board.name} {config.rows}x{config.cols}"
    if timed_out is not None:
        raise BuildError(f"{what}: build stopped after {report.seconds:.0f} s: the timeout is "
                         f"{float(timeout):g} s ({timed_out} was running; log in {out_dir})",
                         report)
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
