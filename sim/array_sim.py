"""Run the array in the Amaranth simulator (flat elaboration) on a sequence of tiles."""

from dataclasses import dataclass, field

import numpy as np
from amaranth.sim import Simulator
from tpugen.hdl.array import Array
from tpugen.hdl.config import Config

__all__ = ["ArrayRun", "simulate_array"]


@dataclass
class ArrayRun:
    """What a run observed; cycles count from 0 at the first clock edge of the run."""

    outputs: np.ndarray                                  # (vectors, C) int64
    out_first: list = field(default_factory=list)        # first flag of each output
    out_cycles: list = field(default_factory=list)       # cycle of each output vector
    act_cycles: list = field(default_factory=list)       # cycle of each act transfer
    cycles: int = 0


def simulate_array(config: Config, tiles, *, act_gap=0.0, weight_gap=0.0, seed=0,
                   fault=None, vcd=None, drain=None) -> ArrayRun:
    """Stream ``tiles`` (a list of ``(weights R x C, acts M x R)``) through a flat ``Array``.

    Weight beats of tile k are offered in order as early as the array takes them; activation
    vectors follow, ``first`` on each tile's first vector. ``act_gap`` / ``weight_gap`` are the
    probabilities of withholding ``valid`` in a cycle (random stalls, seeded).
    """
    dut = Array(config, fault=fault)
    rng = np.random.default_rng(seed)
    beats = [row for w, _ in tiles for row in np.asarray(w).tolist()]
    vectors = []
    for _, x in tiles:
        for k, v in enumerate(np.asarray(x).tolist()):
            vectors.append((v, int(k == 0)))
    run = ArrayRun(outputs=np.zeros((0, config.cols), dtype=np.int64))
    outs = []
    tail = drain if drain is not None else config.rows + config.cols + 8

    async def bench(ctx):
        bi = vi = 0
        cycle = 0
        idle = 0
        while idle < tail:
            w_valid = bi < len(beats) and rng.random() >= weight_gap
            a_valid = vi < len(vectors) and rng.random() >= act_gap
            ctx.set(dut.weight.valid, w_valid)
            if w_valid:
                ctx.set(dut.weight.payload, beats[bi])
            ctx.set(dut.act.valid, a_valid)
            if a_valid:
                data, first = vectors[vi]
                ctx.set(dut.act.payload, {"data": data, "first": first})
            if ctx.get(dut.out.valid):
                outs.append(list(ctx.get(dut.out.payload.data)))
                run.out_first.append(ctx.get(dut.out.payload.first))
                run.out_cycles.append(cycle)
            if w_valid and ctx.get(dut.weight.ready):
                bi += 1
            if a_valid and ctx.get(dut.act.ready):
                run.act_cycles.append(cycle)
                vi += 1
            done = bi == len(beats) and vi == len(vectors)
            idle = idle + 1 if done else 0
            await ctx.tick()
            cycle += 1
        run.cycles = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    run.outputs = np.array(outs, dtype=np.int64).reshape(-1, config.cols)
    return run
