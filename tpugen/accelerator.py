"""The front door: one GEMM call on any backend, checked against the golden model."""

from dataclasses import dataclass
from numbers import Real

import ml_dtypes
import numpy as np

from tpugen.backends import SIMULATORS, get_backend
from tpugen.compiler import CompiledGemm, compile_gemm
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.config import Config, check_config
from tpugen.memory import check_gemm_memory
from tpugen.sim.backend_base import RunResult
from tpugen.sim.float_golden import same_bits
from tpugen.sim.formats import ml_dtype
from tpugen.sim.ideal_cycles import ideal_cycles
from tpugen.sim.reference import gemm_reference
from tpugen.sim.requant import QuantParams

__all__ = ["Accelerator", "GemmJob", "GemmReport", "ResultMismatch", "OUTPUTS", "QUANT_OPTIONS",
           "check_operands", "default_out", "prepare_gemm", "quant_options", "result_dtype"]

#: ``matmul``'s output kinds: integer types' sums or requantized operands, float types'
#: binary32 accumulators.
OUTPUTS = ("int32", "int8", "fp32")

#: The requantization options of ``out="int8"`` and their defaults (TFLite's parameters,
#: ``tpugen.sim.requant.QuantParams``; the defaults are the identity clamped to int8), and
#: ``in_zp``, the input zero point. ``quant`` gives them all as one ``QuantParams`` instead.
#: The one place that knows them: ``quant_options`` checks a call's options against it.
QUANT_OPTIONS = {"bias": 0, "multiplier": 1 << 30, "shift": 1, "out_zp": 0, "act_min": -128,
                 "act_max": 127, "in_zp": 0, "quant": None}

_PARAM_FIELDS = ("bias", "multiplier", "shift", "out_zp", "act_min", "act_max")


def quant_options(out: str, options: dict) -> dict:
    """The requantization options of a ``matmul(..., out=out, **options)`` call, checked:
    ``TypeError`` for a name that is not an option or a ``quant`` that is not a
    ``QuantParams``, ``ValueError`` for an option that ``out`` would ignore (``int32`` results
    take none but the defaults), for ``quant`` together with single parameters, or for a value
    out of range. Returns ``{"quant": QuantParams, "in_zp": int}`` for ``int8``, ``{}`` for
    ``int32``."""
    if not isinstance(out, str) or out not in OUTPUTS:
        raise ValueError(f"out must be one of {', '.join(map(repr, OUTPUTS))}, not {out!r}")
    unknown = sorted(set(options) - set(QUANT_OPTIONS))
    if unknown:
        raise TypeError(f"{unknown[0]!r} is not an option of matmul (requantization options: "
                        f"{', '.join(QUANT_OPTIONS)})")
    given = [k for k, v in options.items() if not _is_default(v, QUANT_OPTIONS[k])]
    if out in ("int32", "fp32"):
        if given:
            raise ValueError(f"{given[0]}={options[given[0]]!r} would be ignored: "
                             f"requantization options apply to out='int8' only")
        return {}
    quant = options.get("quant")
    if quant is not None:
        if not isinstance(quant, QuantParams):
            raise TypeError(f"quant must be a QuantParams, not {quant!r}")
        both = [k for k in given if k in _PARAM_FIELDS]
        if both:
            raise ValueError(f"{both[0]}= and quant= both given: quant holds every "
                             f"requantization parameter")
    else:
        quant = QuantParams(**{k: options.get(k, QUANT_OPTIONS[k]) for k in _PARAM_FIELDS})
    in_zp = options.get("in_zp", 0)
    if isinstance(in_zp, bool) or not isinstance(in_zp, int | np.integer) or not (
            -128 <= in_zp <= 127):
        raise ValueError(f"in_zp must be an integer in -128..127, not {in_zp!r}")
    return {"quant": quant, "in_zp": int(in_zp)}


def _is_default(value, default) -> bool:
    try:
        return bool(value == default)
    except (TypeError, ValueError):      # e.g. an array: not a default
        return False


def result_dtype(config: Config, out: str) -> np.dtype:
    """The dtype ``matmul`` returns: ``int8`` for ``out="int8"`` (int4 values too);
    ``float32`` for ``out="fp32"``; for ``out="int32"``, ``int32`` when the accumulators have
    at most 32 bits, else ``int64``."""
    if out == "int8":
        return np.dtype(np.int8)
    if out == "fp32":
        return np.dtype(np.float32)
    return np.dtype(np.int32 if config.acc_width <= 32 else np.int64)


