"""The ``model`` backend: programs run on the golden model (``tpugen.sim.machine``), no cycles.

With a ``tracer`` (a ``tpugen.sim.trace.Trace``), each run adds the model's schedule of the
program (``tpugen.sim.trace_model``: an estimate with ideal engines) to it."""

from tpugen.sim.backend_base import Backend, RunResult
from tpugen.sim.machine import Machine
from tpugen.sim.trace_model import model_trace

__all__ = ["ModelBackend"]


class ModelBackend(Backend):
    name = "model"
    #: A ``tpugen.sim.trace.Trace`` that gets each run's schedule (None: no tracing).
    tracer = None

    def __init__(self, config):
        super().__init__(config)
        self._trace_pmem = {}       # the program memory, for the schedules of CALLs

    def run_many(self, programs, **kw):
        out = []
        for p in programs:
            r = Machine(self.config).run(p)
            out.append(RunResult(host_out=r.host_out, last=r.last, error=int(r.error),
                                 counters={"retired": r.retired}))
            if self.tracer is not None:
                self.tracer.add(model_trace(p, name=self.tracer.name("run"),
                                            pmem=self._trace_pmem))
        return out
