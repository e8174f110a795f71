"""``tpugen sim``, ``tpugen run`` and ``tpugen demo``: a GEMM (random operands or the user's) or
a saved program on a backend (a simulator, the model, or a board over its link), checked against
the golden model, with a report (text or JSON).

The pieces the command line strings together, in order: ``check_waves`` and the operand and
program checks (everything that can fail because of the user's input, before any tool runs),
then ``sim_gemm`` / ``sim_program`` (the run), then ``Report.emit``. On a board (the ``board``
backend) the report gives what the board measured: its cycle counter, the link's wall time,
bytes and frames, and the GOPS they make beside the array's peak.

With ``trace`` / ``timeline`` (``--trace FILE.json``, ``--timeline FILE.png``) the run's
engine timeline (``tpugen.sim.trace``: cycle-exact from the RTL on ``verilator``, the model's
schedule on ``model``, the link's frames on ``board``; ``TRACE_BACKENDS``) is written as
trace-event JSON and drawn as a Gantt chart, and the report gets a summary of it.
"""

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tpugen.accelerator import Accelerator, GemmJob, GemmReport, ResultMismatch
from tpugen.backends import BACKENDS, SIMULATORS
from tpugen.files import writable
from tpugen.hdl.config import Config
from tpugen.sim.energy import energy
from tpugen.sim.heartbeat import Heartbeat
from tpugen.sim.machine import Machine, ProgramHang
from tpugen.sim.machine import Result as MachineResult
from tpugen.sim.program import Program
from tpugen.sim.requant import quantize_multiplier
from tpugen.sim.trace import WAIT_TEXT, Trace
from tpugen.sim.trace_plot import plot
from tpugen.sim.traffic import Traffic, program_traffic

__all__ = ["WAVE_SUFFIX", "TRACE_BACKENDS", "check_waves", "relu_quant", "quant_summary",
           "random_operands", "golden_program", "Report", "sim_gemm", "sim_program",
           "start_trace", "finish_trace", "trace_lines", "layer_names", "record_programs",
           "programs_traffic", "inference_traffic_lines"]

#: The backends that give a timeline: cycle-exact from the RTL, the model's schedule, a board's
#: link frames.
TRACE_BACKENDS = ("verilator", "model", "board")

#: The waveform format each simulator writes (the file name must end so; a simulator not
#: listed takes the name as given).
WAVE_SUFFIX = {"icarus": ".fst", "verilator": ".vcd", "verilator-cocotb": ".vcd",
               "amaranth": ".vcd"}


def check_waves(backend: str, path) -> Path:
    """``path`` as a waveform file of ``backend``: ``ValueError`` when the backend writes none,
    the suffix is not its format's, or the folder does not exist or is not writable."""
    if backend not in SIMULATORS:
        raise ValueError(f"the {backend} backend has no waveforms; choose one of "
                         f"{', '.join(SIMULATORS)}")
    path = Path(path)
    want = WAVE_SUFFIX.get(backend, path.suffix)
    if path.suffix != want:
        raise ValueError(f"the {backend} backend writes {want[1:].upper()}; name the file "
                         f"*{want}, not {str(path)!r}")
    _check_writable_file(path)
    return path


def _check_writable_file(path: Path) -> None:
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"the folder {str(folder)!r} of {str(path)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory, not a file")
    if not writable(path):
        raise ValueError(f"{str(path)!r} is not writable")


def relu_quant(k: int) -> dict:
    """``matmul`` options for int8 results with ReLU that map the int8 x int8 sums of depth
    ``k`` into the int8 range (TFLite's parameters for a real multiplier of 4 * 127 / (k * 128 *
    128): typical sums of random data spread over it, the largest saturate)."""
    q, e = quantize_multiplier(4 * 127 / (max(1, k) * 128 * 128))
    return {"multiplier": q, "shift": e, "act_min": 0}


def quant_summary(quant: dict) -> dict:
    """A GEMM job's requantization (``{"quant": QuantParams, "in_zp": int}``) as JSON values
    (per-channel parameters as lists)."""
    if not quant:
        return {}
    p = quant["quant"]
    out = {k: (getattr(p, k).tolist()) for k in ("bias", "multiplier", "shift")}
    out.update(out_zp=p.out_zp, act_min=p.act_min, act_max=p.act_max, in_zp=quant["in_zp"])
    return out


