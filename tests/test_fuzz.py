"""The program fuzzers (tests/support/random_programs.py, tests/support/error_programs.py): their
programs are valid, cover what they should, do not depend on the state a reset leaves, and error
programs
report exactly their cause. Mostly on the golden model; a few programs on the Amaranth backend
with stalls."""

import numpy as np
import pytest
from support.core_cases import Case, check_results, error_cases
from support.error_programs import ERROR_VARIANTS, error_program
from support.random_programs import random_program

from tpugen.backends import get_backend
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.quant_beats import RawSet

Op, Flag, Cause = isa.Op, isa.Flag, isa.Cause

CONFIGS = [
    Config(rows=4, cols=4, ub_rows=64, acc_rows=32, weight_tiles=6, program_words=24),
    Config(rows=3, cols=5, ub_rows=64, acc_rows=32, weight_fifo_depth=2, act_lanes=2,
           weight_tiles=3, program_words=16),
    Config(rows=8, cols=2, ub_rows=50, acc_rows=24, acc_width=18, weight_fifo_depth=1),
    Config(rows=1, cols=1, ub_rows=8, acc_rows=4, weight_fifo_depth=1),
]
IDS = [c.name for c in CONFIGS]
SEEDS = range(12)


def poisoned_run(config, program, seed):
    """Run from a state a reset may leave in the hardware: random buffers, parameter sets."""
    rng = np.random.default_rng(seed)
    m = Machine(config)
    m.ub[:] = rng.integers(-128, 128, m.ub.shape)
    m.acc[:] = rng.integers(-(1 << 15), 1 << 15, m.acc.shape)
    for raw in m.quant:
        for b in range(isa.QUANT_BEATS):
            raw.write_beat(b, rng.integers(-128, 128, config.cols))
    return m.run(program, reset=False)


def fifo_trace(config, program):
    """Check the weight-FIFO rules on the steps of a valid program; return the MATMUL flags."""
    untaken, taken, flags = 0, False, []
    pmem, store = {}, None       # the program memory; a STORE's words: [next address, left]
    fields = []
    for step in program:
        f = step.fields
        if store:
            pmem[store[0]] = step.word
            store = [store[0] + 1, store[1] - 1] if store[1] > 1 else None
            continue
        if f["op"] == Op.PROGRAM and f["flags"] & 3 == Flag.STORE:
            store = [f["dst"], f["n"]] if f["n"] else None
        elif f["op"] == Op.PROGRAM and f["flags"] & 3 == 0:
            fields += [isa.decode(pmem[a]) for a in range(f["src"], f["src"] + f["n"])]
        fields.append(f)
    for f in fields:
        if f["op"] in (Op.READ_WEIGHTS, Op.LOAD_WEIGHTS):
            untaken += f["n"]
            assert untaken <= config.weight_fifo_depth
        elif f["op"] == Op.MATMUL:
            if f["flags"] & Flag.NEW_TILE:
                assert untaken > 0
                untaken, taken = untaken - 1, True
            else:
                assert taken
            flags.append(f["flags"])
    return flags


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_random_programs_are_valid_and_reset_independent(config):
    for seed in SEEDS:
        p = random_program(config, seed)
        r = Machine(config).run(p)
        assert r.error == Cause.NONE, (seed, r.error_step, str(p[r.error_step]))
        assert r.host_in_left == 0
        assert p[-1].fields["op"] == Op.SYNC
        fifo_trace(config, p)
        poisoned = poisoned_run(config, p, seed)
        assert r.mismatches(poisoned.host_out, poisoned.last) == [], seed


