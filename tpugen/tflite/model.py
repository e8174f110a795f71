"""An imported int8 ``.tflite`` model: a plan of accelerator chains and host ops, and its run.

``TFLiteModel(data)`` reads the flatbuffer (``reader``), refuses in one line a model holding an
op it cannot run exactly (``UnsupportedModel``), computes every tensor's shape, lowers the GEMM
ops to accelerator layers (``lowering``) and groups consecutive ones into chains: a GEMM op
joins the chain before it when it reads that chain's last output (its only reader, not a model
output) as its input matrix unchanged (FULLY_CONNECTED, 1x1 stride-1 convolutions), so the
runner can keep the activations on chip. The other ops run on the host (``kernels``,
``softmax``).

``run(x, accelerator)``: ``x`` has the model input's shape and dtype, or one more leading axis
of samples (the result then has it too); the samples run together (folded into the GEMMs' M).
``last`` holds the ``InferenceReport`` (per op: where it ran, GEMM shape, cycles, utilization).

The chains run through ``run_layers(accelerator, x, layers) -> (y, report)``, for now the NumPy
stand-in ``gemm_reference.run_layers_reference`` (``model`` backend only): the hardware runner
of issue 12 replaces that one import (its report gives ``.layers``, each ``.shape`` and
``.cycles``).
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tpugen.sim.cycles import ideal_cycles
from tpugen.sim.requant import activation_bounds

from .errors import UnsupportedModel
from .gemm_reference import run_layers_reference as run_layers  # stand-in (see docstring)
from .kernels import add, average_pool, dequantize, max_pool, quantize, requantize_int8
from .lowering import GEMM_OPS, GemmOp, activation_name, lower, windows
from .reader import Graph, OpInfo, read_graph
from .softmax import SOFTMAX_OUT_SCALE, SOFTMAX_OUT_ZP, softmax

__all__ = ["SUPPORTED_OPS", "TFLiteModel", "InferenceReport", "OpRun", "load_tflite"]

HOST_OPS = ("QUANTIZE", "DEQUANTIZE", "RESHAPE", "MAX_POOL_2D", "AVERAGE_POOL_2D", "SOFTMAX",
            "ADD")
SUPPORTED_OPS = GEMM_OPS + HOST_OPS


@dataclass
class OpRun:
    """One op of a run: ``where`` it ran, its GEMM ``shape`` (M, K, N; ``None`` on the host),
    ``cycles`` (``None`` when the backend counts none) and ``ideal`` cycles."""

    index: int
    name: str
    where: str
    shape: tuple | None = None
    cycles: int | None = None
    ideal: int | None = None

    @property
    def utilization(self) -> float | None:
        return None if not self.cycles or not self.ideal else self.ideal / self.cycles


@dataclass
class InferenceReport:
    """A model run: ``ops`` (one ``OpRun`` per op, model order), the array's ``rows`` x
    ``cols``, the ``backend`` and the number of ``samples``."""

    backend: str
    rows: int
    cols: int
    samples: int
    ops: list = field(default_factory=list)

    @property
    def cycles(self) -> int | None:
        """Accelerator cycles of the whole run (``None`` unless every GEMM op has them)."""
        runs = [o.cycles for o in self.ops if o.shape is not None]
        return sum(runs) if runs and all(c is not None for c in runs) else None

    @property
    def ideal(self) -> int:
        return sum(o.ideal for o in self.ops if o.ideal is not None)

    def lines(self) -> list[str]:
        out = [f"{'op':>3}  {'name':<18} {'ran on':<32} {'GEMM M x K x N':<18} "
               f"{'cycles':>10} {'ideal':>10} {'util':>7}"]
        for o in self.ops:
            shape = "" if o.shape is None else " x ".join(str(v) for v in o.shape)
            cycles = "" if o.shape is None else "-" if o.cycles is None else str(o.cycles)
            ideal = "" if o.ideal is None else str(o.ideal)
            util = "" if o.shape is None else (
                "n/a" if o.utilization is None else f"{100 * o.utilization:.1f} %")
            out.append(f"{o.index:>3}  {o.name:<18} {o.where:<32} {shape:<18} {cycles:>10} "
                       f"{ideal:>10} {util:>7}")
        total = self.cycles
        per = "" if total is None else f", {total / self.samples:.0f} per sample"
        out.append(f"accelerator: {self.backend} backend, {self.rows} x {self.cols} array, "
                   f"{self.samples} sample(s); cycles "
                   f"{'not counted by this backend' if total is None else total}{per}; "
                   f"ideal {self.ideal} ({self.ideal / self.samples:.0f} per sample)")
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


class TFLiteModel:
    """An int8 TFLite model planned for an accelerator (see the module docstring)."""

    def __init__(self, data, name: str = "model"):
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
        """A callable computing ``op``'s output from ``value(t)``; sets the output shape."""
        g = self.graph
        x_t = op.inputs[0]
        x_info, y_info = g.tensors[x_t], g.tensors[op.outputs[0]]
        shape = self._shape(op, x_t)
        out = op.outputs[0]

        def need(cond, what):
            if not cond:
                raise UnsupportedModel(f"op {op.index} {op.name}: {what}")

        def int8(info, role):
            need(info.type_name == "INT8" and info.quantized and len(info.scales) == 1,
                 f"the {role} must be a per-tensor quantized int8 tensor, not "
                 f"{info.type_name}")

        name = op.name
        if name == "QUANTIZE":
            int8(y_info, "output")
            self.shapes[out] = shape
            if x_info.type_name == "FLOAT32":
                return lambda v: quantize(v(x_t), y_info.scale, y_info.zero_point)
            int8(x_info, "input")
            return lambda v: requantize_int8(v(x_t), x_info.scale, x_info.zero_point,
                                                     y_info.scale, y_info.zero_point)
        if name == "DEQUANTIZE":
            int8(x_info, "input")
            need(y_info.type_name == "FLOAT32", "the output must be float32")
            self.shapes[out] = shape
            return lambda v: dequantize(v(x_t), x_info.scale, x_info.zero_point)
        if name == "RESHAPE":
            new = None
            if len(op.inputs) > 1 and op.inputs[1] >= 0 and g.tensors[op.inputs[1]].data \
                    is not None:
                new = [int(s) for s in g.tensors[op.inputs[1]].data.ravel()]
            elif op.options is not None and op.options.NewShapeLength():
                new = [int(s) for s in op.options.NewShapeAsNumpy()]
            else:
                new = list(y_info.shape)
            size = int(np.prod(shape))
            if new.count(-1) == 1:
                rest = int(np.prod([s for s in new if s != -1]))
                need(rest and size % rest == 0, f"cannot reshape {shape} to {tuple(new)}")
                new[new.index(-1)] = size // rest
            need(int(np.prod(new)) == size, f"cannot reshape {shape} to {tuple(new)}")
            self.shapes[out] = tuple(new)
            return lambda v: v(x_t).reshape((-1,) + tuple(new))
        if name in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
            int8(x_info, "input")
            int8(y_info, "output")
            need(op.options is not None, "no options (stride 0)")
            need(len(shape) == 4, f"the input must be NHWC, not {shape}")
            need(x_info.scale == y_info.scale and x_info.zero_point == y_info.zero_point,
                 "input and output quantization must be equal")
            o = op.options
            wy, wx = windows(op, o, shape[1], shape[2], o.FilterHeight(), o.FilterWidth(),
                             dilated=False)
            self.shapes[out] = (shape[0], wy.out, wx.out, shape[3])
            lo, hi = _bounds(op, o, y_info)
            fn = max_pool if name == "MAX_POOL_2D" else average_pool

            def pool(v):
                x = v(x_t)
                y = fn(x.reshape((-1,) + shape[1:]), wy, wx, lo, hi)
                return y.reshape((x.shape[0],) + self.shapes[out])
            return pool
        if name == "SOFTMAX":
            int8(x_info, "input")
            int8(y_info, "output")
            need(np.float32(y_info.scale) == np.float32(SOFTMAX_OUT_SCALE)
                 and y_info.zero_point == SOFTMAX_OUT_ZP,
                 "the output quantization must be scale 1/256, zero point -128")
            beta = float(op.options.Beta()) if op.options is not None else 1.0
            self.shapes[out] = shape
            return lambda v: softmax(v(x_t), x_info.scale, beta)
        if name == "ADD":
            b_t = op.inputs[1]
            b_info = g.tensors[b_t]
            int8(x_info, "first input")
            int8(b_info, "second input")
            int8(y_info, "output")
            b_shape = self._shape(op, b_t)
            try:
                self.shapes[out] = tuple(np.broadcast_shapes(shape, b_shape))
            except ValueError:
                need(False, f"shapes {shape} and {b_shape} do not broadcast")
            lo, hi = _bounds(op, op.options, y_info)
            return lambda v: add(v(x_t), v(b_t), (x_info.scale, x_info.zero_point),
                                         (b_info.scale, b_info.zero_point),
                                         (y_info.scale, y_info.zero_point), lo, hi)
        raise UnsupportedModel(f"unsupported op {name} (op {op.index})")

    # --- running ----------------------------------------------------------------------------
    def run(self, x, accelerator) -> np.ndarray:
        """The model's output for ``x`` on ``accelerator`` (a ``tpugen.Accelerator``)."""
        if not hasattr(accelerator, "config") or not hasattr(accelerator, "backend_name"):
            raise TypeError(f"accelerator must be a tpugen.Accelerator, not {accelerator!r}")
        x = np.asarray(x)
        want = self.input_shape
        if x.shape == want:
            stacked, x = False, x[None]
        elif x.shape[1:] == want and x.shape[0] >= 1:
            stacked = True
        else:
            raise ValueError(f"the input must have shape {want} (or N x {want} for N "
                             f"inputs), not {x.shape}")
        if x.dtype != self.input_dtype:
            raise ValueError(f"the input must have dtype {self.input_dtype}, not {x.dtype}")
        config = accelerator.config
        samples = x.shape[0]
        report = InferenceReport(getattr(accelerator, "backend_name", "?"), config.rows,
                                 config.cols, samples)
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
            y, layers = run_layers(accelerator, matrix, [g.layer for g in step.gemms])
            last = step.gemms[-1]
            env[last.out_tensor] = last.output_tensor(y, samples)
            for j, (gemm, run) in enumerate(zip(step.gemms, layers.layers, strict=True)):
                where = f"accelerator, chain {step.number}"
                if j:
                    where += " (on chip)"
                report.ops.append(OpRun(gemm.op.index, gemm.op.name, where, run.shape,
                                        run.cycles, ideal_cycles(config, *run.shape)))
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


def _bounds(op: OpInfo, options, y_info) -> tuple[int, int]:
    """The clamp of a host op's fused activation (TFLite's activation range)."""
    return activation_bounds(activation_name(op, options), y_info.scale, y_info.zero_point)


def load_tflite(path) -> TFLiteModel:
    """Read and plan the int8 ``.tflite`` model at ``path`` (raises ``UnsupportedModel``,
    a ``ValueError``, naming the first op tpugen cannot run)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no such model file {str(path)!r}")
    return TFLiteModel(path.read_bytes(), name=path.name)
