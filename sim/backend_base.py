"""The backend interface: a ``Backend`` runs ``tpugen.sim.program.Program``s and yields
``RunResult``s (the host-out stream, the error cause, counters, cycles).

The backends themselves (the golden model, the Amaranth simulator, cocotb, the compiled Verilator
harness, a board) live one module each in ``tpugen.backends``, which lists them all."""

from dataclasses import dataclass, field

import numpy as np

from tpugen.hdl.config import Config, check_config

__all__ = ["RunResult", "Backend"]


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
        check_config(config)
        self.config = config

    def run(self, program, **kw) -> RunResult:
        return self.run_many([program], **kw)[0]

    def run_many(self, programs, **kw) -> list:
        raise NotImplementedError
