"""The ``tpugen`` command line.

Exit status: 0 PASS (or done); 1 FAIL (a result differs from the golden model) or a tool, build
or run failed; 2 a usage error; 130 interrupted (Ctrl-C).

Every command checks all of its arguments and reads its input files before it looks for a
tool, builds or simulates anything. A user's mistake is one line on standard error that names
the option or file and the bad value (``tpugen: error: --rows 0: rows must be in 1..256, not
0``); anything else (a bug) shows its traceback. ``TPUGEN_DEBUG=1`` shows the traceback of user
errors too.
"""

import argparse
import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import serial
from amaranth.hdl import UnusedElaboratable

from tpugen import __version__
from tpugen.accelerator import Accelerator, prepare_gemm, quant_options
from tpugen.backends import BACKENDS, SIMULATORS
from tpugen.board_run import board_gemm, board_program, open_board
from tpugen.demo import DEMO_SHAPE, run_demo
from tpugen.fpga.flow.bitstream import (
    DEFAULT_TIMEOUT,
    TOPS,
    ProgressPrinter,
    bitstream_path,
    build_board,
    build_dir,
)
from tpugen.fpga.flow.boards import BOARDS, get_board
from tpugen.fpga.flow.flash import flash
from tpugen.fpga.flow.listing import list_boards
from tpugen.fpga.gateware.pll import core_clock
from tpugen.fpga.host.board_link import ConfigMismatch
from tpugen.fpga.host.serial_link import LinkError, LinkTimeout
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.generate import write_verilog
from tpugen.hdl.config import OPERAND_TYPES, Config
from tpugen.sim.cache import clean_build_root
from tpugen.sim.program import Program
from tpugen.sim.requant import ACTIVATIONS, QuantParams
from tpugen.simulate import (
    check_waves,
    golden_program,
    random_operands,
    relu_quant,
    sim_gemm,
    sim_program,
)
from tpugen.tflite.model import TFLiteModel
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro, tflite_micro_runtime

__all__ = ["main", "build_parser", "CLIError"]


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


# --- parsing ----------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """Errors become ``CLIError`` (one line); remembers which options take a value."""

    value_options: set = set()

    def error(self, message):
        raise CLIError(message)

    def add_argument(self, *names, **kw):
        if kw.get("action") in (None, "store") and names and names[0].startswith("-"):
            _Parser.value_options.update(names)
        return super().add_argument(*names, **kw)


def _join_negative(argv: list) -> list:
    """``--opt -1,0`` as ``--opt=-1,0``: argparse takes a value that starts with ``-`` and is
    not a plain number for an option, and would say "expected one argument"."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if (a in _Parser.value_options and i + 1 < len(argv)
                and re.match(r"-[\d.]", argv[i + 1])):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _int_type(low, what):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return value
    return parse


_positive_int = _int_type(1, "a positive integer")
_nonneg_int = _int_type(0, "a non-negative integer")


def _positive_float(unit):
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


def _cell(text):
    try:
        i, j = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be ROW,COL, not {text!r}") from None
    return (i, j)


# --- checks of files and values (before any tool runs) ---------------------------------------
#: The Config field each shape option sets.
_SHAPE_OPTIONS = {"rows": "--rows", "cols": "--cols", "acc_width": "--acc-width",
                  "operand": "--operand"}


def _read_config(text: str, option: str = "--config") -> dict:
    """The fields of a config file, checked (``Config.from_json``)."""
    path = Path(text)
    if not path.exists():
        raise CLIError(f"{option} {text}: no such file")
    if path.is_dir():
        raise CLIError(f"{option} {text}: is a directory, not a config file")
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


def _make_config(base: dict, overrides: dict, source: str | None) -> Config:
    """``Config(**base)`` with ``overrides`` (the options the user typed); an error names the
    option that caused it, or the config file."""
    try:
        return Config(**{**base, **overrides})
    except (TypeError, ValueError) as e:
        field = str(e).split(" ", 1)[0]
        if field in overrides:
            raise CLIError(f"{_SHAPE_OPTIONS.get(field, field)} {overrides[field]}: {e}") \
                from None
        typed = " ".join(f"{_SHAPE_OPTIONS.get(k, k)} {v}" for k, v in overrides.items())
        if source:
            raise CLIError(f"--config {source}" + (f" with {typed}" if typed else "")
                           + f": {e}") from None
        raise CLIError(f"{typed}: {e}" if typed else str(e)) from None


def _typed(args, fields) -> dict:
    return {f: getattr(args, f) for f in fields if getattr(args, f, None) is not None}


def _config(args) -> Config:
    """The Config of ``--config`` (every field) with only the options the user typed
    (``--rows``, ``--cols``, ``--acc-width``, ``--operand``) overriding it; without
    ``--config``, the options over ``Config``'s defaults."""
    base = _read_config(args.config) if args.config else {}
    return _make_config(base, _typed(args, _SHAPE_OPTIONS), args.config)