def test_random_programs_cover_the_interesting_cases():
    seen = set()
    for config in CONFIGS[:3]:
        for seed in SEEDS:
            p = random_program(config, seed)
            flags = fifo_trace(config, p)
            if any(not f & Flag.NEW_TILE for f in flags):
                seen.add("tile reuse")
            if any(f & Flag.ACCUMULATE for f in flags) and any(
                    not f & Flag.ACCUMULATE for f in flags):
                seen.add("accumulate and overwrite")
            data, _ = p.host_in_beats()
            if (data == -128).any() and (data == 127).any():
                seen.add("int8 edges")
            prev = None
            mm_seen = False
            recent = []          # (op, buffer, lo, hi, write) of the last 4 instructions
            for step in p:
                f = step.fields
                op = f["op"]
                seen.add(Op(op).name)
                if op == Op.MATMUL and f["n"] == 1 and f["flags"] & Flag.ACCUMULATE and (
                        prev is not None and prev["op"] == Op.MATMUL and prev["n"] == 1
                        and prev["flags"] & Flag.ACCUMULATE and prev["dst"] == f["dst"]):
                    seen.add("back-to-back accumulate n=1")
                if op == Op.READ_WEIGHTS and mm_seen:
                    seen.add("interleaved READ_WEIGHTS")
                mm_seen |= op == Op.MATMUL
                if op == Op.READ_QUANT:
                    for k in range(f["n"]):
                        raw = RawSet.zeros(config.cols)
                        for b in range(isa.QUANT_BEATS):
                            raw.write_beat(b, step.data[k * isa.QUANT_BEATS + b])
                        seen.update(f"mult={v}" for v in raw.mult.tolist())
                        seen.update(f"shift={v}" for v in raw.shift.tolist())
                        seen.update(f"bias={v}" for v in raw.bias.tolist())
                        seen.add(f"zp={raw.zp}")
                        if raw.lo > raw.hi:
                            seen.add("crossed bounds")
                if op == Op.ACTIVATE:
                    seen.add(f"qset={f['flags']}")
                if op == Op.WRITE_HOST and not f["flags"] & Flag.FROM_ACC and f["part"]:
                    seen.add("WRITE_HOST part > 0")
                if op == Op.ACTIVATE and f["part"]:
                    seen.add("ACTIVATE part > 0")
                if prev is not None and prev["op"] == Op.SYNC and op != Op.WRITE_HOST:
                    seen.add("SYNC then not WRITE_HOST")
                touches = isa.accesses(f, config)
                for buf, lo, hi, w in touches:
                    for op2, buf2, lo2, hi2, w2 in recent:
                        if buf == buf2 and lo < hi2 and lo2 < hi:
                            if w and not w2:
                                seen.add(f"{Op(op).name} writes rows {Op(op2).name} read")
                            if w2 and not w:
                                seen.add(f"{Op(op).name} reads rows {Op(op2).name} wrote")
                recent = ([(op, *t) for t in touches] + recent)[:6]
                prev = f
    expected = {
        "tile reuse", "accumulate and overwrite", "int8 edges", "back-to-back accumulate n=1",
        "interleaved READ_WEIGHTS", "WRITE_HOST part > 0", "ACTIVATE part > 0",
        "shift=0", "shift=-32", "shift=31", f"mult={(1 << 31) - 1}", f"mult={-(1 << 31)}",
        f"bias={(1 << 31) - 1}", f"bias={-(1 << 31)}", "zp=-128", "zp=127", "crossed bounds",
        "qset=0", "qset=1", "ACTIVATE reads rows READ_QUANT wrote",
        "READ_QUANT writes rows ACTIVATE read",
        "READ_HOST writes rows MATMUL read", "READ_HOST writes rows WRITE_HOST read",
        "ACTIVATE writes rows MATMUL read", "MATMUL reads rows READ_HOST wrote",
        "MATMUL reads rows ACTIVATE wrote", "ACTIVATE reads rows MATMUL wrote",
        "WRITE_HOST reads rows MATMUL wrote", "WRITE_HOST reads rows ACTIVATE wrote",
        "MATMUL writes rows ACTIVATE read", "MATMUL writes rows WRITE_HOST read",
        "SYNC then not WRITE_HOST", *(op.name for op in Op),
    }
    assert expected - seen == set()


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
@pytest.mark.parametrize("cause", list(ERROR_VARIANTS), ids=lambda c: c.name)
def test_error_programs_report_exactly_their_cause(config, cause):
    for variant in ERROR_VARIANTS[cause]:
        for seed in range(2):
            try:
                p = error_program(config, cause, seed, variant=variant)
            except ValueError:
                # Only a FIFO of one R = 1 tile cannot have an early last in READ_WEIGHTS.
                assert variant == "weights_early" and config.rows * config.weight_fifo_depth < 2
                continue
            r = Machine(config).run(p)
            assert r.error == cause, (variant, seed, r.error, r.error_step)
            assert 0 < r.error_step < len(p) - 1
            assert r.host_in_left == 0
            # Correct instructions after the failing one send their results.
            after = sum(1 for s in p.steps[r.error_step + 1:] if s.fields["op"] == Op.WRITE_HOST)
            assert after >= 3
            poisoned = poisoned_run(config, p, seed)
            assert r.mismatches(poisoned.host_out, poisoned.last) == [], (variant, seed)


def test_error_programs_attach_exactly_the_discarded_data():
    """Replacing the failing step (and the host data attached to it) by a NOP changes nothing
    but the SYNC beats' cause lane: the data attached is exactly what the drop discards."""
    config = CONFIGS[1]
    for cause, variants in ERROR_VARIANTS.items():
        if cause == Cause.HOST_FRAMING:
            continue     # framing errors write part of their data: no NOP equivalent
        for variant in variants:
            p = error_program(config, cause, 5, variant=variant)
            r = Machine(config).run(p)
            q = Program(config, [s if k != r.error_step else Program(config).nop()[0]
                                 for k, s in enumerate(p)])
            rq = Machine(config).run(q)
            assert rq.error == Cause.NONE
            sync = r.host_out[:, 0] == isa.SYNC_MAGIC
            assert np.array_equal(r.host_out[~sync], rq.host_out[~sync]), variant
            assert (r.host_out[sync, 1] != rq.host_out[sync, 1]).any()


def test_error_program_rejects_bad_arguments():
    config = CONFIGS[0]
    with pytest.raises(ValueError, match="NONE"):
        error_program(config, Cause.NONE, 0)
    with pytest.raises(ValueError, match="variant"):
        error_program(config, Cause.NO_TILE, 0, variant="op7")
    with pytest.raises(ValueError, match="weights_early"):
        error_program(CONFIGS[3], Cause.HOST_FRAMING, 0, variant="weights_early")
    with pytest.raises(TypeError):
        random_program(None, 0)


@pytest.mark.parametrize("memories", [False, True], ids=["plain", "memories"])
def test_fuzz_on_amaranth_with_stalls(memories):
    config = Config(rows=3, cols=2, ub_rows=40, acc_rows=20, weight_fifo_depth=3,
                    **(dict(weight_tiles=5, program_words=20) if memories else {}))
    rng = np.random.default_rng(11)
    cases = [Case(f"fuzz{k}", random_program(config, rng, length=30)) for k in range(2)]
    if memories:      # the weight memory, the program memory and the tag were exercised
        ops = {s.fields["op"] for c in cases for s in c.program}
        assert {Op.LOAD_WEIGHTS, Op.STORE_WEIGHTS, Op.PROGRAM} <= ops
    cases += error_cases(config, rng)[:3]
    results = get_backend("amaranth", config).run_many(
        [c.program for c in cases], stalls=(0.2, 0.3, 0.4), seed=5)
    assert check_results(config, cases, results) == []
