"""Resident models (``tpugen.compiler.resident``): a program cut into a load program and a run
program gives the original's results, loads once, and refuses a stale or missing model."""

import numpy as np
import pytest

from tpugen.compiler import compile_gemm
from tpugen.compiler.resident import make_resident
from tpugen.compiler.staging import compile_chain
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine
from tpugen.sim.requant import QuantParams

CFG = Config(rows=8, cols=8, ub_rows=256, acc_rows=256, weight_tiles=128, program_words=512,
             quant_sets=16)


def _layers(rng, sizes):
    out = []
    for k, n in zip(sizes, sizes[1:], strict=False):
        q = QuantParams(bias=rng.integers(-2000, 2000, n), multiplier=np.full(n, 1 << 30),
                        shift=-7, out_zp=int(rng.integers(-10, 10)))
        out.append((rng.integers(-128, 128, (k, n)), q))
    return out


def _data_beats(result):
    """Host-out beats but the SYNC beats' retired counts (a resident run retires more)."""
    out = result.host_out.copy()
    sync = out[:, 0] == isa.SYNC_MAGIC
    if out.shape[1] > 2:
        out[sync, 2] = 0
    return out


@pytest.mark.parametrize("sizes", [(100, 40, 10), (30, 20, 16, 9)])
def test_resident_chain_matches_the_original(sizes):
    rng = np.random.default_rng(len(sizes))
    layers = _layers(rng, sizes)
    m = Machine(CFG)
    loaded = None
    for _ in range(3):
        x = rng.integers(-128, 128, (3, sizes[0]))
        program = compile_chain(CFG, x, layers).program
        rp = make_resident(program)
        assert loaded in (None, rp.tag)          # the same model: the same load, the same tag
        if loaded is None:
            assert m.run(rp.load, reset=False).error == isa.Cause.NONE
            loaded = rp.tag
        got = m.run(rp.run, reset=False)
        want = Machine(CFG).run(program)
        assert got.error == isa.Cause.NONE
        np.testing.assert_array_equal(_data_beats(got), _data_beats(want))
        quants = sum(s.fields["op"] == isa.Op.READ_QUANT for s in program.steps)
        assert rp.streamed_tiles == 0 and rp.stored_words == len(program) - quants
        # the run sends the inputs and two words, no weights
        assert not any(s.fields["op"] == isa.Op.READ_WEIGHTS for s in rp.run.steps)
        assert len(rp.run) == 2
    # the parameter sets (one per layer and 8 output channels) fit: loaded once too
    assert rp.resident_sets == sum(-(-n // 8) for n in sizes[1:])


def test_stale_missing_or_cut_off_model_is_refused():
    rng = np.random.default_rng(5)
    a = make_resident(compile_chain(CFG, rng.integers(-128, 128, (2, 50)),
                                    _layers(rng, (50, 12))).program)
    b = make_resident(compile_chain(CFG, rng.integers(-128, 128, (2, 50)),
                                    _layers(rng, (50, 12))).program)
    assert a.tag != b.tag
    m = Machine(CFG)
    m.run(a.load)
    assert m.run(a.run, reset=False).error == isa.Cause.NONE
    m.run(b.load, reset=False)                    # another model loaded
    assert m.run(a.run, reset=False).error == isa.Cause.WRONG_MODEL
    assert Machine(CFG).run(a.run).error == isa.Cause.WRONG_MODEL   # nothing loaded (reset)
    cut = Machine(CFG)
    cut.run(a.load)
    from tpugen.sim.program import Program
    cut.run(Program(CFG, b.load.steps[:4]), reset=False)   # a load cut short
    assert cut.run(b.run, reset=False).error == isa.Cause.WRONG_MODEL
    assert cut.run(a.run, reset=False).error == isa.Cause.WRONG_MODEL


def test_what_does_not_fit_streams():
    rng = np.random.default_rng(9)
    small = CFG.replace(weight_tiles=3, program_words=8, quant_sets=1)
    a, b = rng.integers(-128, 128, (4, 40)), rng.integers(-128, 128, (40, 20))
    program = compile_gemm(small, a, b).program
    rp = make_resident(program)
    tiles = sum(s.fields["n"] for s in program.steps if s.fields["op"] == isa.Op.READ_WEIGHTS)
    assert rp.resident_tiles == 3 and rp.streamed_tiles == tiles - 3
    assert rp.stored_words == 0 and len(rp.run) == len(program) + 1   # too long to store
    got = Machine(small).run(rp.combined)
    np.testing.assert_array_equal(_data_beats(got), _data_beats(Machine(small).run(program)))


def test_bad_input():
    with pytest.raises(TypeError, match="program must be a Program"):
        make_resident("x")
    plain = Config(rows=4, cols=4)
    with pytest.raises(ValueError, match="no weight memory"):
        make_resident(compile_gemm(plain, np.ones((2, 4), int), np.ones((4, 4), int)).program)