def _fault(args, cfg: Config, backend: str | None = None):
    """``--debug-fault-cell``, checked against the array (and the backend)."""
    cell = getattr(args, "debug_fault_cell", None)
    if cell is None:
        return None
    if backend is not None and not BACKENDS[backend].takes_fault:
        raise CLIError(f"--debug-fault-cell: the {backend} backend has no cells to corrupt "
                       f"(use one of {', '.join(SIMULATORS)})")
    i, j = cell
    if not (0 <= i < cfg.rows and 0 <= j < cfg.cols):
        raise CLIError(f"--debug-fault-cell {i},{j}: not a cell of the {cfg.rows} x {cfg.cols} "
                       f"array (ROW 0..{cfg.rows - 1}, COL 0..{cfg.cols - 1})")
    return cell


def _output_dir(text: str, option: str) -> Path:
    """A directory to write into: created if missing; not a file; writable."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise CLIError(f"{option} {text}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CLIError(f"{option} {text}: cannot create the directory: {e.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CLIError(f"{option} {text}: the directory is not writable")
    return path


def _output_file(text: str | None, option: str, suffix: str) -> Path | None:
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
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise CLIError(f"{option} {text}: not writable")
    return path


def _load_npy(text: str, option: str) -> np.ndarray:
    path = Path(text)
    if not path.is_file():
        raise CLIError(f"{option} {text}: " + ("is a directory" if path.is_dir()
                                               else "no such file"))
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise CLIError(f"{option} {text}: not a NumPy .npy array file ({e})") from None


def _load_program(text: str) -> Program:
    path = Path(text)
    if not path.is_file():
        raise CLIError(f"--program {text}: " + ("is a directory" if path.is_dir()
                                                else "no such file"))
    try:
        return Program.load(path)
    except UnicodeDecodeError:
        raise CLIError(f"--program {text}: not a text file (a program is JSON)") from None
    except (TypeError, ValueError) as e:
        raise CLIError(f"--program {text}: {e}") from None


def _available_memory() -> int | None:
    """Bytes of memory available (Linux ``MemAvailable``), or None when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _check_memory(cfg: Config, m: int, k: int, n: int, source: str) -> None:
    """Refuse a GEMM whose operands, program and results (int64, with their copies) would not
    fit in the memory available."""
    lanes = max(cfg.rows, cfg.cols)
    need = 8 * (m * k + k * n + 3 * (m * k * lanes // cfg.rows + k * n * lanes // cfg.cols
                                     + 2 * m * n))
    avail = _available_memory()
    if avail is not None and need > avail:
        raise CLIError(f"{source}: a {m} x {k} x {n} GEMM needs about {need / 2**30:.1f} GiB "
                       f"of memory (operands, program, results), more than the "
                       f"{avail / 2**30:.1f} GiB available")


_DIMS = ("m", "k", "n")


def _gemm_source(args) -> dict:
    """The operands the user asked for, checked as far as possible without the config:
    ``--a``/``--b`` loaded (``{"a", "b", "names"}``), or ``--m``/``--k``/``--n`` given
    (``{"dims", "names"}``)."""
    dims = {d: getattr(args, d) for d in _DIMS if getattr(args, d) is not None}
    if args.a is not None or args.b is not None:
        if args.a is None or args.b is None:
            raise CLIError(f"{'--b' if args.a is None else '--a'} is missing: give both --a "
                           f"A.npy and --b B.npy")
        a = _load_npy(args.a, "--a")
        b = _load_npy(args.b, "--b")
        got = {}
        if a.ndim == 2:
            got.update(m=a.shape[0], k=a.shape[1])
        if b.ndim == 2:
            got.update(n=b.shape[1])
        for d, v in dims.items():
            if d in got and got[d] != v:
                raise CLIError(f"--{d} {v}: the operands --a {args.a} --b {args.b} give "
                               f"{d.upper()} = {got[d]}")
        return {"a": a, "b": b, "names": (f"--a {args.a}", f"--b {args.b}")}
    missing = [f"--{d}" for d in _DIMS if d not in dims]
    if missing:
        raise CLIError(f"{', '.join(missing)} required (or --a A.npy --b B.npy, or --program "
                       f"P.json)")
    source = " ".join(f"--{d} {v}" for d, v in dims.items())
    return {"dims": dims, "names": (f"A of {source}", f"B of {source}"), "source": source}


