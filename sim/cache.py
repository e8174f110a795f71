"""Where tpugen writes what it generates and caches (one directory, never inside the package),
and how much of it is kept.

``build_root()`` is ``$TPUGEN_BUILD_DIR`` when that is set, else ``build/`` under the current
directory (like ``tpugen verilog``'s default output). It is read at each call, so a process may
change directory or the variable. Its areas:

  ``cocotb/<simulator>/<key>/``  simulator builds (``sim.runner.build``): a cache, kept within
        ``$TPUGEN_CACHE_MB`` megabytes (default ``DEFAULT_CACHE_MB``); when a build is made
        or reused, the least recently used builds beyond that size are removed (never one
        that a simulation is running from, see ``in_use``).
  ``jobs/<name>/``  a simulator run's job folder (programs, results, log: ``backends.cocotb_sim``):
        the newest ``$TPUGEN_JOBS_KEPT`` (default ``DEFAULT_JOBS_KEPT``) are kept, older ones
        removed when a new one is made.
  ``fpga/``, ``verilog/``  FPGA builds (bitstreams) and ``tpugen verilog``'s output: results,
        not caches, kept until ``tpugen clean``.

``tpugen clean`` (``clean_build_root``) removes them all.
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import tpugen.hdl

__all__ = ["BUILD_DIR_ENV", "CACHE_MB_ENV", "JOBS_KEPT_ENV", "DEFAULT_CACHE_MB",
           "DEFAULT_JOBS_KEPT", "AREAS", "build_root", "gateware_digest", "use_entry",
           "in_use", "new_job_dir", "prune", "clean_build_root"]

#: The environment variable that moves the build directory.
BUILD_DIR_ENV = "TPUGEN_BUILD_DIR"
#: The environment variable that sets the simulator builds' size budget (megabytes).
CACHE_MB_ENV = "TPUGEN_CACHE_MB"
#: The environment variable that sets how many job folders are kept.
JOBS_KEPT_ENV = "TPUGEN_JOBS_KEPT"
#: Default budget of the simulator builds, in megabytes (a Verilator build of a core is about
#: 150 MB, an Icarus build well under 1 MB).
DEFAULT_CACHE_MB = 4096
#: Default number of job folders kept.
DEFAULT_JOBS_KEPT = 32
#: The build directory's areas (see the module docstring); ``tpugen clean`` removes them.
AREAS = ("cocotb", "jobs", "fpga", "verilog")

_USED = ".used"       # its mtime: when the entry was last used
_IN_USE = ".in_use"   # held with a shared lock while a simulation runs from the entry


def build_root() -> Path:
    """The build directory (see the module docstring); not created here."""
    value = os.environ.get(BUILD_DIR_ENV)
    return Path(value) if value else Path.cwd() / "build"


def gateware_digest() -> str:
    """A hash of the generator's sources (``tpugen.hdl``), so that cached builds are rebuilt
    when the hardware's source changes (builds of board tops add ``tpugen.fpga``'s own digest
    to their key)."""
    h = hashlib.sha256()
    for p in sorted(Path(tpugen.hdl.__file__).parent.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"${name} must be a non-negative integer, not {text!r}")
    return value


def _size(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, f)).st_size
    return total


def _last_use(entry: Path) -> float:
    for p in (entry / _USED, entry):
        with contextlib.suppress(OSError):
            return p.stat().st_mtime
    return 0.0


def use_entry(path) -> Path:
    """Create (if needed) the simulator build folder ``path`` (under ``cocotb/``), mark it
    as just used, and keep the builds within their budget (``prune``); returns ``path``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / _USED).touch()
    prune(keep=path)
    return path


@contextlib.contextmanager
def in_use(path):
    """Hold the build folder ``path`` while a simulation runs from it: ``prune`` skips it."""
    path = Path(path)
    (path / _USED).touch()
    with open(path / _IN_USE, "w") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        try:
            yield path
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _remove_unless_in_use(entry: Path) -> bool:
    """Remove a build folder unless a simulation holds it or a build of it is under way."""
    locks = []
    try:
        for name in (_IN_USE, ".lock"):     # .lock: held by sim.runner.build while it builds
            f = open(entry / name, "a")     # noqa: SIM115 (closed below)
            locks.append(f)
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
        shutil.rmtree(entry, ignore_errors=True)
        return True
    except OSError:
        return False
    finally:
        for f in locks:
            f.close()


def new_job_dir(prefix: str = "job_") -> Path:
    """A new, empty job folder under ``jobs/``; the oldest beyond ``$TPUGEN_JOBS_KEPT`` are
    removed."""
    jobs = build_root() / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=jobs))
    kept = max(1, _env_int(JOBS_KEPT_ENV, DEFAULT_JOBS_KEPT))
    entries = sorted((p for p in jobs.iterdir() if p.is_dir() and p != path), key=_last_use,
                     reverse=True)
    for old in entries[kept - 1:]:
        shutil.rmtree(old, ignore_errors=True)
    return path


def prune(keep=None) -> list:
    """Remove the least recently used simulator builds until those left fit in
    ``$TPUGEN_CACHE_MB``; ``keep`` (a folder) and folders in use stay. Returns the removed."""
    budget = _env_int(CACHE_MB_ENV, DEFAULT_CACHE_MB) * 2**20
    root = build_root() / "cocotb"
    if not root.is_dir():
        return []
    keep = Path(keep).resolve() if keep is not None else None
    entries = [e for sim in root.iterdir() if sim.is_dir() for e in sim.iterdir() if e.is_dir()]
    entries.sort(key=_last_use, reverse=True)              # newest first
    sizes = {e: _size(e) for e in entries}
    total = sum(sizes.values())
    removed = []
    for e in reversed(entries):                            # oldest first
        if total <= budget:
            break
        if keep is not None and e.resolve() == keep:
            continue
        if _remove_unless_in_use(e):
            total -= sizes[e]
            removed.append(e)
    return removed


def clean_build_root() -> tuple[list, int]:
    """``tpugen clean``: remove the build directory's areas (``AREAS``); when the build
    directory is the default ``./build`` (no ``$TPUGEN_BUILD_DIR``), everything in it. Returns
    the removed paths and their bytes."""
    root = build_root()
    if not root.is_dir():
        return [], 0
    if os.environ.get(BUILD_DIR_ENV):
        targets = [root / a for a in AREAS if (root / a).exists()]
    else:
        targets = sorted(root.iterdir())
    removed, size = [], 0
    for t in targets:
        size += _size(t) if t.is_dir() else t.lstat().st_size
        if t.is_dir() and not t.is_symlink():
            shutil.rmtree(t, ignore_errors=True)
        else:
            t.unlink(missing_ok=True)
        removed.append(t)
    return removed, size
