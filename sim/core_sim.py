"""Run a program on the core in the Amaranth simulator (flat elaboration)."""

from dataclasses import dataclass, field

import numpy as np
from amaranth.sim import Simulator
from tpugen.hdl.config import Config
from tpugen.hdl.core import Core
from tpugen.hdl.isa import Counter

__all__ = ["CoreRun", "simulate_core", "Stalls"]


@dataclass(frozen=True)
class Stalls:
    """Probabilities of withholding, per cycle: cmd valid, host-in valid, host-out ready."""

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

    @property
    def span(self) -> int:
        return self.last_out - self.first_cmd + 1


def simulate_core(config: Config, program, *, stalls=Stalls(), seed=0, fault=None, vcd=None,
                  max_cycles=None) -> CoreRun:
    """Stream ``program`` (``sim.program.Program``) into a flat ``Core``; collect host-out."""
    dut = Core(config, fault=fault)
    rng = np.random.default_rng(seed)
    words = program.words()
    lanes, lasts = program.host_in_beats()
    lanes, lasts = lanes.tolist(), [bool(v) for v in lasts]
    outs, out_last = [], []
    run = CoreRun(host_out=np.zeros((0, config.cols), dtype=np.int64),
                  last=np.zeros(0, dtype=bool))
    limit = max_cycles or 200_000 + 50 * (len(words) + len(lanes))

    async def bench(ctx):
        ci = hi = 0
        cycle = 0
        idle = 0
        while idle < 8:
            if cycle > limit:
                raise TimeoutError(f"core did not finish within {limit} cycles "
                                   f"({ci}/{len(words)} commands, {hi}/{len(lanes)} beats in)")
            c_valid = ci < len(words) and rng.random() >= stalls.cmd
            h_valid = hi < len(lanes) and rng.random() >= stalls.host_in
            o_ready = rng.random() >= stalls.host_out
            ctx.set(dut.cmd.valid, c_valid)
            if c_valid:
                ctx.set(dut.cmd.payload.as_value(), words[ci])
            ctx.set(dut.host_in.valid, h_valid)
            if h_valid:
                ctx.set(dut.host_in.payload, {"data": lanes[hi], "last": lasts[hi]})
            ctx.set(dut.host_out.ready, o_ready)
            if c_valid and ctx.get(dut.cmd.ready):
                if ci == 0:
                    run.first_cmd = cycle
                ci += 1
            if h_valid and ctx.get(dut.host_in.ready):
                hi += 1
            if o_ready and ctx.get(dut.host_out.valid):
                outs.append(list(ctx.get(dut.host_out.payload.data)))
                out_last.append(bool(ctx.get(dut.host_out.payload.last)))
                run.last_out = cycle
            done = ci == len(words) and not ctx.get(dut.status.busy)
            idle = idle + 1 if done else 0
            await ctx.tick()
            cycle += 1
        status = ctx.get(dut.status)
        run.error = int(status.cause)
        for c in Counter:
            run.counters[c.name.lower()] = int(getattr(status, c.name.lower()))
        run.cycles = run.span

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    run.host_out = np.array(outs, dtype=np.int64).reshape(-1, config.cols)
    run.last = np.array(out_last, dtype=bool)
    return run
