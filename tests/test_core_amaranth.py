"""The core, flat-elaborated, on the Amaranth simulator (the ``amaranth`` backend): compiled
GEMMs / layer chains, requantization edges, fuzzed and error programs with random stalls, exact
cycle counts without stalls, the fault option, and regression tests of bugs the suite found."""

import numpy as np
import pytest
from amaranth.hdl import Assert, Signal
from support.core_cases import QUANT_CASES, Case, check_results, error_cases, gemm_cases
from support.random_programs import random_program
from support.timing_cases import timing_cases

import tpugen.hdl.core
from tpugen.backends import get_backend
from tpugen.compiler import compile_gemm
from tpugen.hdl.accumulator import ACC_REPEAT_GAP, ACC_WRITE_LATENCY, AccumulatorBuffer
from tpugen.hdl.config import Config
from tpugen.hdl.unified_buffer import UnifiedBuffer
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.random_data import int8_data

CONFIGS = [
    # act_lanes = 2 < C (3 cycles per activation row) and a FIFO of one tile.
    Config(rows=3, cols=5, act_lanes=2, weight_fifo_depth=1, ub_rows=64, acc_rows=32),
    # Square (MLP), sums wrap at 20 bits.
    Config(rows=4, cols=4, acc_width=20, weight_fifo_depth=2, ub_rows=64, acc_rows=32),
]
IDS = [c.name for c in CONFIGS]
STALLS = (0.2, 0.3, 0.3)


def batch(config, seed):
    """A GEMM, the corners, requantization edges, fuzzed programs and one error program per
    cause for the first config; layer chains, the wrapping long accumulation and a few more
    for the second (kept small: every program elaborates the core again)."""
    rng = np.random.default_rng(seed)
    R, C = config.rows, config.cols
    if config is CONFIGS[0]:
        cases = gemm_cases(config, rng, shapes=[(R + 1, 2 * R + 1, C + 2)], random_shapes=0,
                           quant_cases=[QUANT_CASES[k] for k in (0, 2, 4)], chain=False)
        cases += [Case(f"fuzz{k}", random_program(config, rng, length=30)) for k in range(2)]
        return cases + error_cases(config, rng)
    cases = gemm_cases(config, rng, shapes=[(1, 1, 1)], random_shapes=1,
                       quant_cases=QUANT_CASES[3:4] + QUANT_CASES[6:])
    cases = [c for c in cases if c.name not in ("all_minus128", "127_times_minus128")]
    cases += [Case("fuzz", random_program(config, rng, length=30))]
    return cases + error_cases(config, rng)[3:]


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_batch_with_stalls(config):
    cases = batch(config, seed=config.rows)
    results = get_backend("amaranth", config).run_many([c.program for c in cases],
                                                        stalls=STALLS, seed=3)
    assert check_results(config, cases, results) == []
    if config.acc_width < 32:
        # Some int32 result really wrapped (on the golden model's output).
        wrapped = [c.name for c in cases if c.exact is not None
                   and not np.array_equal(c.compiled.decode(Machine(config).run(c.program)),
                                          c.exact)]
        assert wrapped


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_exact_cycles_without_stalls(config):
    """Cycle counts equal the ones derived from the documented timing (``timing_cases``)."""
    ms = (1, config.rows + 1) if config is CONFIGS[0] else (2,)
    cases = timing_cases(config, np.random.default_rng(1), ms=ms)
    results = get_backend("amaranth", config).run_many([p for _, p, _ in cases])
    got = {name: r.cycles for (name, _, _), r in zip(cases, results, strict=True)}
    assert got == {name: cycles for name, _, cycles in cases}
    for (name, p, _), r in zip(cases, results, strict=True):
        assert r.mismatches == [], name
        L = config.rows + config.cols - 1
        if name.startswith("mm"):
            m = p[2].fields["n"]
            assert r.cycles >= config.rows + m + L + m


def test_fault_is_caught():
    """The test of the tests: one corrupted cell makes a GEMM mismatch."""
    config = CONFIGS[0]
    rng = np.random.default_rng(4)
    c = compile_gemm(config, int8_data(rng, (5, 7)), int8_data(rng, (7, 6)))
    cases = [Case("gemm", c.program)]
    r = get_backend("amaranth", config, fault=(1, 2)).run_many([c.program])
    assert r[0].mismatches
    assert check_results(config, cases, r)


# --- known bugs: minimal reproductions ---------------------------------------------------------
SMALL = Config(rows=2, cols=3, ub_rows=8, acc_rows=4)


@pytest.mark.parametrize("second", ["nop", "bad_opcode"])
def test_sync_beat_is_a_snapshot(second):
    p = Program(SMALL).sync()
    p.nop() if second == "nop" else p.raw(13, [[1]])
    p.sync()
    r = get_backend("amaranth", SMALL).run(p, stalls=(0.0, 0.0, 0.9), seed=0)
    # Expected beat 0: [SYNC_MAGIC, 0, 0] (nothing retired before the first SYNC, no error).
    assert r.mismatches == []