def _gemm_operands(source: dict, cfg: Config, seed: int):
    """``(a, b, names)`` of a ``_gemm_source``: the files' arrays, or random ones (after a
    check that the GEMM fits in memory)."""
    if "dims" not in source:
        a, b = source["a"], source["b"]
        if a.ndim == 2 and b.ndim == 2:
            _check_memory(cfg, a.shape[0], a.shape[1], b.shape[1], " ".join(source["names"]))
        return a, b, source["names"]
    d = source["dims"]
    _check_memory(cfg, d["m"], d["k"], d["n"], source["source"])
    a, b = random_operands(cfg, d["m"], d["k"], d["n"], seed)
    return a, b, source["names"]


#: The requantization options (``_add_requant``) and the ``matmul`` option each sets.
_REQUANT_OPTIONS = {"bias": "--bias", "multiplier": "--multiplier", "shift": "--shift",
                    "out_zp": "--out-zp", "act_min": "--act-min", "act_max": "--act-max",
                    "in_zp": "--in-zp"}


def _requant(args, k: int, n: int) -> dict:
    """``matmul``'s requantization options from the command line for a GEMM of depth ``k``
    and ``n`` output columns (``{}``: int32 results)."""
    given = {f: getattr(args, f, None) for f in _REQUANT_OPTIONS}
    given = {f: v for f, v in given.items() if v is not None}
    for f, v in given.items():
        if np.ndim(v) == 1 and len(v) != n:
            raise CLIError(f"{_REQUANT_OPTIONS[f]}: {len(v)} values, but the result has {n} "
                           f"columns (give one value, or one per column)")
    scales = getattr(args, "scales", None)
    activation = getattr(args, "activation", None)
    relu = getattr(args, "relu", False)
    if not (given or scales or activation or relu):
        return {}
    if activation and not scales:
        raise CLIError(f"--activation {activation}: needs --scales (its bounds come from the "
                       f"output scale); give --act-min/--act-max otherwise")
    if scales:
        if relu:
            raise CLIError("--relu: not with --scales (use --activation RELU)")
        for f in ("multiplier", "shift", "act_min", "act_max"):
            if f in given:
                raise CLIError(f"{_REQUANT_OPTIONS[f]}: not with --scales (--scales derives "
                               f"it)")
        s_in, s_w, s_out = scales
        try:
            quant = QuantParams.from_scales(s_in, s_w, s_out, bias=given.get("bias", 0),
                                            out_zp=given.get("out_zp", 0),
                                            activation=activation or "NONE")
        except (TypeError, ValueError) as e:
            raise CLIError(f"--scales: {e}") from None
        return {"out": "int8", "quant": quant, "in_zp": given.get("in_zp", 0)}
    options = {"out": "int8", **(relu_quant(k) if relu else {}), **given}
    try:
        quant_options("int8", {f: v for f, v in options.items() if f != "out"})
    except (TypeError, ValueError) as e:
        field = str(e).split(" ", 1)[0]
        option = _REQUANT_OPTIONS.get(field)
        value = given.get(field)
        if option is None or value is None:
            raise CLIError(str(e)) from None
        text = ",".join(map(str, np.atleast_1d(value)))
        raise CLIError(f"{option} {text}: {e}") from None
    return options


def _prepare(cfg: Config, a, b, names, args):
    dims = (a.shape[1], b.shape[1]) if np.ndim(a) == 2 and np.ndim(b) == 2 else (1, 0)
    quant = _requant(args, *dims) if args is not None else {}
    if quant and cfg.operand_type.is_float:
        given = [o for f, o in (("relu", "--relu"), ("scales", "--scales"),
                                *_REQUANT_OPTIONS.items()) if getattr(args, f, None)]
        raise CLIError(f"{given[0] if given else '--relu'}: requantization applies to integer "
                       f"operand types, not {cfg.operand} (its results are the fp32 sums)")
    try:
        return prepare_gemm(cfg, a, b, names=names, **quant)
    except (TypeError, ValueError) as e:
        message = str(e)
        if not any(message.startswith(n) for n in names):
            message = f"{' '.join(names)}: {message}"
        raise CLIError(message) from None


