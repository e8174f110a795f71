"""What several commands share: the argument types (one place), the array shape options and
``--config``, the debug fault cell, and the checks of the files a command reads or writes (all
before any tool runs; a mistake is a ``CLIError`` naming the option and the value)."""

import argparse
import importlib.util
import os
from pathlib import Path
from tokenize import TokenError

import numpy as np

from tpugen.backends import BACKENDS, SIMULATORS
from tpugen.cli.user_errors import CLIError
from tpugen.files import check_input_file, writable
from tpugen.fpga.flow.boards import get_board
from tpugen.hdl.config import OPERAND_TYPES, Config
from tpugen.sim.program import Program
from tpugen.simulate import TRACE_BACKENDS

__all__ = ["int_type", "positive_int", "nonneg_int", "positive_float", "cell", "integer",
           "int_list", "scales", "SHAPE_OPTIONS", "add_shape", "read_config", "make_config",
           "typed", "config", "fault", "named_board", "output_dir", "output_file", "load_npy",
           "load_program", "input_file", "add_trace", "trace_files"]


# --- argument types ---------------------------------------------------------------------------
def int_type(low, what):
    """An integer >= ``low`` (``what`` names it in the message)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return value
    return parse


positive_int = int_type(1, "a positive integer")
nonneg_int = int_type(0, "a non-negative integer")


def positive_float(unit):
    """A positive, finite number of ``unit``."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number of {unit}, not {text!r}") \
                from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be a positive number of {unit}, not "
                                             f"{text!r}")
        return value
    return parse


def cell(text):
    """``ROW,COL``."""
    try:
        i, j = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be ROW,COL, not {text!r}") from None
    return (i, j)


def integer(text):
    """Any integer."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}") from None


def int_list(text):
    """An integer, or a comma-separated list of them (an int64 array)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer or a comma-separated list of "
                                         f"integers (one per output column), not {text!r}") \
            from None
    return values[0] if len(values) == 1 else np.array(values, dtype=np.int64)


def scales(text):
    """``S_IN,S_W,S_OUT`` (positive; several ``S_W``: one per output column)."""
    try:
        parts = text.split(",")
        values = [float(v) for v in parts]
    except ValueError:
        values = []
    # Scales are float32 in TFLite: each must be positive and finite as a float32 too.
    if len(values) < 3 or not all(0 < np.float32(v) < np.inf for v in values):
        raise argparse.ArgumentTypeError(f"must be S_IN,S_W,S_OUT (positive scales, finite and "
                                         f"nonzero as float32; one S_W per output column or "
                                         f"one for all), not {text!r}")
    return values[0], values[1:-1] if len(values) > 3 else values[1], values[-1]


# --- the array's config ----------------------------------------------------------------------
#: The Config field each shape option sets.
SHAPE_OPTIONS = {"rows": "--rows", "cols": "--cols", "acc_width": "--acc-width",
                 "operand": "--operand"}


def add_shape(p, *, what="Config's defaults"):
    """``--rows``, ``--cols``, ``--acc-width``, ``--operand`` and ``--config``."""
    p.add_argument("--rows", type=int, help=f"array rows R (1..256; default: {what})")
    p.add_argument("--cols", type=int, help=f"array columns C (1..256; default: {what})")
    p.add_argument("--acc-width", dest="acc_width", type=int, help="accumulator bits (16..64)")
    p.add_argument("--operand", help=f"operand type: {', '.join(OPERAND_TYPES)} (default int8)")
    p.add_argument("--config", metavar="FILE",
                   help="a config.json: every field from it; the options above override only "
                        "what you type")


def read_config(text: str, option: str = "--config") -> dict:
    """The fields of a config file, checked (``Config.from_json``)."""
    path = input_file(text, option, "a config file")
    try:
        data = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CLIError(f"{option} {text}: not a text file (a config is UTF-8 JSON)") from None
    except OSError as e:
        raise CLIError(f"{option} {text}: cannot read it: {e.strerror}") from None
    try:
        return Config.from_json(data).to_dict()
    except (TypeError, ValueError) as e:
        raise CLIError(f"{option} {text}: {e}") from None


def make_config(base: dict, overrides: dict, source: str | None) -> Config:
    """``Config(**base)`` with ``overrides`` (the options the user typed); an error names the
    option that caused it, or the config file."""
    try:
        return Config(**{**base, **overrides})
    except (TypeError, ValueError) as e:
        field = str(e).split(" ", 1)[0]
        if field in overrides:
            raise CLIError(f"{SHAPE_OPTIONS.get(field, field)} {overrides[field]}: {e}") \
                from None
        typed_ = " ".join(f"{SHAPE_OPTIONS.get(k, k)} {v}" for k, v in overrides.items())
        if source:
            raise CLIError(f"--config {source}" + (f" with {typed_}" if typed_ else "")
                           + f": {e}") from None
        raise CLIError(f"{typed_}: {e}" if typed_ else str(e)) from None


def typed(args, fields) -> dict:
    """The options of ``fields`` the user typed."""
    return {f: getattr(args, f) for f in fields if getattr(args, f, None) is not None}


def config(args) -> Config:
    """The Config of ``--config`` (every field) with only the options the user typed
    (``--rows``, ``--cols``, ``--acc-width``, ``--operand``) overriding it; without
    ``--config``, the options over ``Config``'s defaults."""
    base = read_config(args.config) if args.config is not None else {}
    return make_config(base, typed(args, SHAPE_OPTIONS), args.config)


