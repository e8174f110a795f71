"""Run the array in the Amaranth simulator (flat elaboration) on a sequence of tiles."""

from dataclasses import dataclass, field

import numpy as np

from tpugen.hdl.array import SystolicArray
from tpugen.hdl.config import Config
from tpugen.sim.amaranth_streams import Source, simulate, to_py

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
    """Stream ``tiles`` (a list of ``(weights R x C, acts M x R)``) through a flat
    ``SystolicArray``.

    Weight beats of tile k are offered in order as early as the array takes them; activation
    vectors follow, ``first`` on each tile's first vector. ``act_gap`` / ``weight_gap`` are the
    stall probabilities of the two sources (``tpugen.sim.stalls``, streams 1 and 0 of
    ``seed``).
    """
    dut = SystolicArray(config, fault=fault)
    beats = [row for w, _ in tiles for row in np.asarray(w).tolist()]
    vectors = []
    for _, x in tiles:
        for k, v in enumerate(np.asarray(x).tolist()):
            vectors.append({"data": v, "first": int(k == 0)})
    run = ArrayRun(outputs=np.zeros((0, config.cols), dtype=np.int64))
    outs = []
    tail = drain if drain is not None else config.rows + config.cols + 8

    async def bench(ctx):
        weight = Source(dut.weight, beats, p_stall=weight_gap, seed=seed, stream=0,
                        name="weight")
        act = Source(dut.act, vectors, p_stall=act_gap, seed=seed, stream=1, name="act")
        cycle = idle = 0
        while idle < tail:
            weight.drive(ctx)
            act.drive(ctx)
            if ctx.get(dut.out.valid):          # the output has no ready: always taken
                outs.append(to_py(ctx.get(dut.out.payload.data)))
                run.out_first.append(ctx.get(dut.out.payload.first))
                run.out_cycles.append(cycle)
            weight.sample(ctx, cycle)
            act.sample(ctx, cycle)
            idle = idle + 1 if weight.done and act.done else 0
            await ctx.tick()
            cycle += 1
        run.act_cycles = act.cycles
        run.cycles = cycle

    simulate(dut, bench, vcd)
    run.outputs = np.array(outs, dtype=np.int64).reshape(-1, config.cols)
    return run