def random_operands(config: Config, m: int, k: int, n: int, seed: int):
    """Random operands (M x K, K x N): integer types uniformly over the operand range; float
    types ``float32`` values of both signs, normal around 1 times 2**-3 .. 2**3 (the compiler
    rounds them to the operand type)."""
    rng = np.random.default_rng(seed)
    if config.operand_type.is_float:
        def floats(shape):
            x = rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))
            return x.astype(np.float32)
        return floats((m, k)), floats((k, n))
    lo, hi = config.operand_type.min, config.operand_type.max
    return rng.integers(lo, hi + 1, (m, k)), rng.integers(lo, hi + 1, (k, n))


def golden_program(program: Program) -> MachineResult:
    """The golden model's run of ``program`` (``ValueError`` for a program that would hang)."""
    try:
        return Machine(program.config).run(program)
    except ProgramHang as e:
        raise ValueError(str(e)) from None


@dataclass
class Report:
    """A run's report: ``title`` (the first line), ``lines`` (the body), ``passed``, and
    ``fields`` (the same as JSON values). ``emit`` prints text, PASS or FAIL last, or JSON."""

    title: str
    lines: list
    passed: bool
    fields: dict = field(default_factory=dict)

    def emit(self, *, as_json: bool = False, out=print) -> None:
        if as_json:
            out(json.dumps({**self.fields, "passed": self.passed}, indent=2))
            return
        out(self.title)
        for line in self.lines:
            out(f"  {line}")
        out("PASS" if self.passed else "FAIL")


def _on_board(acc: Accelerator) -> bool:
    """Whether ``acc`` runs on a board (a backend at a serial port)."""
    return BACKENDS[acc.backend_name].needs_port


def _heartbeat(acc: Accelerator, what: str):
    """Progress of a run on standard error: announced for the simulators that build first; none
    on a board (its report gives the link's wall time)."""
    backend = acc.backend_name
    if _on_board(acc):
        return nullcontext()
    if backend in ("icarus", "verilator"):
        return Heartbeat(f"{what} on {backend}", detail="a config's first run builds the "
                         "simulator; later runs reuse it")
    return Heartbeat(f"{what} on {backend}", announce=False)


def start_trace(acc: Accelerator, title: str) -> Trace:
    """A ``Trace`` that ``acc``'s backend fills with each run's timeline (``ValueError`` for a
    backend that gives none: ``TRACE_BACKENDS``)."""
    if acc.backend_name not in TRACE_BACKENDS:
        raise ValueError(f"the {acc.backend_name} backend gives no timeline; use verilator "
                         f"(cycle-exact from the RTL), model (the model's schedule) or board "
                         f"(the link's frames)")
    tracer = Trace(title)
    acc.backend.tracer = tracer
    return tracer


def trace_lines(tracer: Trace) -> list[str]:
    """Report lines summing up a trace: each engine's busy share, the cycles an instruction
    waited at issue and why, the stream waits."""
    t = tracer.summary()
    cycles = max(1, t["cycles"])
    if not any(r.jobs for r in tracer.runs):          # a board: the link only
        frames = sum(len(r.link) for r in tracer.runs)
        return [f"timeline     {t['runs']} run(s), {frames} link frames, {cycles} cycles at the "
                f"board's clock (host time)"]
    busy = ", ".join(f"{e} {100 * t.get(f'busy_{e}', 0) / cycles:.1f} %"
                     for e in ("host-in", "matmul", "activate", "host-out"))
    why = {}
    for r in tracer.runs:
        for s, e, _, reasons in r.issue_waits:
            for reason in reasons or ("?",):
                why[reason] = why.get(reason, 0) + e - s
    top = sorted(why.items(), key=lambda kv: -kv[1])[:3]
    source = ", ".join(sorted({r.source for r in tracer.runs}))
    return [f"timeline     {cycles} cycles ({source}); busy: {busy}; array "
            f"{100 * t.get('array_busy', 0) / cycles:.1f} %",
            f"waits        at issue {t.get('held', 0)} cycles"
            + (" (" + "; ".join(f"{WAIT_TEXT.get(k, k)} {v}" for k, v in top) + ")"
               if top else "")
            + f"; host-in data {t.get('host_in_stall', 0)}, host-out {t.get('host_out_stall', 0)}"
            f", commands {t.get('cmd_wait', 0)} cycles"]


