"""Where tpugen writes what it generates and caches (one directory, never inside the package),
how much of it is kept, and what ``tpugen clean`` may remove.

``build_root()`` is ``$TPUGEN_BUILD_DIR`` when that is set, else ``build/`` under the current
directory (like ``tpugen verilog``'s default output). It is read at each call, so a process may
change directory or the variable. Its areas:

  ``cocotb/<simulator>/<key>/``  simulator builds (``sim.runner.build``)
  ``verilator/<key>/``           compiled harness builds (``tb.verilator_harness``), and the
                                 Verilator runtime they link (``verilator/runtime-*``)
  ``jobs/<name>/``               a simulator run's job folder (programs, results, log)
  ``fpga/``, ``primitives/``     FPGA builds and models of FPGA primitives: results, kept
                                 until ``tpugen clean``

**Ownership.** Every folder tpugen makes there is marked: an *area* (the build directory
itself, ``cocotb/``, ``jobs/``, ...) holds a file ``AREA_MARKER`` and may also hold things that
are not tpugen's; an *entry* (a build, a job, an FPGA build) holds ``MARKER`` and everything in
it is tpugen's. ``tpugen clean`` (``clean_build_root``) removes marked entries and then the
areas left empty, and nothing else: a CMake tree in ``./build``, a user's ``fpga/top.v`` or a
folder of an older tpugen without a marker is left and named.

**One disk budget.** Simulator builds, harness builds and job folders together are kept within
``$TPUGEN_CACHE_MB`` megabytes (default ``DEFAULT_CACHE_MB``): whenever an entry is made or
reused, the least recently used beyond that size are removed, never one in use (a simulation
holds ``in_use``; a build holds its ``.lock``). At most ``$TPUGEN_JOBS_KEPT`` (default
``DEFAULT_JOBS_KEPT``) finished job folders are kept; a job folder whose process died (no
``.done``, its lock free) is removed when the next job starts.

A bad ``$TPUGEN_BUILD_DIR`` (a file, or a place that cannot be written), ``$TPUGEN_CACHE_MB`` or
``$TPUGEN_JOBS_KEPT`` raises ``BuildDirError`` naming the variable and its value.
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
           "DEFAULT_JOBS_KEPT", "MARKER", "AREA_MARKER", "CACHED_AREAS", "BuildDirError",
           "check_settings", "build_root", "area", "entry_dir", "gateware_digest", "use_entry",
           "in_use",
           "job_dir", "prune", "clean_build_root"]

#: The environment variable that moves the build directory.
BUILD_DIR_ENV = "TPUGEN_BUILD_DIR"
#: The environment variable that sets the cache's size budget (megabytes).
CACHE_MB_ENV = "TPUGEN_CACHE_MB"
#: The environment variable that sets how many finished job folders are kept.
JOBS_KEPT_ENV = "TPUGEN_JOBS_KEPT"
#: Default budget of the cache, in megabytes (a Verilator build of a core is about 150 MB, an
#: Icarus build well under 1 MB).
DEFAULT_CACHE_MB = 4096
#: Default number of finished job folders kept.
DEFAULT_JOBS_KEPT = 32
#: The file that marks a folder tpugen made, all of whose contents are tpugen's.
MARKER = ".tpugen"
#: The file that marks an area: a folder tpugen made (or uses) to hold its entries.
AREA_MARKER = ".tpugen-area"
#: The areas whose entries count against the disk budget: ``(area path, entry depth)``.
CACHED_AREAS = (("cocotb", 2), ("verilator", 1), ("jobs", 1))

_MARKER_TEXT = "made by tpugen: `tpugen clean` removes this folder\n"
_AREA_TEXT = "used by tpugen: `tpugen clean` removes the folders in it that hold a .tpugen file\n"
_USED = ".used"       # its mtime: when the entry was last used
_IN_USE = ".in_use"   # held with a shared lock while a simulation or job runs from the entry
_DONE = ".done"       # a job folder whose job finished
_LOCK = ".lock"       # held by a build of the entry (sim.runner, tb.verilator_harness)
_KEEP = "runtime-"    # verilator/runtime-*: linked by every harness build, never pruned


class BuildDirError(ValueError):
    """The build directory or a setting of the cache is unusable (the message names it)."""


def build_root() -> Path:
    """The build directory (see the module docstring); not created here."""
    value = os.environ.get(BUILD_DIR_ENV)
    if value is None:
        return Path.cwd() / "build"
    if not value.strip():
        raise BuildDirError(f"${BUILD_DIR_ENV} is empty: unset it or name a directory")
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise BuildDirError(f"${BUILD_DIR_ENV}={value}: not a directory")
    return path


def check_settings() -> None:
    """Raise ``BuildDirError`` now for a bad ``$TPUGEN_BUILD_DIR``, ``$TPUGEN_CACHE_MB`` or
    ``$TPUGEN_JOBS_KEPT`` (the command line checks them before it runs anything)."""
    build_root()
    _env_int(CACHE_MB_ENV, DEFAULT_CACHE_MB)
    _env_int(JOBS_KEPT_ENV, DEFAULT_JOBS_KEPT)


def _mark(folder: Path, marker: str, text: str) -> None:
    f = folder / marker
    if not f.exists():
        f.write_text(text)


def area(*parts: str) -> Path:
    """The area ``build_root() / parts...``, made (with every area above it) and marked."""
    root = build_root()
    folder = root
    try:
        for part in ("", *parts):
            folder = folder / part if part else folder
            folder.mkdir(parents=True, exist_ok=True)
            _mark(folder, AREA_MARKER, _AREA_TEXT)
    except OSError as e:
        where = f"${BUILD_DIR_ENV}={root}" if os.environ.get(BUILD_DIR_ENV) else str(root)
        raise BuildDirError(f"{where}: cannot write there ({e.strerror or e})") from None
    return folder


def entry_dir(path) -> Path:
    """The entry folder ``path`` (its parent an area under the build root, which is made),
    made and marked as tpugen's."""
    path = Path(path)
    root = build_root()
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise ValueError(f"{path} is not under the build directory {root}") from None
    area(*rel.parts[:-1])
    path.mkdir(exist_ok=True)
    _mark(path, MARKER, _MARKER_TEXT)
    return path


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
        raise BuildDirError(f"${name} must be a non-negative integer, not {text!r}")
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
    """Make (if needed) the cached entry ``path`` (a simulator or harness build), mark it as
    just used, and keep the cache within its budget (``prune``); returns ``path``."""
    path = entry_dir(path)
    (path / _USED).touch()
    prune(keep=path)
    return path