def fault(args, cfg: Config, backend: str | None = None):
    """``--debug-fault-cell``, checked against the array (and the backend)."""
    at = getattr(args, "debug_fault_cell", None)
    if at is None:
        return None
    if backend is not None and not BACKENDS[backend].takes_fault:
        raise CLIError(f"--debug-fault-cell: the {backend} backend has no cells to corrupt "
                       f"(use one of {', '.join(SIMULATORS)})")
    i, j = at
    if not (0 <= i < cfg.rows and 0 <= j < cfg.cols):
        raise CLIError(f"--debug-fault-cell {i},{j}: not a cell of the {cfg.rows} x {cfg.cols} "
                       f"array (ROW 0..{cfg.rows - 1}, COL 0..{cfg.cols - 1})")
    return at


def named_board(name: str):
    """The board of ``--board NAME`` (``tpugen.fpga.flow.boards``)."""
    try:
        return get_board(name)
    except ValueError as e:
        raise CLIError(f"--board {name}: {e}") from None


# --- files ------------------------------------------------------------------------------------
def input_file(text: str, option: str, what: str = "a file") -> Path:
    """A file to read (``tpugen.files.check_input_file``): named, existing, a regular file."""
    try:
        return check_input_file(text, f"{option} {text}" if text else option, what)
    except ValueError as e:
        raise CLIError(str(e)) from None


def output_dir(text: str, option: str) -> Path:
    """A directory to write into: created if missing; not a file; writable."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise CLIError(f"{option} {text}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CLIError(f"{option} {text}: cannot create the directory: {e.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK) or not writable(path / ".tpugen-write-test"):
        raise CLIError(f"{option} {text}: the directory is not writable")
    return path


def output_file(text: str | None, option: str, suffix: str) -> Path | None:
    """A file to write: ``suffix``; its folder exists and is writable."""
    if text is None:
        return None
    path = Path(text)
    if path.suffix != suffix:
        raise CLIError(f"{option} {text}: the file name must end in {suffix}")
    if path.is_dir():
        raise CLIError(f"{option} {text}: is a directory")
    if not path.parent.is_dir():
        raise CLIError(f"{option} {text}: the folder {str(path.parent)!r} does not exist")
    if not writable(path):
        raise CLIError(f"{option} {text}: not writable")
    return path


def _npy_header(path: Path, option: str, text: str) -> None:
    """Check that a ``.npy`` file holds the data its header claims (a header may claim a shape
    far larger than the file: loading it would ask for that much memory)."""
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            shape, _, dtype = _read_header(f, version)
        except Exception:            # noqa: BLE001 (any malformed header: np.load says so below)
            return
        data = path.stat().st_size - f.tell()
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if dtype.hasobject or need > data:
        raise CLIError(f"{option} {text}: its header claims a {' x '.join(map(str, shape))} "
                       f"{dtype} array ({need:,} bytes) but the file holds {data:,} bytes")


def _read_header(f, version):
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    return np.lib.format.read_array_header_2_0(f)


def load_npy(text: str, option: str) -> np.ndarray:
    """The NumPy array in the ``.npy`` file ``text``."""
    path = input_file(text, option, "a NumPy .npy file")
    _npy_header(path, option, text)
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, SyntaxError, TokenError) as e:
        raise CLIError(f"{option} {text}: not a NumPy .npy array file ({e})") from None


def load_program(text: str) -> Program:
    """The saved program (``--program``) in ``text``."""
    path = input_file(text, "--program", "a program file")
    try:
        return Program.load(path)
    except UnicodeDecodeError:
        raise CLIError(f"--program {text}: not a text file (a program is JSON)") from None
    except (TypeError, ValueError) as e:
        raise CLIError(f"--program {text}: {e}") from None


# --- timelines (--trace, --timeline) ------------------------------------------------------------
def add_trace(p) -> None:
    """``--trace FILE.json`` and ``--timeline FILE.png`` (``tpugen.sim.trace``)."""
    p.add_argument("--trace", metavar="FILE.json",
                   help="write the run's engine timeline as Chrome / Perfetto trace-event JSON "
                        "(verilator: cycle-exact from the RTL; model: the model's schedule; "
                        "board: the link's frames)")
    p.add_argument("--timeline", metavar="FILE.png",
                   help="draw the same timeline as a Gantt chart with utilization over time")


def trace_files(args, backend: str) -> tuple[Path | None, Path | None]:
    """The files of ``--trace`` and ``--timeline``, checked (and that ``backend`` gives a
    timeline: ``tpugen.simulate.TRACE_BACKENDS``)."""
    trace = output_file(getattr(args, "trace", None), "--trace", ".json")
    timeline = output_file(getattr(args, "timeline", None), "--timeline", ".png")
    if (trace or timeline) and backend not in TRACE_BACKENDS:
        option = "--trace" if trace else "--timeline"
        raise CLIError(f"{option}: the {backend} backend gives no timeline; use --backend "
                       f"verilator (cycle-exact from the RTL) or model (the model's schedule)")
    if timeline and importlib.util.find_spec("matplotlib") is None:
        raise CLIError(f"--timeline {args.timeline}: drawing needs matplotlib (pip install "
                       f"matplotlib, or tpugen's dev extra); --trace needs nothing more")
    return trace, timeline