def _program_only(args) -> None:
    """Options that have no meaning with ``--program``."""
    for option, value in (("--a", args.a), ("--b", args.b), ("--m", args.m), ("--k", args.k),
                          ("--n", args.n), ("--relu", getattr(args, "relu", False) or None),
                          ("--scales", getattr(args, "scales", None)),
                          *((o, getattr(args, f, None)) for f, o in _REQUANT_OPTIONS.items())):
        if value is not None:
            raise CLIError(f"{option}: has no meaning with --program {args.program} (the "
                           f"program holds its data)")


# --- the commands -----------------------------------------------------------------------------
def cmd_verilog(args):
    if args.config is None and (args.rows is None or args.cols is None):
        raise CLIError("--rows and --cols are required (or --config)")
    cfg = _config(args)
    fault = _fault(args, cfg)
    out = _output_dir(args.output, "-o/--output")
    for f in write_verilog(cfg, out, top=args.top, fault=fault):
        print(f)
    return 0


def cmd_sim(args):
    program = _load_program(args.program) if args.program else None
    if program is not None:
        _program_only(args)
        cfg = program.config
        if args.config or _typed(args, _SHAPE_OPTIONS):
            wanted = _config(args)
            if wanted != cfg:
                raise CLIError(f"--program {args.program}: made for config {cfg.name}, not "
                               f"{wanted.name} (drop --config and the shape options)")
    else:
        cfg = _config(args)
    backend = args.backend
    fault = _fault(args, cfg, backend)
    waves = None
    if args.waves:
        try:
            waves = str(check_waves(backend, args.waves))
        except ValueError as e:
            raise CLIError(f"--waves {args.waves}: {e}") from None
    out_file = _output_file(args.out, "--out", ".npy")
    if program is not None:
        try:
            expected = golden_program(program)
        except ValueError as e:
            raise CLIError(f"--program {args.program}: {e}") from None
        acc = Accelerator(cfg, backend, fault=fault)
        report = sim_program(acc, program, expected, name=args.program, waves=waves,
                             seed=args.seed, out_file=out_file)
    else:
        source = _gemm_source(args)
        try:
            a, b, names = _gemm_operands(source, cfg, args.seed)
            job = _prepare(cfg, a, b, names, args)
            acc = Accelerator(cfg, backend, fault=fault)
            report = sim_gemm(acc, job, waves=waves, seed=args.seed, out_file=out_file)
        except MemoryError as e:
            raise CLIError(f"{' '.join(source['names'])}: not enough memory for this GEMM "
                           f"({e})") from None
    report.emit(as_json=args.json)
    return 0 if report.passed else 1


def _check_port(port: str) -> None:
    if "://" in port:          # a pyserial URL (loop://, socket://...)
        return
    path = Path(port)
    if not path.exists():
        raise CLIError(f"--port {port}: no such device")
    if path.is_dir():
        raise CLIError(f"--port {port}: is a directory, not a serial device")
    if path.is_file():
        raise CLIError(f"--port {port}: is a regular file, not a serial device")


def _link_error(port, timeout, e) -> CLIError:
    if isinstance(e, LinkTimeout):
        return CLIError(f"--port {port}: no reply within {timeout:g} s (is a tpugen board, or "
                        f"the simulated board, at this port?): {e}")
    if isinstance(e, serial.SerialException):
        return CLIError(f"--port {port}: cannot open it: {e}")
    return CLIError(f"--port {port}: {e}")


