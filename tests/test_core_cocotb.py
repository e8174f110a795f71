"""The generated core Verilog on Icarus (cocotb, tb/test_core.py) and Verilator (the compiled
harness, and once the cocotb testbench): for each (config, simulator) one simulator process runs
a batch of compiled GEMMs / layer chains, corners, requantization edges, fuzzed programs and error
programs with random stalls on all three streams, plus a reset in the middle of a program; the
three harnesses give identical results, counters and cycle counts with and without stalls; exact
cycle counts without stalls agree with the documented timing; a faulty cell is caught."""

import functools
import zlib

import numpy as np
import pytest
from support.core_cases import Case, check_results, error_cases, gemm_cases
from support.random_programs import random_program
from support.timing_cases import timing_cases

from tpugen.backends import get_backend
from tpugen.compiler import compile_gemm
from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.random_data import int8_data

SIMS = ["icarus", "verilator"]          # cocotb + Icarus, compiled Verilator harness
HARNESSES = ("verilator", "verilator-cocotb", "icarus")
CONFIGS = [
    Config(rows=4, cols=4, ub_rows=256, acc_rows=128),
    Config(rows=3, cols=5, ub_rows=256, acc_rows=128),
    Config(rows=8, cols=2, acc_width=18, ub_rows=256, acc_rows=128),
]
IDS = [c.name for c in CONFIGS]
STALLS = (0.2, 0.3, 0.3)    # cmd gap, host-in gap, host-out not ready
CORE_TESTS = 2              # cocotb tests in tb/test_core.py


@functools.cache
def batch(config):
    """The programs of one (config, simulator) run, the same for both simulators."""
    rng = np.random.default_rng(zlib.crc32(config.name.encode()))
    cases = gemm_cases(config, rng, random_shapes=2)
    cases += [Case(f"fuzz{k}", random_program(config, rng, length=30)) for k in range(10)]
    cases += error_cases(config, rng)
    return cases, reset_midway(config, rng)


def reset_midway(config, rng):
    """Reset while a long MATMUL is in the array (vectors, tags and accumulator writes in
    flight), then a fresh program whose ACC window the MATMUL's rows overlap.

    Every command and host-in beat of the interrupted program is taken well before the reset:
    the testbench crashes when a stream source is mid-transfer at a reset (see
    ``test_reset_while_a_source_is_mid_transfer``)."""
    R, C = config.rows, config.cols
    n = min(config.ub_rows, config.acc_rows)
    interrupted = Program(config).read_weights(int8_data(rng, (R, C))).read_host(
        0, int8_data(rng, (4, R))).matmul(0, 0, n)
    fresh = random_program(config, rng, length=25)
    return interrupted, fresh, 70


@pytest.mark.parametrize("sim", SIMS)
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_core_batch(config, sim):
    cases, reset_midway = batch(config)
    backend = get_backend(sim, config)
    results = backend.run_many([c.program for c in cases], stalls=STALLS, seed=11,
                               reset_midway=reset_midway, name="batch")
    assert check_results(config, cases, results) == []
    if sim == "verilator":     # the compiled harness: every run (and the reset's) checked
        assert (backend.last_tests, backend.last_failed) == (len(cases) + 1, 0)
        assert backend.last_reset_result.mismatches == []
    else:
        assert (backend.last_tests, backend.last_failed) == (CORE_TESTS, 0)


