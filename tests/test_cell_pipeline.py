"""The whole core as FPGA builds configure it: the pipelined MAC cell (``cell_pipeline``), and
for small FPGAs serial activation multipliers and 40-bit counters:
compiled GEMMs, fuzzed programs and exact cycle counts on the Amaranth simulator and on
Verilator, against the golden model (the core's drain interlock must follow the longer array
latency, or results are read before they are written)."""

import numpy as np
import pytest
from support.core_cases import Case, check_results, gemm_cases
from support.random_programs import random_program
from support.timing_cases import timing_cases

from tpugen.backends import get_backend
from tpugen.hdl.array import array_latency
from tpugen.hdl.config import Config

CONFIG = Config(rows=3, cols=4, act_lanes=2, cell_pipeline=2, weight_fifo_depth=2,
                ub_rows=64, acc_rows=32)
#: What small FPGAs use: serial activation multipliers, 40-bit counters.
SMALL = CONFIG.replace(act_lanes=1, act_mult="serial", counter_width=40)


def cases(config, seed):
    rng = np.random.default_rng(seed)
    out = gemm_cases(config, rng, shapes=[(4, 7, 5)], random_shapes=1, chain=False,
                     quant_cases=[])
    return out + [Case(f"fuzz{k}", random_program(config, rng, length=30)) for k in range(2)]


def test_latency_grows_with_the_pipeline():
    assert array_latency(CONFIG) == array_latency(CONFIG.replace(cell_pipeline=0)) + 2


@pytest.mark.parametrize("sim,config", [("amaranth", CONFIG), ("verilator", SMALL)],
                         ids=["amaranth", "verilator-small"])
def test_programs_with_stalls(sim, config):
    batch = cases(config, seed=5)
    results = get_backend(sim, config).run_many([c.program for c in batch],
                                                stalls=(0.2, 0.3, 0.3), seed=1)
    assert check_results(config, batch, results) == []


@pytest.mark.parametrize("sim,config", [("amaranth", CONFIG), ("amaranth", SMALL),
                                        ("verilator", SMALL)],
                         ids=["amaranth", "amaranth-small", "verilator-small"])
def test_exact_cycles(sim, config):
    timing = timing_cases(config, np.random.default_rng(2))
    results = get_backend(sim, config).run_many([p for _, p, _ in timing])
    got = {name: r.cycles for (name, _, _), r in zip(timing, results, strict=True)}
    assert got == {name: cycles for name, _, cycles in timing}