def cmd_run(args):
    _check_port(args.port)
    program = _load_program(args.program) if args.program else None
    source = None
    if program is not None:
        _program_only(args)
        try:
            golden_program(program)
        except ValueError as e:
            raise CLIError(f"--program {args.program}: {e}") from None
    else:
        source = _gemm_source(args)
    out_file = _output_file(args.out, "--out", ".npy")
    errors = (LinkError, ConfigMismatch, serial.SerialException)
    try:
        board, info, cfg = open_board(args.port, baud=args.baud, timeout=args.timeout)
    except errors as e:
        raise _link_error(args.port, args.timeout, e) from None
    with board:
        if program is not None:
            if program.config != cfg:
                raise CLIError(f"--program {args.program}: made for config "
                               f"{program.config.name}, but the board at {args.port} is "
                               f"{cfg.name}")
        else:
            a, b, names = _gemm_operands(source, cfg, args.seed)
            job = _prepare(cfg, a, b, names, args)
        try:
            if program is not None:
                report = board_program(board, info, program, port=args.port,
                                       name=args.program, out_file=out_file)
            else:
                report = board_gemm(board, info, cfg, job, port=args.port, out_file=out_file)
        except errors as e:
            raise _link_error(args.port, args.timeout, e) from None
    report.emit(as_json=args.json)
    return 0 if report.passed else 1


def _board_config(args, board) -> Config:
    """The board's Config, or ``--config``'s, with ``--rows`` / ``--cols`` applied (the
    activation lanes kept within the columns)."""
    base = _read_config(args.config) if args.config else board.config.to_dict()
    typed = _typed(args, ("rows", "cols"))
    if "cols" in typed and base.get("act_lanes"):
        base["act_lanes"] = min(base["act_lanes"], typed["cols"])
    return _make_config(base, typed, args.config)


def _board(name: str):
    try:
        return get_board(name)
    except ValueError as e:
        raise CLIError(f"--board {name}: {e}") from None


def cmd_build(args):
    if args.list:
        print(list_boards())
        return 0
    if not args.board:
        raise CLIError("--board is required (or --list)")
    board = _board(args.board)
    cfg = _board_config(args, board)
    if args.freq is not None:
        try:
            core_clock(board.family, board.clk_in_mhz * 1e6, args.freq * 1e6)
        except ValueError as e:
            raise CLIError(f"--freq {args.freq:g}: {e}") from None
    out_dir = (_output_dir(args.output, "-o/--output") if args.output
               else build_dir(board, cfg, args.top))
    report = build_board(board, cfg, args.freq, out_dir=out_dir, progress=ProgressPrinter(),
                         top=args.top, dsp_blocks=args.dsp_blocks, seed=args.seed,
                         timeout=args.timeout)
    print(file=sys.stderr)
    print(report.summary())
    if report.critical_path:
        print(report.critical_path)
    print(f"bitstream: {report.bitstream}")
    return 0


def cmd_flash(args):
    board = _board(args.board)
    if args.bitstream:
        path = Path(args.bitstream)
        if not path.is_file():
            raise CLIError(f"--bitstream {args.bitstream}: " + (
                "is a directory" if path.is_dir() else "no such file"))
    else:
        path = bitstream_path(board, build_dir(board))
        if not path.is_file():
            raise CLIError(f"no --bitstream given, and `tpugen build --board {board.name}` has "
                           f"not made one at {path}: build it first or give --bitstream FILE")
    print(flash(board, path))
    return 0


def cmd_demo(args):
    cfg = _config(args)
    fault = _fault(args, cfg, args.sim)
    return run_demo(cfg, sim=args.sim, fault=fault, seed=args.seed)


def _load_model(text: str) -> TFLiteModel:
    """The ``.tflite`` model at ``text``, read and planned (one line naming the file for a
    missing, unreadable, corrupt or unsupported model)."""
    path = Path(text)
    if not path.exists():
        raise CLIError(f"{text}: no such model file")
    if path.is_dir():
        raise CLIError(f"{text}: is a directory, not a .tflite model")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CLIError(f"{text}: cannot read it: {e.strerror}") from None
    try:
        return TFLiteModel(data, name=path.name)
    except (TypeError, ValueError) as e:
        raise CLIError(f"{text}: {e}") from None


