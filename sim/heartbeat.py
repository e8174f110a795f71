"""Signs of life during long work (a simulator build, a simulation, starting a simulated board).

    with Heartbeat("demo: simulating the 100 x 70 x 50 GEMM on verilator"):
        ...

prints the label at once (unless ``announce=False``: then work that ends within ``every``
seconds prints nothing), then ``  ... <label>: 10 s`` every ``every`` seconds while the block
runs, and ``<label>: done in 12.3 s`` at its end when it printed any tick. Plain lines
(no cursor tricks), so they stay readable between other tools' output and in log files. Output
goes to standard error unless ``file`` says otherwise, so standard output keeps only results.
"""

import sys
import threading
import time
from numbers import Real

__all__ = ["Heartbeat"]


class Heartbeat:
    """A context manager that prints ``label`` and ``detail`` (if ``announce``), then a tick
    with the label every ``every`` seconds (> 0) from a daemon thread until the block ends (see
    the module docstring). ``file``: where (default ``sys.stderr`` at the time of each line)."""

    def __init__(self, label: str, *, detail: str = "", every: float = 10.0,
                 announce: bool = True, file=None):
        if not isinstance(label, str) or not label:
            raise ValueError(f"label must be a non-empty str, not {label!r}")
        if isinstance(every, bool) or not isinstance(every, Real) or not every > 0:
            raise ValueError(f"every must be a positive number of seconds, not {every!r}")
        self.label = label
        self.detail = str(detail)
        self.announce = bool(announce)
        self.every = float(every)
        self.file = file
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = None
        self._t0 = 0.0

    def _print(self, text):
        print(text, file=self.file or sys.stderr, flush=True)

    def _run(self):
        while not self._stop.wait(self.every):
            self.ticks += 1
            self._print(f"  ... {self.label}: {time.monotonic() - self._t0:.0f} s")

    def __enter__(self):
        self._t0 = time.monotonic()
        if self.announce:
            self._print(f"{self.label}{f' ({self.detail})' if self.detail else ''} ...")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        self._thread.join()
        if exc_type is None and self.ticks:
            self._print(f"{self.label}: done in {time.monotonic() - self._t0:.1f} s")
        return False