def finish_trace(tracer: Trace | None, trace=None, timeline=None, *, lines=None,
                 fields=None) -> None:
    """Write ``tracer``'s JSON to ``trace`` and its Gantt chart to ``timeline`` (when given),
    and add their summary to a report's ``lines`` and ``fields``."""
    if tracer is None:
        return
    lines = [] if lines is None else lines
    info = tracer.summary()
    lines += trace_lines(tracer)
    if trace:
        size = tracer.write_json(trace)
        lines.append(f"trace        {trace} ({size / 1e6:.2f} MB trace-event JSON: Perfetto or "
                     f"chrome://tracing)")
        info.update(file=str(trace), bytes=size)
    if timeline:
        plot(tracer, timeline)
        lines.append(f"timeline     {timeline}")
        info["timeline"] = str(timeline)
    if fields is not None:
        fields["trace"] = info


def layer_names(report) -> list[str]:
    """The names of a network run's programs, in run order, from its ``InferenceReport``
    (``tpugen.tflite``): per chain, its layers' op names (and the program's number when a chain
    took several)."""
    names = {op.index: op.name for op in report.ops}
    out = []
    for chain in report.chains:
        ops = ", ".join(names.get(i, str(i)) for i in chain.ops)
        for k in range(chain.programs):
            more = f" (program {k + 1} of {chain.programs})" if chain.programs > 1 else ""
            out.append(f"chain {chain.number}: {ops}{more}")
    return out


def record_programs(acc: Accelerator) -> list:
    """A list that gets every program ``acc`` runs from now on (its ``run`` wrapped)."""
    programs, run = [], acc.run

    def recording(program, **kw):
        programs.append(program)
        return run(program, **kw)

    acc.run = recording
    return programs


def programs_traffic(programs) -> Traffic:
    """The traffic of several programs of one config (``sim.traffic``), added up."""
    programs = list(programs)
    if not programs:
        raise ValueError("no programs")
    total = program_traffic(programs[0])
    for p in programs[1:]:
        t = program_traffic(p)
        for name, value in vars(t).items():
            if name not in ("rows", "cols", "operand_bits", "acc_bits"):
                setattr(total, name, getattr(total, name) + value)
    return total


def inference_traffic_lines(programs, config: Config, inferences: int) -> tuple[list, dict]:
    """The traffic and energy estimate of a network's run (its ``programs``, for
    ``inferences`` inputs): report lines and JSON values, with the energy per inference."""
    t = programs_traffic(programs)
    e = energy(t, config)
    on_chip = (e.compute_pj + e.move_pj) / inferences
    link = e.link_pj / inferences
    lines = [f"traffic      {len(programs)} program(s), {inferences} inference(s)",
             *t.lines(), *e.lines(),
             f"per input    {on_chip / 1e3:.1f} nJ on chip, {(on_chip + link) / 1e3:.1f} nJ with "
             f"the link ({t.macs // inferences} MACs)"]
    return lines, {"traffic": t.to_dict(), "energy": e.to_dict(),
                   "nj_per_inference": on_chip / 1e3,
                   "nj_per_inference_with_link": (on_chip + link) / 1e3}


def sim_gemm(acc: Accelerator, job: GemmJob, *, waves=None, seed: int = 0, out_file=None,
             command: str = "sim", traffic: bool = False, trace=None,
             timeline=None) -> Report:
    """Run a prepared GEMM on ``acc`` (progress on standard error), write the result to
    ``out_file`` (``.npy``) when it is right, and return the report (on a board:
    ``_board_gemm_report``). ``trace`` / ``timeline``: files for the run's timeline (module
    docstring)."""
    m, k, n = job.shape
    tracer = (start_trace(acc, f"tpugen {command}: {m} x {k} x {n} GEMM on {acc.config.rows} x "
                               f"{acc.config.cols}, {acc.backend_name}")
              if trace or timeline else None)
    if tracer is not None:
        tracer.next_name = f"{m} x {k} x {n} GEMM"
    report = _sim_gemm(acc, job, waves=waves, seed=seed, out_file=out_file, command=command,
                       traffic=traffic)
    finish_trace(tracer, trace, timeline, lines=report.lines, fields=report.fields)
    return report


