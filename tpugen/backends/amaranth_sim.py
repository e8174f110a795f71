"""The ``amaranth`` backend: the core elaborated flat in the Amaranth simulator, checked against
the golden model."""

from tpugen.sim.backend_base import Backend, RunResult
from tpugen.sim.core_sim import Stalls, simulate_core
from tpugen.sim.machine import Machine

__all__ = ["AmaranthBackend"]


class AmaranthBackend(Backend):
    name = "amaranth"

    def __init__(self, config, *, fault=None):
        super().__init__(config)
        self.fault = fault

    def run_many(self, programs, *, stalls=(0.0, 0.0, 0.0), seed=0, waves=None, **kw):
        out = []
        for k, p in enumerate(programs):
            r = simulate_core(self.config, p, stalls=Stalls(*stalls), seed=seed + k,
                              fault=self.fault, vcd=waves)
            exp = Machine(self.config).run(p)
            out.append(RunResult(host_out=r.host_out, last=r.last, error=r.error,
                                 counters=r.counters, cycles=r.cycles,
                                 mismatches=exp.mismatches(r.host_out, r.last)))
        return out
