"""The backend interface, and the backends of the golden model and the Amaranth simulator.

A ``Backend`` runs ``tpugen.sim.program.Program``s and yields ``RunResult``s (results plus
counters). The generated Verilog runs in ``tpugen.tb.core_backend`` (cocotb: Icarus, Verilator),
a board in ``tpugen.fpga``; ``tpugen.backends`` lists them all."""

from dataclasses import dataclass, field

import numpy as np

from tpugen.hdl.config import Config

from .core_sim import Stalls, simulate_core
from .machine import Machine

__all__ = ["RunResult", "Backend", "ModelBackend", "AmaranthBackend"]


@dataclass
class RunResult:
    """A program's host-out stream and what the backend measured.

    ``cycles``: first command transfer to last host-out transfer, inclusive (``None`` for the
    model, which has no time). ``counters``: ``hdl.isa.Counter`` names to values (model: only
    ``retired``). ``mismatches``: differences from the golden model found by the testbench.
    """

    host_out: np.ndarray
    last: np.ndarray
    error: int
    counters: dict = field(default_factory=dict)
    cycles: int | None = None
    mismatches: list = field(default_factory=list)


class Backend:
    name = "?"

    def __init__(self, config: Config):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config

    def run(self, program, **kw) -> RunResult:
        return self.run_many([program], **kw)[0]

    def run_many(self, programs, **kw) -> list:
        raise NotImplementedError


class ModelBackend(Backend):
    name = "model"

    def run_many(self, programs, **kw):
        out = []
        for p in programs:
            r = Machine(self.config).run(p)
            out.append(RunResult(host_out=r.host_out, last=r.last, error=int(r.error),
                                 counters={"retired": r.retired}))
        return out


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
