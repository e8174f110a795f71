"""An imported int8 ``.tflite`` model: a plan of accelerator chains and host ops, and its run.

``TFLiteModel(data)`` reads the flatbuffer (``reader``), refuses in one line a model holding an
op it cannot run exactly (``UnsupportedModel``), computes every tensor's shape, lowers the GEMM
ops to accelerator layers (``lowering``) and groups consecutive ones into chains: a GEMM op
joins the chain before it when it reads that chain's last output (its only reader, not a model
output) as its input matrix unchanged (FULLY_CONNECTED after a GEMM op, 1x1 stride-1
convolutions), so that the activations between them stay on chip. Any other GEMM op starts a
chain of its own: a k x k or strided convolution needs its input gathered into windows
(im2col), and a FULLY_CONNECTED that flattens an NHWC tensor (conv -> FC without a RESHAPE)
needs it re-laid, both on the host. The other ops run on the host (``kernels``, ``softmax``).

``run(x, accelerator)``: ``x`` has the model input's shape and dtype, or one more leading axis
of samples (the result then has it too); the samples run together (folded into the GEMMs' M).
Each chain runs with ``tpugen.chain.run_layers`` on the accelerator's backend (``model``,
``amaranth``, ``icarus``, ``verilator``, ``verilator-cocotb``, ``board``), which checks every
program's result against NumPy (``ResultMismatch``, a ``RuntimeError``, when it differs).
``last`` holds the ``InferenceReport``: per op where it ran, its GEMM, cycles and utilization;
per chain its cycles.
"""

from dataclasses import dataclass, field
from os import PathLike

import numpy as np

from tpugen.chain import run_layers
from tpugen.files import check_input_file
from tpugen.sim.requant import activation_bounds
from tpugen.tflite.kernels import add, average_pool, dequantize, max_pool, quantize, requantize_int8
from tpugen.tflite.lowering import GEMM_OPS, GemmOp, activation_name, lower, windows
from tpugen.tflite.reader import Graph, OpInfo, TensorInfo, read_graph
from tpugen.tflite.softmax import SOFTMAX_OUT_SCALE, SOFTMAX_OUT_ZP, softmax
from tpugen.tflite.unsupported import UnsupportedModel

__all__ = ["SUPPORTED_OPS", "check_model_config", "TFLiteModel", "InferenceReport", "OpRun",
           "ChainRun", "load_tflite"]


def _pct(ideal, cycles) -> str:
    return "n/a" if not cycles else f"{100 * ideal / cycles:.1f} %"


@dataclass
class OpRun:
    """One op of a run: ``where`` it ran (``"host"``, or ``"<backend>, chain <n>"``, with
    ``", on chip"`` when its input came from the previous layer on chip); for a GEMM op its
    ``shape`` (M, K, N), ``ideal`` cycles (``ceil(M*K*N / (R*C))``), ``chain`` number and
    ``cycles``: its program's cycles when it ran alone in one, else ``None`` (the layers of one
    program overlap: their cycles are the ``ChainRun``'s; and the ``model`` backend counts
    none). Host ops have ``shape``, ``ideal`` and ``chain`` ``None``."""

    index: int
    name: str
    where: str
    shape: tuple | None = None
    ideal: int | None = None
    chain: int | None = None
    cycles: int | None = None

    @property
    def utilization(self) -> float | None:
        """``ideal / cycles`` (``None`` without cycles)."""
        return None if not self.cycles or self.ideal is None else self.ideal / self.cycles


@dataclass
class ChainRun:
    """One chain of a run: its ``number``, its ops' indices, ``programs`` (one, or more after
    host round trips inside the chain), ``cycles`` (every program's; ``None`` when the backend
    counts none) and ``ideal`` cycles."""

    number: int
    ops: list
    programs: int
    ideal: int
    cycles: int | None = None

    @property
    def utilization(self) -> float | None:
        return None if not self.cycles else self.ideal / self.cycles