def _sim_gemm(acc: Accelerator, job: GemmJob, *, waves, seed, out_file, command,
              traffic) -> Report:
    cfg = acc.config
    m, k, n = job.shape
    sim = acc.backend_name in SIMULATORS
    t0 = time.monotonic()
    result = None
    with _heartbeat(acc, f"tpugen {command}: running the GEMM"):
        try:
            result = acc.execute(job, waves=waves, stalls=None,
                                 seed=seed if sim else 0)
        except ResultMismatch:
            pass
    wall = time.monotonic() - t0
    if _on_board(acc):
        return _board_gemm_report(acc, job, result, out_file=out_file, command=command)
    summary = quant_summary(job.quant)
    if summary:         # the clamp the results get: int4 results are clamped to -8..7 too
        t = cfg.operand_type
        summary.update(act_min=max(summary["act_min"], t.min),
                       act_max=min(summary["act_max"], t.max))
    kind = (f"{job.out}" if job.out in ("int32", "fp32") else f"{cfg.operand}: ") + ", ".join(
        f"{key} {value}" for key, value in summary.items()
        if not isinstance(value, list) or len(value) <= 4)
    title = (f"tpugen {command}: {m} x {k} x {n} GEMM ({kind} results), {cfg.rows} x "
             f"{cfg.cols} array, backend {acc.backend_name}")
    report = acc.last
    lines = report.lines()[:-1]
    fields = {"command": command, "backend": acc.backend_name, "config": cfg.to_dict(),
              "out": job.out, **({"quant": summary} if summary else {}),
              **report.to_dict(), "wall_time": round(wall, 3)}
    waves_ok = _waves_line(waves, lines, fields)
    _save_result(out_file, result, f"{result.dtype}, " if result is not None else "", m, n,
                 lines, fields)
    _traffic(job.compiled.program, lines, fields, traffic)
    lines.append(f"wall time    {wall:.1f} s")
    return Report(title, lines, report.passed and waves_ok, fields)


def sim_program(acc: Accelerator, program: Program, expected: MachineResult, *, name: str,
                waves=None, seed: int = 0, out_file=None, command: str = "sim",
                traffic: bool = False, trace=None, timeline=None) -> Report:
    """Run ``program`` on ``acc``, compare its host-out stream, ``last`` flags, error cause and
    retired count with ``expected`` (``golden_program``), write the host-out beats (beats x C,
    int64) to ``out_file`` (``.npy``), and return the report. (A board compares with the golden
    model's run of the program as it ran, long WRITE_HOSTs split: ``_board_program_report``.)
    ``trace`` / ``timeline``: files for the run's timeline (module docstring)."""
    tracer = None
    if trace or timeline:
        tracer = start_trace(acc, f"tpugen {command}: {name} on {acc.config.rows} x "
                                  f"{acc.config.cols}, {acc.backend_name}")
        tracer.next_name = str(name)
    report = _sim_program(acc, program, expected, name=name, waves=waves, seed=seed,
                          out_file=out_file, command=command, traffic=traffic)
    finish_trace(tracer, trace, timeline, lines=report.lines, fields=report.fields)
    return report


def _sim_program(acc: Accelerator, program: Program, expected: MachineResult, *, name: str,
                 waves, seed, out_file, command, traffic) -> Report:
    cfg = acc.config
    title = (f"tpugen {command}: program {name} ({len(program)} instructions), {cfg.rows} x "
             f"{cfg.cols} array, backend {acc.backend_name}")
    kw = {"waves": waves, "seed": seed} if acc.backend_name in SIMULATORS else {}
    t0 = time.monotonic()
    with _heartbeat(acc, f"tpugen {command}: running the program"):
        result = acc.run(program, **kw)
    wall = time.monotonic() - t0
    if _on_board(acc):
        return _board_program_report(acc, program, result, name=name, out_file=out_file,
                                     command=command)
    problems = list(result.mismatches) + expected.mismatches(result.host_out, result.last)
    if result.error != int(expected.error):
        problems.append(f"error cause {result.error}, expected {int(expected.error)}")
    retired = result.counters.get("retired")
    if retired is not None and retired != expected.retired:
        problems.append(f"retired {retired} instructions, expected {expected.retired}")
    lines = [_program_line(cfg, name, program, result)]
    if result.cycles is not None:
        lines.append(f"cycles       {result.cycles} (first command beat to last host-out beat)")
        lines += [f"{k:<12} {v}" for k, v in result.counters.items() if k != "cycles"]
    lines += [f"problem      {p}" for p in problems[:3]]
    fields = {"command": command, "backend": acc.backend_name, "config": cfg.to_dict(),
              "program": name, "instructions": len(program),
              "array": {"rows": cfg.rows, "cols": cfg.cols},
              "host_out_beats": len(result.host_out), "error_cause": int(result.error),
              "cycles": result.cycles, "counters": {k: int(v) for k, v in
                                                    result.counters.items()},
              "problems": problems, "wall_time": round(wall, 3)}
    waves_ok = _waves_line(waves, lines, fields)
    if out_file is not None:
        np.save(out_file, np.asarray(result.host_out, dtype=np.int64))
        lines.append(f"host-out     {out_file} ({len(result.host_out)} x {cfg.cols} int64)")
        fields["result_file"] = str(out_file)
    _traffic(program, lines, fields, traffic)
    lines.append(f"wall time    {wall:.1f} s")
    return Report(title, lines, not problems and waves_ok, fields)


