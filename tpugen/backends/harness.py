"""The core's Verilog on the compiled Verilator harness: the ``verilator`` backend.

``HarnessBackend(config)`` builds the harness once per configuration
(``tpugen.tb.verilator_harness``, cached across processes), writes each program as a binary
program file, runs them all in one harness process, and reads the host-out beats, status
counters and cycle counts back as NumPy arrays. Each run is checked here against the golden
model (``tpugen.sim.machine``), as ``test_core.py`` does in the cocotb harness: host-out beats,
error cause, retired count, the host-out stream rules (checked by the harness) and a timeout.

With a ``tracer`` (a ``tpugen.sim.trace.Trace``, set by ``tpugen sim --trace``), each run also
writes the engines' state changes, sampled in C++ every cycle, and the tracer gets the run's
timeline (``tpugen.sim.trace.from_states``).

Both harnesses draw the same stalls in the same cycles and end a run by the same rule, so a
program gives the same results, cycle counts and counters on both (``tests/test_harness.py``).
"""

from pathlib import Path

from tpugen.hdl.isa import Counter
from tpugen.sim.backend_base import Backend, RunResult
from tpugen.sim.cache import job_dir
from tpugen.sim.machine import Machine
from tpugen.sim.stalls import StallPattern
from tpugen.sim.trace import from_states
from tpugen.tb.verilator_harness import build_harness, read_result, read_trace, write_job

__all__ = ["HarnessBackend", "RESET_MIDWAY_STALLS"]

#: Stall probabilities and seed of a ``reset_midway`` scenario (as in ``test_core.py``).
RESET_MIDWAY_STALLS = ((0.2, 0.2, 0.2), 7)


def _thresholds(stalls) -> list[int]:
    if len(stalls) != 3:
        raise ValueError(f"stalls must be three probabilities (cmd, host-in, host-out), not "
                         f"{stalls!r}")
    return [StallPattern(p).threshold for p in stalls]


def _limit(program, expected_beats: int) -> int:
    """Cycles after which a run is a hang (the cocotb harness's bound)."""
    return 100_000 + 40 * (len(program) + len(program.host_in_arrays()[1]) + expected_beats)


class HarnessBackend(Backend):
    """The hierarchical core Verilog on the compiled Verilator harness (built once per config).

    ``threads``: Verilator's ``--threads`` for the model (1 is fastest up to 64 x 64 here)."""

    name = "verilator"

    def __init__(self, config, *, fault=None, threads: int = 1):
        super().__init__(config)
        self.fault = fault
        self.threads = threads
        self.last_tests = self.last_failed = 0
        self._harnesses = {}
        #: A ``tpugen.sim.trace.Trace`` that gets each run's timeline (None: no tracing).
        self.tracer = None

    def build(self, waves=False):
        """The harness of this backend's config (built, or found in the cache, on first use;
        kept for the backend's later runs, so a training loop's GEMMs look it up once)."""
        waves = bool(waves)
        if waves not in self._harnesses:
            self._harnesses[waves] = build_harness(self.config, fault=self.fault, waves=waves,
                                                   threads=self.threads)
        return self._harnesses[waves]

    def run_many(self, programs, *, stalls=(0.0, 0.0, 0.0), seed=0, waves=None,
                 reset_midway=None, log_file=None, name="run"):
        cfg = self.config
        thresholds = _thresholds(stalls)
        harness = self.build(waves=bool(waves))
        with job_dir(f"{name}_") as work:
            runs, expected = [], []
            for k, p in enumerate(programs):
                exp = Machine(cfg).run(p)
                expected.append(exp)
                path = work / f"program_{k}.bin"
                p.save_binary(path)
                runs.append({"program": path, "result": work / f"result_{k}.bin",
                             "thresholds": thresholds, "seed": seed + k,
                             "expect": len(exp.host_out), "limit": _limit(p, len(exp.host_out)),
                             "trace": work / f"trace_{k}.bin" if self.tracer else None,
                             "source": p})
            if reset_midway:
                interrupted, fresh, after = reset_midway
                mid_stalls, mid_seed = RESET_MIDWAY_STALLS
                for tag, p in (("interrupted", interrupted), ("fresh", fresh)):
                    exp = Machine(cfg).run(p)
                    path = work / f"{tag}.bin"
                    p.save_binary(path)
                    runs.append({"program": path, "thresholds": _thresholds(mid_stalls),
                                 "seed": mid_seed, "expect": len(exp.host_out),
                                 "limit": _limit(p, len(exp.host_out)),
                                 **({"stop_after": after} if tag == "interrupted" else
                                    {"result": work / "result_fresh.bin"})})
                    if tag == "fresh":
                        expected.append(exp)
            job = work / "job.txt"
            write_job(job, runs, rand_seed=seed, waves=waves)
            log_file = Path(log_file or work / "harness.log")
            status = harness.run(job, log_path=log_file)
            self.last_log = log_file
            results, failed = [], 0
            #: Per run: (cycles simulated from reset release to the status read, CPU seconds).
            self.last_sim_time = []
            for run, exp in zip([r for r in runs if r.get("result")], expected, strict=True):
                path = Path(run["result"])
                if not path.exists():
                    raise RuntimeError(f"the harness ended (exit {status}) before {path.name}; see "
                                       f"{log_file}")
                r = read_result(path)
                h = r.header
                self.last_sim_time.append((h["end_cycle"] + 1, h["sim_ns"] * 1e-9))
                counters = {c.name.lower(): int(r.counters[c]) for c in Counter}
                problems = exp.mismatches(r.host_out, r.last)
                if h["cause"] != int(exp.error):
                    problems.append(f"error cause {h['cause']}, expected {int(exp.error)}")
                if counters["retired"] != exp.retired:
                    problems.append(f"retired {counters['retired']}, expected {exp.retired}")
                if h["timed_out"]:
                    problems.append(f"timeout after {run['limit']} cycles: "
                                    f"{len(r.last)}/{len(exp.host_out)} beats out")
                problems += r.violations
                failed += bool(problems)
                results.append(RunResult(host_out=r.host_out, last=r.last, error=h["cause"],
                                         counters=counters, cycles=h["cycles"],
                                         mismatches=problems))
                if run.get("trace"):
                    cycles, states, words, end = read_trace(run["trace"])
                    self.tracer.add(from_states(run["source"], cycles, states, end,
                                                words=words, name=self.tracer.name(name),
                                                counters=counters))
            if status != 0:
                raise RuntimeError(f"the harness exited with status {status}; see {log_file}")
            self.last_tests, self.last_failed = len(results), failed
            #: The fresh program's result of a ``reset_midway`` scenario (counted in last_failed).
            self.last_reset_result = results[len(programs)] if reset_midway else None
            return results[:len(programs)]
