"""The front door: one GEMM call on any backend."""

import numpy as np

from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.config import Config
from tpugen.sim.backends import RunResult
from tpugen.sim.compiler import compile_gemm, gemm_reference
from tpugen.sim.cycles import ideal_cycles

from .backends import get_backend

__all__ = ["Accelerator", "GemmReport"]


class GemmReport:
    """What ``Accelerator.matmul`` measured (``Accelerator.last``)."""

    def __init__(self, config, shape, result: RunResult, expected, got):
        self.config = config
        self.shape = shape
        self.result = result
        self.ideal = ideal_cycles(config, *shape)
        self.wrong = None if got is None else int(np.count_nonzero(np.asarray(got) != expected))
        self.passed = (got is not None and not result.mismatches and result.error == 0
                       and np.array_equal(expected, got))

    @property
    def cycles(self):
        return self.result.cycles

    @property
    def utilization(self):
        return None if not self.cycles else self.ideal / self.cycles

    def lines(self):
        r = self.result
        m, k, n = self.shape
        out = [f"shape        {m} x {k} x {n} on a {self.config.rows} x {self.config.cols} array"]
        if r.cycles is not None:
            c = r.counters
            out += [
                f"cycles       {r.cycles} (first command beat to last host-out beat)",
                f"ideal        {self.ideal} (ceil(M*K*N / (R*C)))",
                f"utilization  {100 * self.utilization:.1f} %",
                f"array busy   {c.get('array_busy', 0)} cycles",
                f"stalls       host-in {c.get('host_in_stall', 0)}, "
                f"host-out {c.get('host_out_stall', 0)} cycles",
                f"instructions {c.get('retired', 0)}",
            ]
        if self.wrong:
            out.append(f"wrong        {self.wrong} of {m * n} results "
                       f"differ from NumPy")
        if r.mismatches:
            out.append(f"testbench    {r.mismatches[0]}")
        out.append("PASS" if self.passed else "FAIL")
        return out


class Accelerator:
    """A generated accelerator of ``config`` on a ``backend``: ``model``, ``amaranth``,
    ``icarus``, ``verilator``, or ``board`` (a board or the simulated board at serial
    ``port``).

    ``matmul(A, B)`` compiles the GEMM into a program (``tpugen.sim.compiler``), runs it, checks it
    against NumPy, and returns the M x N result; ``last`` holds the report (cycles, counters).
    ``run(program)`` runs any program and returns the backend's ``RunResult``.
    """

    def __init__(self, config: Config, backend: str = "model", *, fault=None, port=None,
                 baud=DEFAULT_BAUD):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        self.backend_name = backend
        self.backend = get_backend(backend, config, fault=fault, port=port, baud=baud)
        self.last = None

    def run(self, program, **kw) -> RunResult:
        return self.backend.run(program, **kw)

    def matmul(self, a, b, *, out="int32", quant=None, in_zp=0, waves=None,
               stalls=(0.0, 0.0, 0.0), seed=0) -> np.ndarray:
        quant = {} if out == "int32" else {"quant": quant, "in_zp": in_zp}
        compiled = compile_gemm(self.config, a, b, out=out, **quant)
        expected = gemm_reference(self.config, a, b, out=out, **quant)
        result = self.backend.run(compiled.program, waves=waves, stalls=stalls, seed=seed)
        try:
            got = compiled.decode(result.host_out)
        except ValueError as e:
            got, problem = None, str(e)
        shape = (np.shape(a)[0], np.shape(a)[1], np.shape(b)[1])
        self.last = GemmReport(self.config, shape, result, expected, got)
        if got is None:
            raise RuntimeError(f"the {self.backend_name} run gave no result: {problem}")
        return got
