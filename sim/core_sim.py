"""Run a program on the core in the Amaranth simulator (flat elaboration)."""

from dataclasses import dataclass, field

import numpy as np

from tpugen.hdl.config import Config
from tpugen.hdl.core import Core
from tpugen.hdl.isa import Counter
from tpugen.sim.amaranth_streams import Sink, Source, simulate

__all__ = ["CoreRun", "simulate_core", "Stalls"]

#: Cycles the core must stay idle, after the last command, before a run ends.
IDLE_CYCLES = 8


@dataclass(frozen=True)
class Stalls:
    """Stall probabilities per cycle (``tpugen.sim.stalls``): the cmd and host-in sources
    withholding a new offer, the host-out sink holding ``ready`` low. Streams 0, 1, 2."""

    cmd: float = 0.0
    host_in: float = 0.0
    host_out: float = 0.0


@dataclass
class CoreRun:
    """What a run observed. Cycles count from the first cycle after reset."""

    host_out: np.ndarray                       # (beats, C) int64
    last: np.ndarray                           # (beats,) bool
    counters: dict = field(default_factory=dict)
    error: int = 0
    first_cmd: int = -1                        # cycle of the first command transfer
    last_out: int = -1                         # cycle of the last host-out transfer
    cycles: int = 0                            # last_out - first_cmd + 1


def simulate_core(config: Config, program, *, stalls=Stalls(), seed=0, fault=None, vcd=None,
                  max_cycles=None) -> CoreRun:
    """Stream ``program`` (``tpugen.sim.program.Program``) into a flat ``Core``; collect its
    host-out beats until the core has been idle for ``IDLE_CYCLES`` after the last command."""
    dut = Core(config, fault=fault)
    words = program.words()
    lanes, lasts = program.host_in_beats()
    beats = [{"data": row, "last": bool(last)}
             for row, last in zip(lanes.tolist(), lasts.tolist(), strict=True)]
    run = CoreRun(host_out=np.zeros((0, config.cols), dtype=np.int64),
                  last=np.zeros(0, dtype=bool))
    limit = max_cycles or 200_000 + 50 * (len(words) + len(beats))

    async def bench(ctx):
        cmd = Source(dut.cmd, words, p_stall=stalls.cmd, seed=seed, stream=0, name="cmd")
        host_in = Source(dut.host_in, beats, p_stall=stalls.host_in, seed=seed, stream=1,
                         name="host_in")
        host_out = Sink(dut.host_out, p_stall=stalls.host_out, seed=seed, stream=2,
                        name="host_out")
        cycle = idle = 0
        while idle < IDLE_CYCLES:
            if cycle > limit:
                raise TimeoutError(f"core did not finish within {limit} cycles "
                                   f"({cmd.index}/{len(words)} commands, "
                                   f"{host_in.index}/{len(beats)} beats in)")
            for s in (cmd, host_in, host_out):
                s.drive(ctx)
            for s in (cmd, host_in, host_out):
                s.sample(ctx, cycle)
            idle = idle + 1 if cmd.done and not ctx.get(dut.status.busy) else 0
            await ctx.tick()
            cycle += 1
        status = ctx.get(dut.status)
        run.error = int(status.cause)
        for c in Counter:
            run.counters[c.name.lower()] = int(getattr(status, c.name.lower()))
        if cmd.cycles:
            run.first_cmd = cmd.cycles[0]
        if host_out.cycles:
            run.last_out = host_out.cycles[-1]
        run.cycles = run.last_out - run.first_cmd + 1
        run.host_out = np.array([b["data"] for b in host_out.items],
                                dtype=np.int64).reshape(-1, config.cols)
        run.last = np.array([bool(b["last"]) for b in host_out.items], dtype=bool)

    simulate(dut, bench, vcd)
    return run
