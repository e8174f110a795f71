"""The ``model`` backend: programs run on the golden model (``tpugen.sim.machine``), no cycles."""

from tpugen.sim.backend_base import Backend, RunResult
from tpugen.sim.machine import Machine

__all__ = ["ModelBackend"]


class ModelBackend(Backend):
    name = "model"

    def run_many(self, programs, **kw):
        out = []
        for p in programs:
            r = Machine(self.config).run(p)
            out.append(RunResult(host_out=r.host_out, last=r.last, error=int(r.error),
                                 counters={"retired": r.retired}))
        return out
