"""Resident models on the RTL: a load program then run programs (the weight memory, the program
memory, the tag) on the compiled Verilator harness, checked against the golden model."""

import numpy as np

from tpugen.backends import get_backend
from tpugen.compiler.resident import make_resident
from tpugen.compiler.staging import compile_chain
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.program import Program
from tpugen.sim.requant import QuantParams

CFG = Config(rows=4, cols=4, ub_rows=64, acc_rows=64, weight_tiles=48, program_words=256,
             quant_sets=8)


def test_load_once_run_twice_on_verilator():
    rng = np.random.default_rng(3)
    layers = []
    for k, n in ((24, 10), (10, 6)):
        q = QuantParams(bias=rng.integers(-500, 500, n), multiplier=np.full(n, 1 << 30),
                        shift=-6, out_zp=int(rng.integers(-5, 5)))
        layers.append((rng.integers(-128, 128, (k, n)), q))
    runs = [make_resident(compile_chain(CFG, rng.integers(-128, 128, (2, 24)), layers).program)
            for _ in range(2)]
    assert runs[0].tag == runs[1].tag and runs[0].stored_words > 0
    # one program from reset: load, run, run, and a run of a model not loaded (WRONG_MODEL)
    program = Program(CFG, runs[0].load.steps).extend(runs[0].run.steps)
    program.extend(runs[1].run.steps).tag(runs[0].tag ^ 1, check=True).sync()
    result = get_backend("verilator", CFG).run(program, stalls=(0.2, 0.2, 0.2), seed=4)
    assert result.mismatches == []          # beat for beat as the golden model
    assert result.error == isa.Cause.WRONG_MODEL