@pytest.mark.parametrize("stalls", [(0.0, 0.0, 0.0), STALLS], ids=["full_rate", "stalls"])
def test_harnesses_agree(stalls):
    """The compiled Verilator harness, the cocotb one on Verilator and on Icarus: the same
    host-out beats, error causes, counters and cycle counts for the same programs and stall
    pattern (every harness draws from ``sim.stalls`` in the same cycles)."""
    config = CONFIGS[1]
    cases, _ = batch(config)
    cases = cases[::3]
    seen = {}
    for name in HARNESSES:
        backend = get_backend(name, config)
        results = backend.run_many([c.program for c in cases], stalls=stalls, seed=5,
                                   name="agree")
        assert check_results(config, cases, results) == [], name
        seen[name] = [(r.host_out.tolist(), r.last.tolist(), r.error, r.counters, r.cycles)
                      for r in results]
    for name in HARNESSES[1:]:
        for case, a, b in zip(cases, seen[HARNESSES[0]], seen[name], strict=True):
            assert a == b, f"{case.name}: {HARNESSES[0]} and {name} differ"


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_batch_contents(config):
    """What the batch must hold, on the golden model: every cause, layer chains, and
    with acc_width = 18 sums that really wrap."""
    cases, _ = batch(config)
    names = [c.name for c in cases]
    assert {"all_minus128", "long_k_m1"} <= set(names)
    assert sum(n.startswith("fuzz") for n in names) == 10
    for cause in ("BAD_OPCODE", "OUT_OF_RANGE", "NO_TILE", "WEIGHT_OVERFLOW", "HOST_FRAMING"):
        assert any(n.startswith(f"error_{cause}_") for n in names)
    assert {"chain_int32", "chain_int8"} <= set(names)
    if config.acc_width < 32:
        wrapped = [c.name for c in cases if c.exact is not None
                   and not np.array_equal(c.compiled.decode(Machine(config).run(c.program)),
                                          c.exact)]
        assert "all_minus128" in wrapped and "long_k_m1" in wrapped


@pytest.mark.parametrize("config", [CONFIGS[1]], ids=[CONFIGS[1].name])
def test_exact_cycles(config):
    """Without stalls, Icarus, Verilator and the Amaranth simulator take exactly the cycles
    derived from the design's documented timing (``sim.timing_cases``)."""
    cases = timing_cases(config, np.random.default_rng(3), ms=(1, 2, config.rows + 2))
    programs = [p for _, p, _ in cases]
    expected = {name: cycles for name, _, cycles in cases}
    got = {}
    for sim in (*SIMS, "verilator-cocotb", "amaranth"):
        backend = get_backend(sim, config)
        results = backend.run_many(programs, name="cycles")
        assert all(r.mismatches == [] for r in results), sim
        got[sim] = {name: r.cycles for (name, _, _), r in zip(cases, results, strict=True)}
    assert got["icarus"] == got["verilator"] == got["verilator-cocotb"] == got["amaranth"]
    assert got["icarus"] == expected
    R, C = config.rows, config.cols
    for name, p, _ in cases:
        if name.startswith("mm"):
            m = p[2].fields["n"]
            assert got["icarus"][name] >= R + m + (m + R + C - 1) + m


def test_fault_is_caught():
    """The test of the tests: one corrupted cell makes the batch report mismatches."""
    config = CONFIGS[1]
    rng = np.random.default_rng(8)
    cases = [Case("gemm", compile_gemm(config, int8_data(rng, (6, 7)),
                                       int8_data(rng, (7, 9))).program),
             Case("fuzz", random_program(config, rng, length=20))]
    backend = get_backend("icarus", config, fault=(1, 2))
    results = backend.run_many([c.program for c in cases], stalls=STALLS, name="fault")
    assert all(r.mismatches for r in results)
    assert len(check_results(config, cases, results)) == 2
    assert (backend.last_tests, backend.last_failed) == (CORE_TESTS, 1)


def test_reset_while_a_source_is_mid_transfer():
    """Reset ~100 cycles into a compiled GEMM (commands and host-in beats still queued)."""
    config = CONFIGS[1]
    rng = np.random.default_rng(5)
    R, C = config.rows, config.cols
    gemm = compile_gemm(config, int8_data(rng, (24, 3 * R + 1)),
                        int8_data(rng, (3 * R + 1, 2 * C + 1))).program
    backend = get_backend("icarus", config)
    backend.run_many([], reset_midway=(gemm, Program(config).sync(), 100), name="reset")
    assert (backend.last_tests, backend.last_failed) == (CORE_TESTS, 0)