@dataclass
class InferenceReport:
    """A model run: ``ops`` (one ``OpRun`` per op, model order), ``chains`` (one ``ChainRun``
    each), the array's ``rows`` x ``cols``, the ``backend`` and the number of ``samples``."""

    backend: str
    rows: int
    cols: int
    samples: int
    ops: list = field(default_factory=list)
    chains: list = field(default_factory=list)

    @property
    def cycles(self) -> int | None:
        """Accelerator cycles of the whole run (every chain's programs; ``None`` when the
        backend counts none, or the model has no GEMM op)."""
        runs = [c.cycles for c in self.chains]
        return sum(runs) if runs and all(c is not None for c in runs) else None

    @property
    def ideal(self) -> int:
        return sum(c.ideal for c in self.chains)

    @property
    def utilization(self) -> float | None:
        total = self.cycles
        return None if not total else self.ideal / total

    def lines(self) -> list[str]:
        """The report as text: a table of the ops, a line per chain of more than one layer,
        the totals."""
        out = [f"{'op':>3}  {'name':<18} {'ran on':<30} {'GEMM M x K x N':<20} "
               f"{'cycles':>10} {'ideal':>10} {'util':>7}"]
        for o in self.ops:
            if o.shape is None:
                out.append(f"{o.index:>3}  {o.name:<18} {o.where}")
                continue
            shape = " x ".join(str(v) for v in o.shape)
            cycles = "-" if o.cycles is None else str(o.cycles)
            util = "" if o.cycles is None else _pct(o.ideal, o.cycles)
            out.append(f"{o.index:>3}  {o.name:<18} {o.where:<30} {shape:<20} {cycles:>10} "
                       f"{o.ideal:>10} {util:>7}")
        for c in self.chains:
            if len(c.ops) > 1:
                programs = "one program" if c.programs == 1 else f"{c.programs} programs"
                cycles = ("cycles not counted" if c.cycles is None else
                          f"{c.cycles} cycles, utilization {_pct(c.ideal, c.cycles)}")
                out.append(f"chain {c.number}: ops {', '.join(map(str, c.ops))} in "
                           f"{programs}: {cycles} (ideal {c.ideal})")
        total = self.cycles
        n = self.samples
        counted = (f"cycles not counted by the {self.backend} backend" if total is None else
                   f"{total} cycles ({total / n:.0f} per sample), utilization "
                   f"{_pct(self.ideal, total)}")
        out.append(f"accelerator: {self.backend} backend, {self.rows} x {self.cols} array, "
                   f"{n} sample(s): {counted}; ideal {self.ideal} ({self.ideal / n:.0f} per "
                   f"sample)")
        return out


@dataclass(eq=False)
class _Chain:
    gemms: list
    number: int


@dataclass(eq=False)
class _Host:
    op: OpInfo
    run: object          # callable(value_of) -> the output value (samples first)


def _refuse_unsupported(graph: Graph) -> None:
    for op in graph.ops:
        if op.name not in SUPPORTED_OPS:
            raise UnsupportedModel(f"unsupported op {op.name} (op {op.index}); tpugen runs "
                                   f"{', '.join(SUPPORTED_OPS)}")
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise UnsupportedModel(f"the model has {len(graph.inputs)} inputs and "
                               f"{len(graph.outputs)} outputs; tpugen runs models of one "
                               "each")
    for role, t in (("input", graph.inputs[0]), ("output", graph.outputs[0])):
        kind = graph.tensors[t].type_name
        if kind not in ("INT8", "FLOAT32"):
            raise UnsupportedModel(f"the model {role} is {kind}; tpugen runs int8 models "
                                   "(int8 or float32 at the edges)")


def check_model_config(config) -> None:
    """Refuse an accelerator whose results would differ from TFLite's int8 kernels: its
    operands must be int8 and its accumulators at least TFLite's 32 bits (narrower ones wrap
    where TFLite's int32 sums do not)."""
    if config.operand != "int8":
        raise ValueError(f"operand must be int8 to run an int8 TFLite model, not "
                         f"{config.operand!r} (config {config.name})")
    if config.acc_width < 32:
        raise ValueError(f"acc_width must be at least 32 (TFLite's int32 accumulators) to run "
                         f"a TFLite model, not {config.acc_width} (config {config.name})")