def _save_result(out_file, result, kind: str, m: int, n: int, lines: list, fields: dict):
    """Write a GEMM's ``result`` to ``out_file`` (``.npy``) when there is one (the run passed)
    and say so in the report's ``lines`` and ``fields``."""
    if out_file is None:
        return
    if result is None:
        lines.append(f"result       not written to {out_file} (the run FAILed)")
        return
    np.save(out_file, result)
    lines.append(f"result       {out_file} ({kind}{m} x {n})")
    fields["result_file"] = str(out_file)


def _traffic(program: Program, lines: list, fields: dict, show: bool) -> None:
    """The program's traffic and energy estimate (``sim.traffic``, ``sim.energy``) in the
    report's ``fields``, and in its ``lines`` when ``show`` (``--traffic``)."""
    t = program_traffic(program)
    e = energy(t, program.config)
    fields["traffic"], fields["energy"] = t.to_dict(), e.to_dict()
    if show:
        lines += t.lines() + e.lines()


def _waves_line(waves, lines: list, fields: dict) -> bool:
    """The report's line of the waveform asked for; False (the run FAILs) when the simulator
    left no file there."""
    if not waves:
        return True
    fields["waves"] = str(waves)
    if not Path(waves).is_file():
        lines.append(f"waves        NOT WRITTEN: the simulator left no file at {waves}")
        fields["waves_missing"] = True
        return False
    lines.append(f"waves        {waves}")
    return True


def _program_line(cfg: Config, name: str, program: Program, result) -> str:
    return (f"program      {name}: {len(program)} instructions on a {cfg.rows} x {cfg.cols} "
            f"array, {len(result.host_out)} host-out beats, error cause {result.error}")


# --- on a board -------------------------------------------------------------------------------
def _board_title(acc: Accelerator, command: str) -> str:
    cfg, info = acc.config, acc.backend.info
    clk = info.get("clk_freq") or 0
    return (f"tpugen {command}: board at {acc.backend.port}: {cfg.rows} x {cfg.cols} array "
            f"({cfg.operand}), clock {clk / 1e6:.2f} MHz, link {info.get('baud')} baud")


def _link_lines(acc: Accelerator, result, ops: int | None) -> tuple[list, dict]:
    """What the link did (a ``BoardRunResult``'s ``wall_time``, ``link_bytes``, ``frames``)
    and the GOPS it makes (of ``ops`` operations) beside the array's peak at the board's
    clock: report lines and JSON fields."""
    cfg, info = acc.config, acc.backend.info
    clk = info.get("clk_freq") or 0
    wall = result.wall_time
    cycles = result.counters.get("cycles", 0)
    lines = [f"array busy   {result.counters.get('array_busy', 0)} cycles",
             f"wall time    {wall:.3f} s",
             f"link         {result.link_bytes} bytes ({result.bytes_to_board} to the board, "
             f"{result.bytes_from_board} back), {result.frames} frames"
             + (f", {result.link_bytes / wall / 1e3:.1f} kB/s" if wall else "")]
    fields = {"wall_time": round(wall, 6), "link_bytes": result.link_bytes,
              "bytes_to_board": result.bytes_to_board,
              "bytes_from_board": result.bytes_from_board,
              "frames": result.frames, "clk_freq": clk, "baud": info.get("baud")}
    rp = getattr(acc.backend, "last_resident", None)
    if rp is not None:      # the program ran as a resident model (tpugen.compiler.resident)
        loaded = "loaded now" if acc.backend.last_loaded else "already on the board"
        lines.append(f"resident     weights {rp.weight_bytes()} bytes on the board ({loaded}), "
                     f"{rp.weight_bytes(resident=False)} streamed; {rp.stored_words} words "
                     f"stored")
        fields["resident"] = {"weight_bytes": rp.weight_bytes(), "loaded": acc.backend.last_loaded,
                              "streamed_bytes": rp.weight_bytes(resident=False),
                              "stored_words": rp.stored_words}
    if clk:
        peak = 2 * cfg.rows * cfg.cols * clk / 1e9
        lines.append(f"peak         {peak:.2f} GOPS (2 x {cfg.rows} x {cfg.cols} x "
                     f"{clk / 1e6:.2f} MHz)")
        fields["gops_peak"] = peak
    if ops and clk and cycles and wall:
        lines.append(f"GOPS         {ops / (cycles / clk) / 1e9:.4f} from the counters, "
                     f"{ops / wall / 1e9:.6f} sustained over the link (wall time)")
        fields["gops_counters"] = ops / (cycles / clk) / 1e9
        fields["gops_wall"] = ops / wall / 1e9
    return lines, fields


