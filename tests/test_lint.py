"""The generated Verilog passes ``verilator --lint-only -Wall`` (waivers: sim/runner.py)."""

import pytest
from support.lint import lint

from tpugen.hdl.config import Config
from tpugen.hdl.verilog import array_verilog, module_names
from tpugen.sim.cache import build_root


def _lint(cfg):
    d = build_root() / "lint" / cfg.name
    d.mkdir(parents=True, exist_ok=True)
    v = d / "tpugen_array.v"
    v.write_text(array_verilog(cfg))
    ok, output = lint(v, module_names()["array"])
    assert ok, output[-3000:]
    assert "%Warning" not in output and "%Error" not in output, output[-3000:]


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (64, 64)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_lint(shape):
    _lint(Config(rows=shape[0], cols=shape[1]))


@pytest.mark.slow
def test_lint_256x256():
    _lint(Config(rows=256, cols=256))