def _infer_accelerator(args) -> Accelerator:
    """The accelerator of ``tpugen infer``: a simulator of ``_config(args)``, or the board at
    ``--port`` with its own config (``--config`` / the shape options, when given, must match
    it)."""
    if not BACKENDS[args.backend].needs_port:
        if args.port is not None:
            raise CLIError(f"--port {args.port}: only with --backend board")
        return Accelerator(_config(args), args.backend)
    if args.port is None:
        raise CLIError(f"--backend {args.backend}: needs --port DEV (the board's serial device, "
                       f"or the simulated board's pty)")
    _check_port(args.port)
    if args.config or _typed(args, _SHAPE_OPTIONS):
        cfg = _config(args)
    else:
        try:
            link, _, cfg = open_board(args.port, baud=args.baud, timeout=args.timeout)
        except (LinkError, ConfigMismatch, serial.SerialException) as e:
            raise _link_error(args.port, args.timeout, e) from None
        link.close()
    accel = Accelerator(cfg, args.backend, port=args.port, baud=args.baud)
    accel.backend.timeout = args.timeout
    return accel


def cmd_infer(args):
    model = _load_model(args.model)
    x = _load_npy(args.input, "--input")
    try:
        _, stacked = model.check_input(x, name=f"--input {args.input}")
    except (TypeError, ValueError) as e:
        raise CLIError(str(e)) from None
    out_file = _output_file(args.output, "--output", ".npy")
    if args.check:
        tflite_micro_runtime()           # a missing interpreter fails before any run
    accel = _infer_accelerator(args)
    try:
        y = model.run(x, accel)
    except (LinkError, ConfigMismatch, serial.SerialException) as e:
        raise _link_error(args.port, args.timeout, e) from None
    finally:
        close = getattr(accel.backend, "close", None)
        if close is not None:
            close()
    n = x.shape[0] if stacked else 1
    print(f"model {args.model}: input {model.input_shape} {model.input_dtype}, {n} input(s), "
          f"output {model.output_shape}")
    for line in model.last.lines():
        print(line)
    if out_file is not None:
        np.save(out_file, y)
        print(f"output {y.shape} {y.dtype} -> {out_file}")
    else:
        shown = (np.array2string(y, separator=", ").replace("\n", "") if y.size <= 64
                 else "(--output Y.npy saves it)")
        print(f"output {y.shape} {y.dtype}: {shown}")
    if args.check:
        problem = first_mismatch(y, run_tflite_micro(model.data, x, stacked=stacked))
        if problem:
            print(f"check: {problem}")
            return 1
        print("check: bit-exact with the TFLite Micro interpreter")
    return 0


def cmd_clean(args):
    removed, size = clean_build_root()
    for path in removed:
        print(f"removed {path}")
    print(f"tpugen clean: freed {size / 2**20:.1f} MB")
    return 0


# --- the parser -------------------------------------------------------------------------------
def _int_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer or a comma-separated list of "
                                         f"integers (one per output column), not {text!r}") \
            from None
    return values[0] if len(values) == 1 else np.array(values, dtype=np.int64)


def _int(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}") from None


def _scales(text):
    try:
        parts = text.split(",")
        values = [float(v) for v in parts]
    except ValueError:
        values = []
    if len(values) < 3 or not all(v > 0 and v != float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"must be S_IN,S_W,S_OUT (positive scales; one S_W "
                                         f"per output column or one for all), not {text!r}")
    return values[0], values[1:-1] if len(values) > 3 else values[1], values[-1]


#: The requantization options: (option, keyword arguments of ``add_argument``).
_REQUANT_ARGS = [
    ("--bias", dict(type=_int_list, metavar="B[,B...]",
                    help="int32 bias, one or one per output column")),
    ("--multiplier", dict(type=_int_list, metavar="Q[,Q...]",
                          help="int32 quantized multiplier (2**30 with --shift 1: x 1)")),
    ("--shift", dict(type=_int_list, metavar="E[,E...]",
                     help="its exponent, -32..31 (left for > 0)")),
    ("--out-zp", dict(dest="out_zp", type=_int, help="output zero point (-128..127)")),
    ("--act-min", dict(dest="act_min", type=_int, help="clamp low (-128..127)")),
    ("--act-max", dict(dest="act_max", type=_int, help="clamp high (-128..127)")),
    ("--in-zp", dict(dest="in_zp", type=_int,
                     help="input zero point of A (-128..127), folded into the bias")),
    ("--scales", dict(type=_scales, metavar="S_IN,S_W,S_OUT",
                      help="derive multiplier and shift from float scales like TFLite (S_W: "
                           "one, or one per output column)")),
    ("--activation", dict(type=str.upper, choices=ACTIVATIONS,
                          help="with --scales: the fused activation's clamp bounds")),
]