@contextlib.contextmanager
def in_use(path):
    """Hold the entry ``path`` while a simulation runs from it: ``prune`` skips it."""
    path = Path(path)
    (path / _USED).touch()
    with open(path / _IN_USE, "w") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        try:
            yield path
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _remove_unless_in_use(entry: Path) -> bool:
    """Remove an entry unless a simulation holds it or a build of it is under way."""
    locks = []
    try:
        for name in (_IN_USE, _LOCK):
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


@contextlib.contextmanager
def job_dir(prefix: str = "job_"):
    """A new job folder under ``jobs/``, held (``in_use``) while the ``with`` body runs and
    marked done when it ends without an exception. Before it is made, the folders of jobs that
    died are removed and the finished ones beyond ``$TPUGEN_JOBS_KEPT`` (oldest first)."""
    kept = max(1, _env_int(JOBS_KEPT_ENV, DEFAULT_JOBS_KEPT))
    jobs = area("jobs")
    finished = []
    for old in jobs.iterdir():
        if not (old / MARKER).is_file() or old.is_symlink():
            continue
        if (old / _DONE).exists():
            finished.append(old)
        else:
            _remove_unless_in_use(old)          # a job that died (its lock is free)
    finished.sort(key=_last_use, reverse=True)
    for old in finished[kept - 1:]:
        _remove_unless_in_use(old)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=jobs))
    _mark(path, MARKER, _MARKER_TEXT)
    with in_use(path):
        yield path
        (path / _DONE).touch()
    prune(keep=path)


def _cached_entries() -> list[Path]:
    root = build_root()
    out = []
    for name, depth in CACHED_AREAS:
        folder = root / name
        if not folder.is_dir():
            continue
        found = [folder]
        for _ in range(depth):
            found = [e for f in found for e in f.iterdir() if e.is_dir() and not e.is_symlink()]
        out += [e for e in found if (e / MARKER).is_file()]
    return out


def prune(keep=None) -> list:
    """Remove the least recently used cached entries (simulator builds, harness builds, job
    folders) until those left fit in ``$TPUGEN_CACHE_MB``; ``keep`` (a folder), the Verilator
    runtime and entries in use stay. Returns the removed."""
    budget = _env_int(CACHE_MB_ENV, DEFAULT_CACHE_MB) * 2**20
    keep = Path(keep).resolve() if keep is not None else None
    entries = sorted(_cached_entries(), key=_last_use, reverse=True)     # newest first
    sizes = {e: _size(e) for e in entries}
    total = sum(sizes.values())
    removed = []
    for e in reversed(entries):                                         # oldest first
        if total <= budget:
            break
        if (keep is not None and e.resolve() == keep) or e.name.startswith(_KEEP):
            continue
        if _remove_unless_in_use(e):
            total -= sizes[e]
            removed.append(e)
    return removed


def clean_build_root() -> tuple[list, int, list]:
    """``tpugen clean``: remove what tpugen made in the build directory (marked entries, then
    the areas left empty), and nothing else. Returns the removed paths, their bytes, and the
    paths left because tpugen did not make them (or a simulation is using them)."""
    removed, left = [], []
    size = 0

    def sweep(folder: Path) -> bool:
        nonlocal size
        for child in sorted(folder.iterdir()):
            if child.name == AREA_MARKER:
                continue
            is_dir = child.is_dir() and not child.is_symlink()
            if is_dir and (child / MARKER).is_file():
                n = _size(child)
                if _remove_unless_in_use(child):
                    removed.append(child)
                    size += n
                else:
                    left.append(child)
            elif is_dir and (child / AREA_MARKER).is_file():
                if sweep(child):
                    (child / AREA_MARKER).unlink()
                    child.rmdir()
                    removed.append(child)
            else:
                left.append(child)
        return [p.name for p in folder.iterdir()] == [AREA_MARKER]

    root = build_root()
    if not root.is_dir():
        return [], 0, []
    if not (root / AREA_MARKER).is_file():
        return [], 0, sorted(root.iterdir())
    if sweep(root):
        (root / AREA_MARKER).unlink()
        with contextlib.suppress(OSError):
            root.rmdir()
    return removed, size, left