def test_quant_parameters_after_reset():
    rng = np.random.default_rng(2)
    p = Program(SMALL).read_weights(int8_data(rng, (2, 3))).read_host(0, int8_data(rng, (2, 2)))
    p.matmul(0, 0, 2).activate(0, 2, 2).write_host(2, 2).sync()
    r = get_backend("amaranth", SMALL).run(p)
    assert r.mismatches == []


def test_weight_fifo_capacity_two_throughput():
    config = Config(rows=2, cols=5, weight_fifo_depth=1, ub_rows=16, acc_rows=8)
    name, p, cycles = [c for c in timing_cases(config, 0, ms=(1,)) if c[0] == "mm_m1"][0]
    r = get_backend("amaranth", config).run(p)
    assert r.mismatches == []
    assert r.cycles == cycles


def test_narrow_counters_count_the_same():
    """``counter_width`` narrows the status counters' registers, not what they count: a short
    program reports the same counters with 40-bit counters as with 64-bit ones."""
    wide = Config(rows=2, cols=3, ub_rows=16, acc_rows=16)
    narrow = wide.replace(counter_width=40)
    rng = np.random.default_rng(4)
    a, b = int8_data(rng, (3, 4)), int8_data(rng, (4, 5))
    program = compile_gemm(wide, a, b).program
    runs = [get_backend("amaranth", c).run_many([compile_gemm(c, a, b).program],
                                                  stalls=STALLS, seed=2)[0]
            for c in (wide, narrow)]
    assert runs[0].counters == runs[1].counters
    # The counters count what happened: every instruction retired, and at least a cycle for
    # each host-in and host-out beat (a stream moves one beat a cycle).
    assert runs[0].counters["retired"] == Machine(wide).run(program).retired == len(program)
    beats = len(program.host_in_beats()[0]) + len(runs[0].host_out)
    assert runs[0].counters["cycles"] >= beats


# --- the buffers' rules, which their block RAMs rely on, hold in the core ----------------------
class CheckedAccumulator(AccumulatorBuffer):
    """Asserts the accumulator's rules (the simulation stops on a violation): requests to a
    row ``ACC_REPEAT_GAP`` cycles apart at least, no read of a row within
    ``ACC_WRITE_LATENCY`` cycles of a request to it."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        past = [(self.wr_valid, self.wr_addr)]
        for k in range(max(ACC_REPEAT_GAP, ACC_WRITE_LATENCY) - 1):
            v, a = Signal(name=f"chk_v{k}"), Signal.like(self.wr_addr, name=f"chk_a{k}")
            m.d.sync += [v.eq(past[-1][0]), a.eq(past[-1][1])]
            past.append((v, a))
        for v, a in past[1:ACC_REPEAT_GAP]:
            m.d.sync += Assert(~(self.wr_valid & v & (a == self.wr_addr)),
                               "accumulator: a row requested again too soon")
        for v, a in past[:ACC_WRITE_LATENCY]:
            m.d.sync += Assert(~(self.rd_en & v & (a == self.rd_addr)),
                               "accumulator: a row read too soon after a request")
        return m


class CheckedUnifiedBuffer(UnifiedBuffer):
    """Asserts that no read port reads a row in the cycle it is written."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        for n in range(2):
            en, addr = getattr(self, f"rd{n}_en"), getattr(self, f"rd{n}_addr")
            m.d.sync += Assert(~(self.wr_en & (self.wr_mask != 0) & en & (addr == self.wr_addr)),
                               f"unified buffer: read port {n} reads the row being written")
        return m


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_buffer_rules_hold(config, monkeypatch):
    """The core keeps the buffers' rules that let their block RAMs go without collision logic
    (``no_rw_check``) and the accumulator without a bypass, on fuzzed programs, GEMMs and
    back-to-back accumulating MATMULs with stalls: a violation stops the simulation."""
    monkeypatch.setattr(tpugen.hdl.core, "AccumulatorBuffer", CheckedAccumulator)
    monkeypatch.setattr(tpugen.hdl.core, "UnifiedBuffer", CheckedUnifiedBuffer)
    rng = np.random.default_rng(11)
    R, C = config.rows, config.cols
    programs = [random_program(config, rng, length=40) for _ in range(2)]
    programs.append(compile_gemm(config, int8_data(rng, (2 * R + 1, 2 * R)),
                                 int8_data(rng, (2 * R, C + 1))).program)
    p = Program(config).read_weights(int8_data(rng, (R, C))).read_host(0, int8_data(rng, (2, R)))
    for k in range(4):      # the same rows, again and again, back to back
        p.matmul(0, 0, 1 + k % 2, accumulate=k > 0, new_tile=k == 0)
    programs.append(p.activate(0, 4, 2).write_host(0, 2, from_acc=True).sync())
    for stalls in ((0.0, 0.0, 0.0), STALLS):
        results = get_backend("amaranth", config).run_many(programs, stalls=stalls, seed=5)
        assert all(r.mismatches == [] for r in results)
