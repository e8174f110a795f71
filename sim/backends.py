"""One interface, four backends: the golden model, the Amaranth simulator, and the generated
Verilog on Icarus or Verilator (cocotb). Each runs ``sim.program.Program``s and yields results
plus counters."""

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tpugen.hdl.config import Config
from tpugen.hdl.isa import Counter
from tpugen.hdl.verilog import core_verilog, module_names

from .cache import build_root
from .machine import Machine
from .runner import build

__all__ = ["BACKENDS", "RunResult", "Backend", "get_backend"]

BACKENDS = ("model", "amaranth", "icarus", "verilator", "board")


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
        from .core_sim import Stalls, simulate_core

        out = []
        for k, p in enumerate(programs):
            r = simulate_core(self.config, p, stalls=Stalls(*stalls), seed=seed + k,
                              fault=self.fault, vcd=waves)
            exp = Machine(self.config).run(p)
            out.append(RunResult(host_out=r.host_out, last=r.last, error=r.error,
                                 counters=r.counters, cycles=r.cycles,
                                 mismatches=exp.mismatches(r.host_out, r.last)))
        return out


class CocotbBackend(Backend):
    """The hierarchical core Verilog, built once per config (cached), in Icarus or Verilator."""

    def __init__(self, config, sim, *, fault=None):
        super().__init__(config)
        self.name = sim
        self.sim = sim
        self.fault = fault

    def build(self, waves=False):
        cfg, fault = self.config, self.fault
        key = "core_" + cfg.name + (f"_fault{fault[0]}x{fault[1]}" if fault else "")
        return build(self.sim, key, lambda: core_verilog(cfg, fault=fault),
                     module_names()["core"], waves=waves)

    def run_many(self, programs, *, stalls=(0.0, 0.0, 0.0), seed=0, waves=None,
                 reset_midway=None, log_file=None, name="run"):
        b = self.build(waves=bool(waves))
        work = Path(tempfile.mkdtemp(prefix="job_", dir=self._jobs_dir()))
        runs = []
        for k, p in enumerate(programs):
            prog_path = work / f"program_{k}.json"
            p.save(prog_path)
            runs.append({"program": str(prog_path), "result": str(work / f"result_{k}.json"),
                         "stalls": list(stalls), "seed": seed + k})
        job = {"runs": runs, "seed": seed}
        if reset_midway:
            interrupted, fresh, after = reset_midway
            interrupted.save(work / "interrupted.json")
            fresh.save(work / "fresh.json")
            job["reset_midway"] = {"interrupted": str(work / "interrupted.json"),
                                   "fresh": str(work / "fresh.json"), "after_cycles": after}
        (work / "job.json").write_text(json.dumps(job))
        env = {"TPUGEN_CONFIG": self.config.to_json(), "TPUGEN_JOB": str(work / "job.json")}
        log_file = log_file or work / "sim.log"
        tests, failed = b.run("tpugen.tb.test_core", env=env, seed=seed, waves=bool(waves),
                              name=name, log_file=log_file)
        self.last_log = log_file
        self.last_tests, self.last_failed = tests, failed
        out = []
        for run in runs:
            path = Path(run["result"])
            if not path.exists():
                raise RuntimeError(f"the {self.sim} run ended before {path.name}; see the "
                                   f"simulator log {log_file}")
            d = json.loads(path.read_text())
            st = d["status"]
            out.append(RunResult(
                host_out=np.array(d["host_out"], dtype=np.int64).reshape(-1, self.config.cols),
                last=np.array(d["last"], dtype=bool), error=st["cause"],
                counters={c.name.lower(): st[c.name.lower()] for c in Counter},
                cycles=d["cycles"], mismatches=d["mismatches"]))
        if waves:
            self._copy_waves(b, waves)
        return out

    def _jobs_dir(self):
        d = build_root() / "jobs"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _copy_waves(self, b, dest):
        import shutil

        found = sorted(b.build_dir.rglob("*.fst")) + sorted(b.build_dir.rglob("*.vcd"))
        if not found:
            raise RuntimeError(f"no waveform file was written in {b.build_dir}")
        newest = max(found, key=lambda p: p.stat().st_mtime)
        shutil.copyfile(newest, dest)


def get_backend(name: str, config: Config, *, fault=None, port=None, baud=3_000_000) -> Backend:
    """The backend called ``name`` (one of ``BACKENDS``) for ``config``; ``board`` needs the
    serial ``port`` of a board (or of ``fpga.simboard``) that implements ``config``."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {name!r}")
    if name == "model":
        if fault is not None:
            raise ValueError("fault has no meaning for the model backend")
        return ModelBackend(config)
    if name == "amaranth":
        return AmaranthBackend(config, fault=fault)
    if name == "board":
        if port is None:
            raise ValueError("port must name the board's serial device for the board backend")
        from tpugen.fpga.board import BoardBackend

        return BoardBackend(config, port, baud)
    return CocotbBackend(config, name, fault=fault)