def _add_requant(p):
    """Requantized int8 results, TFLite's parameters (``tpugen.sim.requant``); any of them
    turns the result from int32 into int8."""
    g = p.add_argument_group("int8 results (TFLite requantization; default: int32 sums)")
    g.add_argument("--relu", action="store_true",
                   help="int8 with ReLU, a multiplier scaled to K (a quick look)")
    for option, kw in _REQUANT_ARGS:
        g.add_argument(option, **kw)
    # A group's add_argument is argparse's own: note the options that take a value (so that
    # ``--shift -5,-6`` is joined to its option before parsing).
    _Parser.value_options.update(option for option, _ in _REQUANT_ARGS)


def _add_shape(p, *, what="Config's defaults"):
    p.add_argument("--rows", type=int, help=f"array rows R (1..256; default: {what})")
    p.add_argument("--cols", type=int, help=f"array columns C (1..256; default: {what})")
    p.add_argument("--acc-width", dest="acc_width", type=int, help="accumulator bits (16..64)")
    p.add_argument("--operand", help=f"operand type: {', '.join(OPERAND_TYPES)} (default int8)")
    p.add_argument("--config", metavar="FILE",
                   help="a config.json: every field from it; the options above override only "
                        "what you type")


def _add_gemm(p):
    for dim in _DIMS:
        p.add_argument(f"--{dim}", type=_positive_int,
                       help=f"GEMM dimension {dim.upper()} (random operands)")
    p.add_argument("--a", metavar="A.npy", help="the M x K operand (a NumPy .npy file)")
    p.add_argument("--b", metavar="B.npy", help="the K x N operand (a NumPy .npy file)")
    p.add_argument("--program", metavar="P.json",
                   help="run a saved program (tpugen.sim.program format) instead of a GEMM")
    p.add_argument("--out", metavar="C.npy",
                   help="write the result (a program's host-out beats) to this .npy file")
    p.add_argument("--seed", type=_nonneg_int, default=1,
                   help="seed of the random operands (and of a simulator's initial state)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def build_parser():
    p = _Parser(prog="tpugen", description="Generate and verify a systolic-array accelerator.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    v = sub.add_parser("verilog", help="write the Verilog of an array or core")
    _add_shape(v, what="required")
    v.add_argument("-o", "--output", default="build/verilog", help="output directory")
    v.add_argument("--top", choices=["array", "core"], default="array",
                   help="the array alone, or the whole core (controller, buffers, array)")
    v.add_argument("--debug-fault-cell", type=_cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (to test the tests)")
    v.set_defaults(func=cmd_verilog)

    s = sub.add_parser("sim", help="run a GEMM (or a program) on a backend and check it against "
                                   "the golden model")
    _add_shape(s, what="8")
    _add_gemm(s)
    _add_requant(s)
    s.add_argument("--backend", choices=[b for b in BACKENDS if not BACKENDS[b].needs_port],
                   default="verilator",
                   help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()
                                  if not b.needs_port))
    s.add_argument("--waves", metavar="FILE", help="write a waveform (VCD or FST) to FILE")
    s.add_argument("--debug-fault-cell", type=_cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (the run must then FAIL)")
    s.set_defaults(func=cmd_sim)

    r = sub.add_parser("run", help="run a GEMM (or a program) on a board over its UART link")
    r.add_argument("--port", required=True, help="serial device (or the simulated board's pty)")
    r.add_argument("--baud", type=_positive_int, default=DEFAULT_BAUD)
    _add_gemm(r)
    _add_requant(r)
    r.add_argument("--timeout", type=_positive_float("seconds"), default=30.0,
                   help="seconds to wait for a reply")
    r.set_defaults(func=cmd_run)

    b = sub.add_parser("build", help="build a bitstream for a board (YoWASP tools from PyPI)")
    b.add_argument("--board", help=f"board name: {', '.join(BOARDS)} (see --list)")
    b.add_argument("--list", action="store_true",
                   help="list the boards, their defaults and their measured builds")
    b.add_argument("--rows", type=int, help="array rows (default: the board's)")
    b.add_argument("--cols", type=int, help="array columns (default: the board's)")
    b.add_argument("--config", metavar="FILE",
                   help="a config.json (default: the board's config)")
    b.add_argument("--freq", type=_positive_float("MHz"),
                   help="core clock in MHz (default: the board's)")
    b.add_argument("--top", choices=TOPS, default="board",
                   help="the whole board top (default), or the array alone between the pins "
                        "(to measure the array's own size and Fmax)")
    b.add_argument("--dsp-blocks", dest="dsp_blocks", type=_nonneg_int,
                   help="DSP blocks the array may use (default: what the rest leaves); the "
                        "other products are Booth multipliers in LUTs")
    b.add_argument("--seed", type=_nonneg_int,
                   help="nextpnr's placement seed (default: the board's)")
    b.add_argument("--timeout", type=_positive_float("seconds"), default=DEFAULT_TIMEOUT,
                   metavar="SECONDS",
                   help=f"stop the tools after this long (default {DEFAULT_TIMEOUT:g} s)")
    b.add_argument("-o", "--output",
                   help="build directory (default build/fpga/<board>_<config>[_array])")
    b.set_defaults(func=cmd_build)

    f = sub.add_parser("flash", help="program a board with its bitstream")
    f.add_argument("--board", required=True,
                   help=f"board name: {', '.join(BOARDS)} (see tpugen build --list)")
    f.add_argument("--bitstream",
                   help="bitstream file (default: that of tpugen build --board BOARD)")
    f.set_defaults(func=cmd_flash)

    m, k, n = DEMO_SHAPE
    d = sub.add_parser("demo", help=f"the main job: a {m} x {k} x {n} GEMM on the generated "
                                    f"core, simulated, checked against NumPy, PASS/FAIL")
    _add_shape(d, what="8")
    d.add_argument("--sim", choices=[s for s in SIMULATORS if s != "amaranth"],
                   default="verilator")
    d.add_argument("--seed", type=_nonneg_int, default=1)
    d.add_argument("--debug-fault-cell", type=_cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (the demo must then FAIL)")
    d.set_defaults(func=cmd_demo)

    i = sub.add_parser("infer", help="run an int8 .tflite model: FULLY_CONNECTED, CONV_2D and "
                                     "DEPTHWISE_CONV_2D on the accelerator, other ops on the "
                                     "host")
    i.add_argument("model", metavar="MODEL.tflite", help="the int8 .tflite model")
    i.add_argument("--input", required=True, metavar="X.npy",
                   help="the model input (its shape and dtype), or several stacked along a new "
                        "first axis (they run together)")
    i.add_argument("--output", metavar="Y.npy",
                   help="save the output (stacked like the input) to this .npy file")
    i.add_argument("--backend", choices=list(BACKENDS), default="model",
                   help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()))
    _add_shape(i, what="8; with --backend board: the board's")
    i.add_argument("--port", help="serial device of the board, or the simulated board's pty "
                                  "(--backend board)")
    i.add_argument("--baud", type=_positive_int, default=DEFAULT_BAUD,
                   help="the board link's bit rate")
    i.add_argument("--timeout", type=_positive_float("seconds"), default=30.0,
                   help="seconds to wait for each board reply")
    i.add_argument("--check", action="store_true",
                   help="also run the TFLite Micro interpreter (tflite-micro from PyPI) and "
                        "compare: prints bit-exact or the first mismatch (exit status 1)")
    i.set_defaults(func=cmd_infer)

    c = sub.add_parser("clean", help="remove what tpugen generated and cached under the build "
                                     "directory (build/ or $TPUGEN_BUILD_DIR)")
    c.set_defaults(func=cmd_clean)
    return p


def _fail(message, status: int) -> int:
    # Components made before the error would warn "UnusedElaboratable" at exit: not news.
    warnings.simplefilter("ignore", UnusedElaboratable)
    print(f"tpugen: error: {message}", file=sys.stderr)
    return status


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = bool(os.environ.get("TPUGEN_DEBUG"))
    try:
        args = build_parser().parse_args(_join_negative(argv))
        return args.func(args)
    except CLIError as e:
        if debug:
            raise
        return _fail(e, 2)
    except KeyboardInterrupt:
        if debug:
            raise
        warnings.simplefilter("ignore", UnusedElaboratable)
        print("tpugen: interrupted", file=sys.stderr)
        return 130
    except MemoryError as e:
        if debug:
            raise
        return _fail(f"out of memory: {e}", 2)
    except RuntimeError as e:  # a missing tool, a failed build or simulator run
        if debug or isinstance(e, NotImplementedError | RecursionError):
            raise
        return _fail(e, 1)


if __name__ == "__main__":
    sys.exit(main())
