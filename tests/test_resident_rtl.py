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


def test_weight_memory_load_timing():
    """``HostInEngine``'s docstring: STORE_WEIGHTS writes a tile's rows; LOAD_WEIGHTS offers
    them on ``w_out`` in order, the first three cycles after ``start``, each next one the cycle
    after the one before went (held while ``w_out.ready`` is low), ``done`` with the last."""
    from amaranth.sim import Simulator

    from tpugen.hdl.host_in import HostInEngine, HostInJob

    cfg = Config(rows=2, cols=2, ub_rows=16, acc_rows=16, weight_tiles=2)
    dut = HostInEngine(cfg)
    rows = [[3, -4], [-128, 127], [5, 6], [-1, 0]]        # tiles 0 and 1, a row a beat
    ready = [1, 0, 1, 0, 0, 1, 1, 1, 1, 1]
    got = []

    async def bench(ctx):
        ctx.set(dut.ub_grant, 1)
        ctx.set(dut.w_out.ready, 1)
        ctx.set(dut.kind, HostInJob.STORE_WEIGHTS)
        ctx.set(dut.dst, 0)
        ctx.set(dut.count, len(rows))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for i, row in enumerate(rows):          # one beat a cycle (the job takes each)
            ctx.set(dut.host_in.valid, 1)
            ctx.set(dut.host_in.payload.data, row)
            ctx.set(dut.host_in.payload.last, i == len(rows) - 1)
            assert ctx.get(dut.host_in.ready)
            await ctx.tick()
        ctx.set(dut.host_in.valid, 0)
        await ctx.tick()
        assert not ctx.get(dut.busy)
        ctx.set(dut.kind, HostInJob.LOAD_WEIGHTS)
        ctx.set(dut.dst, 1)
        ctx.set(dut.count, 2)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for t, r in enumerate(ready, 1):       # t: cycles after start
            ctx.set(dut.w_out.ready, r)
            valid = ctx.get(dut.w_out.valid)
            got.append((t, valid, [ctx.get(dut.w_out.payload[k]) for k in range(2)] if valid
                        else None, r, ctx.get(dut.done)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert [g[1] for g in got[:2]] == [0, 0] and got[2][:3] == (3, 1, rows[2])
    went = [g[0] for g in got if g[1] and g[3]]
    assert [got[t - 1][2] for t in went] == rows[2:]
    for first, t, row in ((3, went[0], rows[2]), (went[0] + 1, went[1], rows[3])):
        assert all(got[u - 1][1:3] == (1, row) for u in range(first, t + 1))
    assert [g[0] for g in got if g[4]] == [went[-1]]      # done with the last row
    assert not any(g[1] for g in got[went[-1]:])