def _board_problems(job: GemmJob, report: GemmReport) -> list:
    """A board GEMM's problems: the first wrong element (or why there is no result), then what
    the board backend found against the golden model (``RunResult.mismatches``)."""
    head = []
    if report.first_mismatch is not None:
        i, j, got, want = report.first_mismatch
        if job.out == "fp32":
            got, want = np.float32(got), np.float32(want)
        head = [f"C[{i}, {j}] = {got}, expected {want}"]
    elif report.wrong is None:
        try:
            job.compiled.decode(report.result.host_out)
        except ValueError as e:
            head = [f"the board gave no result: {e}"]
    return head + list(report.result.mismatches)


def _board_gemm_report(acc: Accelerator, job: GemmJob, got, *, out_file, command) -> Report:
    """The report of ``sim_gemm`` on a board (``got``: the result, ``None`` when it FAILed)."""
    cfg, report = acc.config, acc.last
    result = report.result
    m, k, n = job.shape
    problems = _board_problems(job, report)
    cycles = result.counters.get("cycles", 0)
    lines = [f"shape        {m} x {k} x {n} on a {cfg.rows} x {cfg.cols} array",
             f"cycles       {cycles} (board counter: core cycles incl. waiting on the link); "
             f"ideal {report.ideal}"]
    more, link = _link_lines(acc, result, 2 * m * k * n)
    lines += more
    fields = {"command": command, "port": str(acc.backend.port), "config": cfg.to_dict(),
              "shape": {"m": m, "k": k, "n": n}, "array": {"rows": cfg.rows, "cols": cfg.cols},
              "cycles": cycles, "ideal_cycles": report.ideal,
              "counters": {key: int(v) for key, v in result.counters.items()},
              "problems": problems, **link}
    _save_result(out_file, got, "", m, n, lines, fields)
    lines += [f"problem      {p}" for p in problems[:3]]
    return Report(_board_title(acc, command), lines, report.passed, fields)


def _board_program_report(acc: Accelerator, program: Program, result, *, name: str, out_file,
                          command) -> Report:
    """The report of ``sim_program`` on a board: the board backend compared the run with the
    golden model's run of the program as sent (``RunResult.mismatches``)."""
    cfg = program.config              # the board's, as the program saved it
    problems = list(result.mismatches)
    lines = [_program_line(cfg, name, program, result),
             f"cycles       {result.counters.get('cycles', 0)} (board counter)"]
    more, link = _link_lines(acc, result, None)
    lines += more
    fields = {"command": command, "port": str(acc.backend.port), "config": cfg.to_dict(),
              "program": name, "instructions": len(program),
              "array": {"rows": cfg.rows, "cols": cfg.cols},
              "host_out_beats": len(result.host_out), "error_cause": int(result.error),
              "counters": {key: int(v) for key, v in result.counters.items()},
              "problems": problems, **link}
    if out_file is not None:
        np.save(out_file, np.asarray(result.host_out, dtype=np.int64))
        lines.append(f"host-out     {out_file} ({len(result.host_out)} x {cfg.cols} int64)")
        fields["result_file"] = str(out_file)
    lines += [f"problem      {p}" for p in problems[:3]]
    return Report(_board_title(acc, command), lines, not problems, fields)
