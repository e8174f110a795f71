"""The hierarchical array Verilog on Icarus and Verilator, checked by tb/test_array.py."""

import pytest
from support.array_build import build_array

from tpugen.hdl.config import Config
from tpugen.tb import ARRAY_TEST_MODULE

SIMS = ["icarus", "verilator"]
# The shapes the foundation asks for, with acc_width 16 and 18 (where sums really wrap) folded
# into them, and 20 x 18, whose long skew lines are memories (hdl.delay.MEMORY_DELAY_MIN).
CONFIGS = [
    Config(rows=1, cols=1),
    Config(rows=3, cols=5, acc_width=16),
    Config(rows=8, cols=8, acc_width=18),
    Config(rows=16, cols=4),
    Config(rows=20, cols=18),
    Config(rows=5, cols=3, cell_pipeline=2),
]
ARRAY_TESTS = 4  # tests in tb/test_array.py
#: Configs also run on Verilator in the default suite (a Verilator build is about a minute each):
#: a non-square array whose sums wrap, and one whose skew lines are memories; the others run
#: on Verilator in ``make test-slow``.
VERILATOR_DEFAULT = {"r3c5_int8_a16", "r20c18_int8_a32"}


def _cases():
    for cfg in CONFIGS:
        for sim in SIMS:
            marks = [pytest.mark.slow] if sim == "verilator" and cfg.name not in \
                VERILATOR_DEFAULT else []
            yield pytest.param(cfg, sim, marks=marks, id=f"{cfg.name}-{sim}")


def run(cfg, sim, *, fault=None, testcase=None, name="tests"):
    b = build_array(cfg, sim, fault=fault)
    env = {"TPUGEN_CONFIG": cfg.to_json(), "TPUGEN_SEED": "7"}
    return b.run(ARRAY_TEST_MODULE, env=env, testcase=testcase, seed=7, name=name)


@pytest.mark.parametrize("cfg,sim", list(_cases()))
def test_array(cfg, sim):
    tests, failed = run(cfg, sim)
    assert tests == ARRAY_TESTS
    assert failed == 0


@pytest.mark.slow
@pytest.mark.parametrize("sim", SIMS)
def test_array_64x64(sim):
    tests, failed = run(Config(rows=64, cols=64), sim)
    assert tests == ARRAY_TESTS
    assert failed == 0


@pytest.mark.parametrize("sim", SIMS)
def test_fault_is_caught(sim):
    """The test of the tests: one corrupted cell makes the testbench fail."""
    cfg = Config(rows=3, cols=5)
    tests, failed = run(cfg, sim, fault=(1, 2), name="fault")
    assert tests == ARRAY_TESTS
    assert failed == ARRAY_TESTS