#: ml_dtypes' narrow integer types (NumPy kind "V"), taken as the integers they hold.
_NARROW_INTS = tuple(np.dtype(getattr(ml_dtypes, n)) for n in ("int2", "int4", "uint2", "uint4")
                     if hasattr(ml_dtypes, n))


def _operand(name: str, value, config: Config) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except ValueError as e:              # ragged nested lists
        raise ValueError(f"{name} must be a 2-D matrix: {e}") from None
    t = config.operand_type
    if arr.dtype in _NARROW_INTS:           # ml_dtypes' int4 / uint4 / int2 ...: as integers
        arr = arr.astype(np.int64)
    if t.is_float:
        # Numbers, converted to the operand type by the compiler (sim.formats.encode).
        if arr.dtype == bool or not (arr.dtype.kind in "iuf" or arr.dtype == ml_dtype(t)):
            raise TypeError(f"{name} must hold numbers (converted to {t.name}), not "
                            f"{arr.dtype}")
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, not {arr.ndim}-D (shape "
                             f"{arr.shape})")
        if 0 in arr.shape:
            raise ValueError(f"{name} must not be empty, not shape {arr.shape}")
        return arr
    if arr.dtype == object and arr.size and all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) for v in arr.flat):
        pass                             # Python ints too big for int64: a range error below
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers ({config.operand} values), not "
                        f"{arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, not {arr.ndim}-D (shape {arr.shape})")
    if 0 in arr.shape:
        raise ValueError(f"{name} must not be empty, not shape {arr.shape}")
    lo, hi = int(arr.min()), int(arr.max())      # exact: no cast before the check
    if lo < t.min or hi > t.max:
        bad = lo if lo < t.min else hi
        raise ValueError(f"{name} values must be in {t.min}..{t.max} ({t.name}), found {bad}")
    return arr.astype(np.int64)


def check_operands(config: Config, a, b, names=("a", "b")) -> tuple[np.ndarray, np.ndarray]:
    """``a`` (M x K) and ``b`` (K x N) as int64 arrays, checked for ``config``'s operand type
    (float types: numeric arrays as given, converted by the compiler): ``TypeError`` for
    non-integer (float types: non-numeric) data, ``ValueError`` for a matrix that is not 2-D,
    is empty, has a value outside the operand range, or a K that differs. ``names`` name them in the
    messages."""
    check_config(config)
    shapes = [np.shape(v) if isinstance(v, np.ndarray) else None for v in (a, b)]
    if all(s is not None and len(s) == 2 for s in shapes) and shapes[0][1] == shapes[1][0]:
        # Before anything is converted or compiled: a GEMM that cannot fit is refused now.
        check_gemm_memory(config, shapes[0][0], shapes[0][1], shapes[1][1],
                          f"{names[0]} @ {names[1]}")
    a = _operand(names[0], a, config)
    b = _operand(names[1], b, config)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{names[0]} is {a.shape[0]} x {a.shape[1]} but {names[1]} is "
                         f"{b.shape[0]} x {b.shape[1]}: K differs ({a.shape[1]} columns, "
                         f"{b.shape[0]} rows)")
    return a, b


class ResultMismatch(RuntimeError):
    """A backend's result differs from the golden model.

    ``report`` is the run's ``GemmReport`` (``tpugen.chain.ChainReport`` for a chain of
    layers); ``first`` the first differing result element in row-major order as ``(row, col,
    got, expected)``, or ``None`` when the run gave no result to compare (wrong beat count, an
    error cause) or differed only in what the testbench checks (the run's ``mismatches``)."""

    def __init__(self, report):
        self.report = report
        self.first = report.first_mismatch
        super().__init__(report.problem)


@dataclass
class GemmJob:
    """A checked and compiled GEMM (``Accelerator.prepare``): int64 operands ``a``, ``b``,
    the output kind and requantization options, the ``compiled`` program and the golden
    model's ``expected`` result."""

    a: np.ndarray
    b: np.ndarray
    out: str
    quant: dict
    compiled: CompiledGemm
    expected: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.a.shape[0], self.a.shape[1], self.b.shape[1])


def default_out(config: Config) -> str:
    """``matmul``'s default ``out``: ``"fp32"`` for float operand types, else ``"int32"``."""
    return "fp32" if config.operand_type.is_float else "int32"


