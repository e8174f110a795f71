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


def _command_source_trace(words, ready):
    """Run ``words`` through a ``CommandSource`` (program_words=16) as a stream that offers each
    word until it is taken, with ``o.ready`` from ``ready`` (one a cycle); per cycle
    ``(o.valid, o.payload or None, i.ready, busy)``."""
    from amaranth.sim import Simulator

    from tpugen.hdl.command_source import CommandSource

    dut = CommandSource(Config(rows=4, cols=4, ub_rows=64, acc_rows=64, program_words=16))
    trace = []

    async def bench(ctx):
        k = 0
        for r in ready:
            ctx.set(dut.i.valid, k < len(words))
            ctx.set(dut.i.payload.as_value(), words[k] if k < len(words) else 0)
            ctx.set(dut.o.ready, r)
            valid, taken = ctx.get(dut.o.valid), ctx.get(dut.i.ready) and k < len(words)
            trace.append((valid, ctx.get(dut.o.payload.as_value()) if valid else None,
                          ctx.get(dut.i.ready), ctx.get(dut.busy)))
            k += bool(taken)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return trace


def test_command_source_call_timing():
    """The contract of ``CommandSource`` (its docstring): a STORE takes its words one a cycle,
    a CALL's first word is offered two cycles after the CALL went, each next one the cycle
    after the one before went (held while ``o.ready`` is low), the command stream waiting;
    after the last, ``o`` is ``i`` again."""
    enc = isa.encode
    body = [enc(isa.Op.MATMUL, 0, src=s, dst=3, n=1) for s in (5, 6, 7)]
    after = enc(isa.Op.SYNC, 0)
    words = [enc(isa.Op.PROGRAM, isa.Flag.STORE, dst=2, n=3), *body,
             enc(isa.Op.PROGRAM, 0, src=2, n=3), after]
    ready = [1] * 6 + [1, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1]
    trace = _command_source_trace(words, ready)
    sent = [(t, p) for t, (v, p, _, _) in enumerate(trace) if v and ready[t]]
    assert [p for _, p in sent] == [words[0], words[4], *body, after]
    store_at, call_at = sent[0][0], sent[1][0]
    # the STORE's three words are taken in the three cycles after it went (none offered)
    assert [trace[t][2:] for t in range(store_at + 1, store_at + 4)] == [(1, 0)] * 3
    assert not any(trace[t][0] for t in range(store_at + 1, store_at + 4))
    assert call_at == store_at + 4
    # nothing offered the cycle after the CALL; then each word from the cycle after the last
    assert trace[call_at + 1][0] == 0 and trace[call_at + 1][3] == 1
    went = call_at
    for t, p in sent[2:]:
        first = went + (2 if went == call_at else 1)
        assert all(trace[u][:2] == (1, p) for u in range(first, t + 1)), (first, t, trace)
        went = t
    assert not any(trace[u][2] for u in range(call_at + 1, sent[4][0] + 1))   # i waits
    assert trace[sent[4][0] + 1][3] == 0     # busy ends with the CALL's last word
