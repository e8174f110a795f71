"""Running the FPGA tools one at a time and showing how far they got.

``run_tool`` runs one tool with its output (stdout and stderr) streamed line by line to a
``progress(step, line)`` callback, and stops it at a deadline; ``children_cpu`` is the CPU time
of the finished tools. ``ProgressPrinter`` is a ``progress`` callback for terminals, which
reads the placer's and the router's iterations and the Fmax out of nextpnr's output
(``progress_of``).
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import threading
import time

__all__ = ["ProgressPrinter", "progress_of", "run_tool", "children_cpu"]

#: nextpnr's progress, as (pattern, what it says): the analytic placer's and the annealer's
#: iterations, the router's (router1's table: arcs still queued, rip-ups; router2's lines:
#: overused wires), the Fmax.
_PROGRESS = (
    (re.compile(r"at iteration #(\d+), type ALL: wirelen solved = (\d+)"),
     "placing (analytic), iteration {0}, wirelength {1}"),
    (re.compile(r"at iteration #(\d+): temp = [\d.]+, timing cost = (\d+), wirelen = (\d+)"),
     "placing (annealing), iteration {0}, timing cost {1}"),
    (re.compile(r"Info:\s+(\d+) \|\s+(\d+)\s+(\d+) \|\s+\d+\s+\d+ \|\s+(\d+)\|"),
     "routing, iteration {0}: {3} arcs queued, {1} rip-ups so far"),
    (re.compile(r"iter=(\d+) wires=(\d+) overused=(\d+)"),
     "routing (router2), iteration {0}: {2} overused wires"),
    (re.compile(r"Info: Routing complete"), "routed"),
    (re.compile(r"Max frequency for clock\s+'[^']+':\s+([\d.]+) MHz"), "Fmax {0} MHz"),
)


def progress_of(line: str) -> str | None:
    """What a tool's output ``line`` says about its progress (placer / router iterations,
    Fmax), or ``None``."""
    for pattern, text in _PROGRESS:
        mm = pattern.search(line)
        if mm:
            return text.format(*mm.groups())
    return None


class ProgressPrinter:
    """A ``progress`` callback for terminals (standard error): a line when a step starts, then
    while it runs a line with its progress (``progress_of``: placer and router iterations) at
    most every ``interval`` seconds, and a dot per 200 other lines."""

    def __init__(self, file=None, interval: float = 20.0):
        self.file = file
        self.interval = interval
        self.lines = 0
        self.started = self.last = 0.0
        self.step = ""

    def __call__(self, step, line):
        out = self.file or sys.stderr
        now = time.monotonic()
        if line is None:
            print(f"\n[{step}] ", end="", file=out, flush=True)
            self.lines, self.step, self.started, self.last = 0, step, now, now
            return
        self.lines += 1
        said = progress_of(line)
        if said is not None and (now - self.last >= self.interval or said.startswith(
                ("routed", "Fmax"))):
            self.last = now
            print(f"\n[{step} {now - self.started:.0f} s] {said}", end="", file=out,
                  flush=True)
        elif self.lines % 200 == 0:
            print(".", end="", file=out, flush=True)


def run_tool(argv, cwd, env, step, progress, deadline=None):
    """Run one tool, its output (stdout and stderr) line by line to ``progress(step, line)``;
    returns ``(exit status, lines)``, the status ``None`` when it was stopped at ``deadline``
    (a ``time.monotonic()`` value)."""
    lines = []
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        stopped = threading.Event()
        watchdog = None
        if deadline is not None:
            def stop():
                stopped.set()
                proc.kill()
            watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), stop)
            watchdog.daemon = True
            watchdog.start()
        try:
            for line in proc.stdout:
                line = line.rstrip("\n")
                lines.append(line)
                progress(step, line)
        finally:
            if watchdog is not None:
                watchdog.cancel()
    return (None if stopped.is_set() else proc.returncode), lines


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished child processes."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