def prepare_gemm(config: Config, a, b, *, out: str | None = None, names=("a", "b"),
                 **quant) -> GemmJob:
    """Check the operands (``check_operands``, named ``names`` in messages) and the options
    (``quant_options``), compile the GEMM for ``config`` and compute the golden result;
    ``TypeError`` / ``ValueError`` for bad input (any size fits: operands and results stream
    through the buffers; only ``out="int8"`` with a 1-row unified buffer is refused)."""
    out = default_out(config) if out is None else out
    if (out == "fp32") != config.operand_type.is_float:
        raise ValueError(f"out must be {default_out(config)!r}"
                         f"{'' if config.operand_type.is_float else ' or int8'} for "
                         f"{config.operand}, not {out!r}")
    quant = quant_options(out, quant)
    a, b = check_operands(config, a, b, names)
    compiled = compile_gemm(config, a, b, out=out, **quant)
    expected = gemm_reference(config, a, b, out=out, **quant)
    return GemmJob(a, b, out, quant, compiled, expected)


class GemmReport:
    """What ``Accelerator.matmul`` measured (``Accelerator.last``): ``cycles``, ``ideal``,
    ``utilization``, ``wrong`` (result elements that differ), ``first_mismatch``
    (``(row, col, got, expected)`` or ``None``), ``problem`` (a line, when not passed),
    ``passed``."""

    def __init__(self, config, shape, result: RunResult, expected, got, problem=None):
        self.config = config
        self.shape = tuple(shape)
        self.result = result
        self.ideal = ideal_cycles(config, *shape)
        self.first_mismatch = None
        self.wrong = None
        if got is not None:
            got = np.asarray(got)
            if got.dtype == np.float32:       # binary32: bit for bit, any NaN equals any NaN
                diff = np.argwhere(~same_bits(got.view(np.uint32), expected.view(np.uint32)))
                value = float
            else:
                diff = np.argwhere(got != expected)
                value = int
            self.wrong = len(diff)
            if len(diff):
                i, j = (int(v) for v in diff[0])
                self.first_mismatch = (i, j, value(got[i, j]), value(expected[i, j]))
        if problem is None:
            if self.first_mismatch is not None:
                i, j, g, e = self.first_mismatch
                problem = (f"{self.wrong} of {expected.size} results differ from the golden "
                           f"model; first C[{i}, {j}] = {g}, expected {e}")
            elif result.mismatches:
                problem = f"the testbench found a mismatch: {result.mismatches[0]}"
            elif result.error:
                problem = f"the accelerator reported error cause {result.error}"
        self.problem = problem
        self.passed = problem is None

    @property
    def cycles(self):
        return self.result.cycles

    @property
    def utilization(self):
        return None if not self.cycles else self.ideal / self.cycles

    def to_dict(self) -> dict:
        """The report as plain JSON values."""
        r = self.result
        m, k, n = self.shape
        return {
            "shape": {"m": m, "k": k, "n": n},
            "array": {"rows": self.config.rows, "cols": self.config.cols},
            "cycles": r.cycles,
            "ideal_cycles": self.ideal,
            "utilization": self.utilization,
            "counters": {k: int(v) for k, v in r.counters.items()},
            "wrong": self.wrong,
            "first_mismatch": None if self.first_mismatch is None else dict(
                zip(("row", "col", "got", "expected"), self.first_mismatch, strict=True)),
            "problem": self.problem,
            "passed": self.passed,
        }

    def lines(self):
        r = self.result
        m, k, n = self.shape
        out = [f"shape        {m} x {k} x {n} on a {self.config.rows} x {self.config.cols} array"]
        if r.cycles is not None:
            c = r.counters
            out += [
                f"cycles       {r.cycles} (first command beat to last host-out beat)",
                f"ideal        {self.ideal} (ceil(M*K*N / (R*C)))",
                f"utilization  {100 * self.utilization:.1f} %",
                f"array busy   {c.get('array_busy', 0)} cycles",
                f"stalls       host-in {c.get('host_in_stall', 0)}, "
                f"host-out {c.get('host_out_stall', 0)} cycles",
                f"instructions {c.get('retired', 0)}",
            ]
        if self.wrong:
            out.append(f"wrong        {self.wrong} of {m * n} results differ from NumPy")
        if self.problem:
            out.append(f"problem      {self.problem}")
        out.append("PASS" if self.passed else "FAIL")
        return out


