"""The core's Verilog as a backend: the host side of ``test_core.py``.

``CocotbBackend(config, "icarus" | "verilator")`` builds the hierarchical core Verilog once per
configuration (``tpugen.sim.runner``, cached), writes each program and its stall pattern to a job
file, runs the cocotb test module ``test_core`` (``CORE_TEST_MODULE``) in the simulator, and
reads back the results, counters and cycle counts. With ``dsp_family`` it runs the core as a
board build elaborates it instead: flat, the array's products and the activation unit's on that
family's DSP primitives (``hdl.dsp``), which run as their simulation models
(``sim.primitives``).
"""

import json
import shutil
from pathlib import Path

import numpy as np

from tpugen.hdl.convert import to_verilog
from tpugen.hdl.core import Core
from tpugen.hdl.dsp import check_dsp_family, dsp_plan
from tpugen.hdl.isa import Counter
from tpugen.hdl.verilog import core_verilog, module_names
from tpugen.sim.backend_base import Backend, RunResult
from tpugen.sim.cache import build_root, entry_dir, job_dir
from tpugen.sim.primitives import primitive_models
from tpugen.sim.runner import build
from tpugen.tb import CORE_TEST_MODULE

__all__ = ["CocotbBackend"]


class CocotbBackend(Backend):
    """The hierarchical core Verilog, built once per config (cached), in Icarus or Verilator;
    with ``dsp_family`` the flat core of a board build, every array product and the activation
    unit's multipliers on that family's DSP primitives (``dsp_blocks`` of them for the array:
    default every product)."""

    def __init__(self, config, sim, *, fault=None, dsp_family=None, dsp_blocks=None):
        super().__init__(config)
        self.name = sim if sim == "icarus" else f"{sim}-cocotb"
        self.sim = sim
        self.fault = fault
        self.dsp_family = check_dsp_family(dsp_family)
        if dsp_family is not None and fault is not None:
            raise ValueError("fault is a debug option of the hierarchical core, not of a "
                             "dsp_family build")
        self.dsp_blocks = config.rows * config.cols if dsp_blocks is None else dsp_blocks

    def build(self, waves=False):
        cfg, fault = self.config, self.fault
        top = module_names()["core"]
        if self.dsp_family is not None:
            family, blocks = self.dsp_family, self.dsp_blocks
            plan = dsp_plan(cfg, family, blocks)
            models = primitive_models(family, entry_dir(build_root() / "primitives"))
            return build(self.sim, f"core_{cfg.name}_{family}{blocks}",
                         lambda: to_verilog(Core(cfg, dsp_plan=plan, dsp_family=family), top),
                         top, waves=waves,
                         extra_sources=models)
        key = "core_" + cfg.name + (f"_fault{fault[0]}x{fault[1]}" if fault else "")
        return build(self.sim, key, lambda: core_verilog(cfg, fault=fault), top, waves=waves)

    def run_many(self, programs, *, stalls=(0.0, 0.0, 0.0), seed=0, waves=None,
                 reset_midway=None, log_file=None, name="run"):
        b = self.build(waves=bool(waves))
        with job_dir(f"{name}_") as work:
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
            tests, failed = b.run(CORE_TEST_MODULE, env=env, seed=seed, waves=bool(waves),
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

    def _copy_waves(self, b, dest):
        found = sorted(b.build_dir.rglob("*.fst")) + sorted(b.build_dir.rglob("*.vcd"))
        if not found:
            raise RuntimeError(f"no waveform file was written in {b.build_dir}")
        newest = max(found, key=lambda p: p.stat().st_mtime)
        shutil.copyfile(newest, dest)

