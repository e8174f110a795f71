"""The tpugen command line: outputs, one-line errors, and the demo's FAIL on a fault."""

import json
import shutil
import subprocess
import sys

import pytest

from tpugen.sim.cache import build_root
from tpugen.sim.tools import verilator_env, verilator_root


def tpugen(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "tpugen.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_verilog_writes_files_that_both_simulators_accept():
    out = build_root() / "cli_x"
    shutil.rmtree(out, ignore_errors=True)
    r = tpugen("verilog", "--rows", "3", "--cols", "5", "-o", str(out))
    assert r.returncode == 0, r.stderr
    v = out / "tpugen_array.v"
    assert json.loads((out / "config.json").read_text())["cols"] == 5
    assert "act__payload" in (out / "ports.md").read_text()
    text = v.read_text()
    assert "fault" not in text, "the debug option must leave no trace in normal Verilog"
    iv = subprocess.run(["iverilog", "-g2005", "-o", str(out / "a.vvp"), str(v)],
                        capture_output=True, text=True)
    assert iv.returncode == 0, iv.stderr
    vl = subprocess.run([str(verilator_root() / "bin" / "verilator"), "--lint-only",
                         "-Wno-fatal", "--top-module", "tpugen_array", str(v)],
                        capture_output=True, text=True, env=verilator_env())
    assert vl.returncode == 0, vl.stderr


def test_verilog_core_top():
    out = build_root() / "cli_core"
    r = tpugen("verilog", "--rows", "2", "--cols", "3", "--top", "core", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "module tpugen_core" in (out / "tpugen_core.v").read_text()


@pytest.mark.parametrize("args,word", [
    (["verilog", "--rows", "0", "--cols", "4"], "rows"),
    (["verilog", "--rows", "4", "--cols", "300"], "cols"),
    (["verilog", "--rows", "4", "--cols", "4", "--acc-width", "8"], "acc_width"),
    (["verilog", "--rows", "x", "--cols", "4"], "--rows"),
    (["verilog", "--rows", "2", "--cols", "2", "--debug-fault-cell", "5,0"], "fault"),
    (["sim", "--m", "0", "--k", "2", "--n", "2", "--backend", "model"], "m must be"),
    (["sim", "--m", "2", "--k", "2", "--n", "2", "--backend", "nope"], "--backend"),
    (["verilog", "--config", "/nonexistent.json"], "--config"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments_one_line_exit_2(args, word):
    r = tpugen(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("tpugen: error:") and word in lines[0]
    assert "Traceback" not in r.stderr


def test_sim_model_pass():
    r = tpugen("sim", "--rows", "3", "--cols", "5", "--m", "7", "--k", "9", "--n", "11",
               "--backend", "model")
    assert r.returncode == 0 and r.stdout.strip().endswith("PASS"), r.stdout


def test_demo_fails_with_a_fault():
    """The test of the tests, end to end: the demo with a corrupted cell prints FAIL."""
    r = tpugen("demo", "--sim", "icarus", "--debug-fault-cell", "2,3", timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL" in r.stdout.splitlines()
    assert "differ from NumPy" in r.stdout