class Accelerator:
    """A generated accelerator of ``config`` on a ``backend``: ``model``, ``amaranth``,
    ``icarus``, ``verilator``, or ``board`` (a board or the simulated board at serial
    ``port``).

    ``matmul(A, B)`` compiles the GEMM into a program (``tpugen.compiler``), runs it,
    checks it against the golden model (NumPy) and returns the M x N result (dtype: see
    ``result_dtype``); a result that differs raises ``ResultMismatch``. ``last`` holds the
    report (cycles, counters). ``prepare`` and ``execute`` are its two halves (everything that
    checks the caller's input, then the run). ``run(program)`` runs any program and returns the
    backend's ``RunResult`` unchecked.
    """

    def __init__(self, config: Config, backend: str = "model", *, fault=None, port=None,
                 baud=DEFAULT_BAUD):
        check_config(config)
        self.config = config
        self.backend_name = backend
        self.backend = get_backend(backend, config, fault=fault, port=port, baud=baud)
        self.last = None

    def run(self, program, **kw) -> RunResult:
        return self.backend.run(program, **kw)

    def prepare(self, a, b, *, out: str | None = None, **quant) -> GemmJob:
        """``prepare_gemm`` for this accelerator's config."""
        return prepare_gemm(self.config, a, b, out=out, **quant)

    def _run_options(self, waves, stalls, seed) -> dict:
        """The backend options of a run: ``ValueError`` for one the backend would ignore."""
        simulates = self.backend_name in SIMULATORS
        if waves is not None and not simulates:
            raise ValueError(f"waves: the {self.backend_name} backend has no waveforms "
                             f"(simulators: {', '.join(SIMULATORS)})")
        if stalls is not None:
            if not simulates:
                raise ValueError(f"stalls: the {self.backend_name} backend has no stall "
                                 f"patterns (simulators: {', '.join(SIMULATORS)})")
            if (not isinstance(stalls, tuple | list) or len(stalls) != 3 or any(
                    isinstance(p, bool) or not isinstance(p, Real) or not 0 <= p < 1
                    for p in stalls)):
                raise ValueError(f"stalls must be 3 probabilities in [0, 1) (command, host-in, "
                                 f"host-out), not {stalls!r}")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
        if seed and not simulates:
            raise ValueError(f"seed: the {self.backend_name} backend has no random stalls or "
                             f"initial state")
        if not simulates:
            return {}
        return {"waves": waves, "stalls": tuple(stalls or (0.0, 0.0, 0.0)), "seed": int(seed)}

    def execute(self, job: GemmJob, *, waves=None, stalls=None, seed=0) -> np.ndarray:
        """Run a prepared GEMM; check and return its result (see ``matmul``)."""
        if not isinstance(job, GemmJob):
            raise TypeError(f"job must be a GemmJob from prepare, not {job!r}")
        result = self.backend.run(job.compiled.program, **self._run_options(waves, stalls, seed))
        problem = None
        try:
            got = job.compiled.decode(result.host_out)
        except ValueError as e:
            got, problem = None, f"the {self.backend_name} run gave no result: {e}"
        self.last = GemmReport(self.config, job.shape, result, job.expected, got, problem)
        if not self.last.passed:
            raise ResultMismatch(self.last)
        return got.astype(result_dtype(self.config, job.out))

    def matmul(self, a, b, *, out: str | None = None, waves=None, stalls=None, seed=0,
               **quant) -> np.ndarray:
        """``a @ b`` on the backend, checked against the golden model.

        ``a`` (M x K) and ``b`` (K x N): integer matrices of the operand type's values (int4:
        -8..7). Float types (``bf16``, ``fp8_e4m3``, ``fp8_e5m2``): numeric matrices (or of the
        ``ml_dtypes`` type), converted to the operand type with round-to-nearest-even (fp8
        saturates); the result (``out="fp32"``, their default and only kind) is the binary32
        accumulators as ``float32``, summed in the array's order
        (``tpugen.sim.float_golden``), compared bit for bit (any NaN equals any NaN).
        ``out="int32"`` (integer types' default): the sums (wrapped to ``acc_width``), dtype
        ``int32`` (``int64`` for ``acc_width`` > 32); ``out="int8"``: requantized like TFLite's int8
        kernels with ``QUANT_OPTIONS`` (``bias``, ``multiplier``, ``shift``, ``out_zp``,
        ``act_min``, ``act_max``, or ``quant=QuantParams(...)``, e.g. ``QuantParams.from_scales``;
        and the input zero point ``in_zp``), dtype ``int8``. ``waves`` (a file), ``stalls`` (three
        probabilities: command, host-in, host-out) and ``seed``: simulators only. ``TypeError`` /
        ``ValueError`` for bad input or an option the backend or ``out`` would ignore;
        ``ResultMismatch`` when the result differs from the golden model.
        """
        return self.execute(self.prepare(a, b, out=out, **quant), waves=waves, stalls=stalls,
                            seed=seed)