class TFLiteModel:
    """An int8 TFLite model planned for an accelerator (see the module docstring).

    ``data``: the ``.tflite`` file's bytes; ``TypeError`` for anything else, ``ValueError``
    for bytes that are no readable flatbuffer, ``UnsupportedModel`` (a ``ValueError``, one
    line naming the op) for a model tpugen cannot run exactly. ``name`` labels reports."""

    def __init__(self, data, name: str = "model"):
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"data must be the bytes of a .tflite file, not "
                            f"{type(data).__name__}")
        self.name = name
        self.data = bytes(data)
        self.graph = read_graph(self.data)
        _refuse_unsupported(self.graph)
        self.shapes = {i: self.graph.tensors[i].shape for i in self.graph.inputs}
        self.steps = []
        consumers = {}
        for op in self.graph.ops:
            for t in op.inputs:
                consumers[t] = consumers.get(t, 0) + 1
        chains = 0
        for op in self.graph.ops:
            if op.name in GEMM_OPS:
                gemm = lower(self.graph, op, self._shape(op, op.inputs[0]))
                self.shapes[op.outputs[0]] = gemm.out_shape
                prev = self.steps[-1] if self.steps else None
                if (isinstance(prev, _Chain) and gemm.direct
                        and gemm.in_tensor == prev.gemms[-1].out_tensor
                        and gemm.k == prev.gemms[-1].n
                        and consumers.get(gemm.in_tensor) == 1
                        and gemm.in_tensor not in self.graph.outputs):
                    prev.gemms.append(gemm)
                else:
                    chains += 1
                    self.steps.append(_Chain([gemm], chains))
            else:
                self.steps.append(_Host(op, self._host(op)))
        (self.input,) = self.graph.inputs
        (self.output,) = self.graph.outputs
        self.last = None

    # --- shapes and tensors -----------------------------------------------------------------
    def _shape(self, op: OpInfo, t: int) -> tuple:
        if t in self.shapes:
            return self.shapes[t]
        info = self.graph.tensors[t]
        if info.data is None:
            raise UnsupportedModel(f"op {op.index} {op.name}: tensor {info.name!r} is read "
                                   "before any op writes it")
        return info.shape

    def _tensor(self, t: int):
        return self.graph.tensors[t]

    @property
    def input_shape(self) -> tuple:
        return self._tensor(self.input).shape

    @property
    def input_dtype(self) -> np.dtype:
        return np.dtype(self._tensor(self.input).dtype)

    @property
    def output_shape(self) -> tuple:
        return self.shapes[self.output]

    # --- host ops ---------------------------------------------------------------------------
    def _host(self, op: OpInfo):
        """A callable computing ``op``'s output from ``value(t)`` (``HOST_OPS``); sets the
        output shape."""
        x_t = op.inputs[0]
        h = _HostOp(self, op, x_t, self.graph.tensors[x_t],
                    self.graph.tensors[op.outputs[0]], self._shape(op, x_t))
        return HOST_OPS[op.name](h)

    # --- running ----------------------------------------------------------------------------
    def check_input(self, x, name: str = "x") -> tuple[np.ndarray, bool]:
        """``(samples, stacked)``: ``x`` with a leading axis of samples (added when ``x`` has
        the model input's shape; ``stacked`` says whether it had one). ``TypeError`` for an
        ``x`` that is no array; ``ValueError`` (naming ``name``) for a wrong shape or
        dtype."""
        try:
            x = np.asarray(x)
        except ValueError as e:                      # ragged nested lists
            raise ValueError(f"{name} must be an array of the model input's shape "
                             f"{self.input_shape}: {e}") from None
        if x.dtype == object:
            raise TypeError(f"{name} must be a NumPy array of {self.input_dtype}, not "
                            f"objects")
        want = self.input_shape
        if x.shape == want:
            stacked, x = False, x[None]
        elif x.shape[1:] == want and x.shape[0] >= 1:
            stacked = True
        else:
            raise ValueError(f"{name} must have shape {want} (or N x {want} for N inputs), "
                             f"not {x.shape}")
        if x.dtype != self.input_dtype:
            raise ValueError(f"{name} must have dtype {self.input_dtype}, not {x.dtype}")
        return x, stacked

    def run(self, x, accelerator) -> np.ndarray:
        """The model's output for ``x`` (``check_input``) on ``accelerator`` (a
        ``tpugen.Accelerator``: its ``config``, ``backend_name`` and ``run``); ``last`` then
        holds the ``InferenceReport``. Raises ``TypeError`` / ``ValueError`` for bad input,
        ``tpugen.ResultMismatch`` when a chain's result differs from NumPy's, and what the
        backend raises (a missing simulator, a board's link errors)."""
        if not all(hasattr(accelerator, a) for a in ("config", "backend_name", "run")):
            raise TypeError(f"accelerator must be a tpugen.Accelerator, not {accelerator!r}")
        config = accelerator.config
        check_model_config(config)
        x, stacked = self.check_input(x)
        samples = x.shape[0]
        backend = accelerator.backend_name
        report = InferenceReport(backend, config.rows, config.cols, samples)
        env = {self.input: x}

        def value(t):
            if t in env:
                return env[t]
            return self.graph.tensors[t].data

        for step in self.steps:
            if isinstance(step, _Host):
                env[step.op.outputs[0]] = step.run(value)
                report.ops.append(OpRun(step.op.index, step.op.name, "host"))
                continue
            first: GemmOp = step.gemms[0]
            matrix = first.input_matrix(value(first.in_tensor))
            y, chain = run_layers(accelerator, matrix, [g.layer for g in step.gemms])
            last = step.gemms[-1]
            env[last.out_tensor] = last.output_tensor(y, samples)
            for gemm, run in zip(step.gemms, chain.layers, strict=True):
                where = f"{backend}, chain {step.number}"
                if run.input == "chip":
                    where += ", on chip"
                report.ops.append(OpRun(gemm.op.index, gemm.op.name, where, run.shape,
                                        run.ideal, step.number, run.cycles))
            report.chains.append(ChainRun(step.number, [g.op.index for g in step.gemms],
                                          len(chain.results), chain.ideal, chain.cycles))
        report.ops.sort(key=lambda o: o.index)
        self.last = report
        y = env[self.output]
        return y if stacked else y[0]

    def describe(self) -> list[str]:
        """The plan: one line per op (where it runs, its GEMM, its output shape)."""
        lines = []
        for step in self.steps:
            if isinstance(step, _Host):
                lines.append(f"{step.op.index:>3}  {step.op.name:<18} host"
                             f"{'':<24} -> {self.shapes[step.op.outputs[0]]}")
                continue
            for gemm in step.gemms:
                lines.append(f"{gemm.op.index:>3}  {gemm.op.name:<18} accelerator chain "
                             f"{step.number:<3} K x N {gemm.k} x {gemm.n:<6} -> "
                             f"{gemm.out_shape}")
        return lines


@dataclass(eq=False)
class _HostOp:
    """What a host op's handler (``HOST_OPS``) gets: the ``model`` being planned, the ``op``,
    its first input (tensor ``x_t``, ``x``) and its output ``y`` (``TensorInfo``), and the
    input's ``shape``."""

    model: TFLiteModel
    op: OpInfo
    x_t: int
    x: TensorInfo
    y: TensorInfo
    shape: tuple

    def need(self, cond, what: str) -> None:
        if not cond:
            raise UnsupportedModel(f"op {self.op.index} {self.op.name}: {what}")

    def int8(self, info: TensorInfo, role: str) -> None:
        self.need(info.type_name == "INT8" and info.quantized and len(info.scales) == 1,
                  f"the {role} must be a per-tensor quantized int8 tensor, not "
                  f"{info.type_name}")

    def output_shape(self, shape: tuple) -> tuple:
        """Record the op's output shape; returns it."""
        self.model.shapes[self.op.outputs[0]] = shape
        return shape


def _quantize(h: _HostOp):
    x_t, x, y = h.x_t, h.x, h.y
    h.int8(y, "output")
    h.output_shape(h.shape)
    if x.type_name == "FLOAT32":
        return lambda v: quantize(v(x_t), y.scale, y.zero_point)
    h.int8(x, "input")
    return lambda v: requantize_int8(v(x_t), x.scale, x.zero_point, y.scale, y.zero_point)


def _dequantize(h: _HostOp):
    x_t, x = h.x_t, h.x
    h.int8(x, "input")
    h.need(h.y.type_name == "FLOAT32", "the output must be float32")
    h.output_shape(h.shape)
    return lambda v: dequantize(v(x_t), x.scale, x.zero_point)


def _reshape(h: _HostOp):
    op, g, shape, x_t = h.op, h.model.graph, h.shape, h.x_t
    if len(op.inputs) > 1 and op.inputs[1] >= 0 and g.tensors[op.inputs[1]].data is not None:
        new = [int(s) for s in g.tensors[op.inputs[1]].data.ravel()]
    elif op.options is not None and op.options.NewShapeLength():
        new = [int(s) for s in op.options.NewShapeAsNumpy()]
    else:
        new = list(h.y.shape)
    size = int(np.prod(shape))
    if new.count(-1) == 1:
        rest = int(np.prod([s for s in new if s != -1]))
        h.need(rest and size % rest == 0, f"cannot reshape {shape} to {tuple(new)}")
        new[new.index(-1)] = size // rest
    h.need(int(np.prod(new)) == size, f"cannot reshape {shape} to {tuple(new)}")
    out_shape = h.output_shape(tuple(new))
    return lambda v: v(x_t).reshape((-1,) + out_shape)


def _pool(h: _HostOp):
    op, x, y, shape, x_t = h.op, h.x, h.y, h.shape, h.x_t
    h.int8(x, "input")
    h.int8(y, "output")
    h.need(op.options is not None, "no options (stride 0)")
    h.need(len(shape) == 4, f"the input must be NHWC, not {shape}")
    h.need(x.scale == y.scale and x.zero_point == y.zero_point,
           "input and output quantization must be equal")
    o = op.options
    wy, wx = windows(op, o, shape[1], shape[2], o.FilterHeight(), o.FilterWidth(),
                     dilated=False)
    out_shape = h.output_shape((shape[0], wy.out, wx.out, shape[3]))
    lo, hi = _bounds(op, o, y)
    fn = max_pool if op.name == "MAX_POOL_2D" else average_pool

    def pool(v):
        xv = v(x_t)
        yv = fn(xv.reshape((-1,) + shape[1:]), wy, wx, lo, hi)
        return yv.reshape((xv.shape[0],) + out_shape)
    return pool


def _softmax(h: _HostOp):
    op, x, y, x_t = h.op, h.x, h.y, h.x_t
    h.int8(x, "input")
    h.int8(y, "output")
    h.need(np.float32(y.scale) == np.float32(SOFTMAX_OUT_SCALE)
           and y.zero_point == SOFTMAX_OUT_ZP,
           "the output quantization must be scale 1/256, zero point -128")
    beta = float(op.options.Beta()) if op.options is not None else 1.0
    h.output_shape(h.shape)
    return lambda v: softmax(v(x_t), x.scale, beta)


def _add(h: _HostOp):
    op, x, y, x_t = h.op, h.x, h.y, h.x_t
    b_t = op.inputs[1]
    b = h.model.graph.tensors[b_t]
    h.int8(x, "first input")
    h.int8(b, "second input")
    h.int8(y, "output")
    b_shape = h.model._shape(op, b_t)
    try:
        h.output_shape(tuple(np.broadcast_shapes(h.shape, b_shape)))
    except ValueError:
        h.need(False, f"shapes {h.shape} and {b_shape} do not broadcast")
    lo, hi = _bounds(op, op.options, y)
    return lambda v: add(v(x_t), v(b_t), (x.scale, x.zero_point), (b.scale, b.zero_point),
                         (y.scale, y.zero_point), lo, hi)


#: The ops that run on the host: name -> handler (``_HostOp`` -> a callable computing the op's
#: output from ``value(t)``, samples first; it records the output's shape and refuses, with
#: ``UnsupportedModel``, what it cannot run exactly).
HOST_OPS = {
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "RESHAPE": _reshape,
    "MAX_POOL_2D": _pool,
    "AVERAGE_POOL_2D": _pool,
    "SOFTMAX": _softmax,
    "ADD": _add,
}
#: Every op tpugen runs: the GEMM ops on the accelerator, ``HOST_OPS`` on the host.
SUPPORTED_OPS = GEMM_OPS + tuple(HOST_OPS)


def _bounds(op: OpInfo, options, y_info) -> tuple[int, int]:
    """The clamp of a host op's fused activation (TFLite's activation range)."""
    return activation_bounds(activation_name(op, options), y_info.scale, y_info.zero_point)


def load_tflite(path) -> TFLiteModel:
    """Read and plan the int8 ``.tflite`` model at ``path`` (a ``str`` or ``os.PathLike``;
    ``TypeError`` otherwise). ``ValueError`` names the path for a missing file, a directory or
    a file that is no ``.tflite`` flatbuffer; ``UnsupportedModel`` (a ``ValueError``) names the
    first op tpugen cannot run; ``OSError`` when the file cannot be read."""
    if not isinstance(path, str | PathLike):
        raise TypeError(f"path must be a str or a path, not {path!r}")
    p = check_input_file(path, f"path {str(path)!r}", "a .tflite file")
    data = p.read_bytes()
    try:
        return TFLiteModel(data, name=p.name)
    except UnsupportedModel:
        raise
    except ValueError as e:
        raise ValueError(f"path {str(path)!r}: {e}") from None
