"""An imported int8 ``.tflite`` model: a plan of accelerator chains and host ops, and its run.

``TFLiteModel(data)`` reads the flatbuffer (``reader``), refuses in one line a model holding
ops it does not run (``UnsupportedModel`` naming each with its count), folds what it can at
load time (``folding``: shape arithmetic on constants, a PAD into the convolution after it),
computes every tensor's shape, lowers the GEMM
ops to accelerator layers (``lowering``) and groups consecutive ones into chains: a GEMM op
joins the chain before it when it reads that chain's last output (its only reader, not a model
output) as its input matrix unchanged (FULLY_CONNECTED after a GEMM op, 1x1 stride-1
convolutions), so that the activations between them stay on chip. Any other GEMM op starts a
chain of its own: a k x k or strided convolution needs its input gathered into windows
(im2col), and a FULLY_CONNECTED that flattens an NHWC tensor (conv -> FC without a RESHAPE)
needs it re-laid, both on the host. The other ops run on the host (``HOST_OPS``: the handlers
of ``host_ops_basic``, ``host_ops_math``, ``host_ops_shape``).

``run(x, accelerator)``: ``x`` has the model input's shape and dtype, or one more leading axis
of samples (the result then has it too); the samples run together (folded into the GEMMs' M).
Each chain runs with ``tpugen.chain.run_layers`` on the accelerator's backend (``model``,
``amaranth``, ``icarus``, ``verilator``, ``verilator-cocotb``, ``board``), which checks every
program's result against NumPy (``ResultMismatch``, a ``RuntimeError``, when it differs).
``last`` holds the ``InferenceReport`` (``inference_report``): per op where it ran, its GEMM,
its own MACs, cycles and utilization; per chain its cycles. ``describe()`` (``list_ops`` for
the command line) is the plan without running anything.
"""

from collections import Counter
from dataclasses import dataclass, replace
from os import PathLike

import numpy as np

from tpugen.chain import run_layers
from tpugen.files import check_input_file
from tpugen.tflite.folding import FOLDABLE, fold, foldable, pads_to_fold
from tpugen.tflite.host_op import HostOp
from tpugen.tflite.host_ops_basic import BASIC_OPS
from tpugen.tflite.host_ops_math import MATH_OPS
from tpugen.tflite.host_ops_shape import SHAPE_OPS
from tpugen.tflite.inference_report import ChainRun, InferenceReport, OpRun
from tpugen.tflite.lowering import GEMM_OPS, GemmOp, lower
from tpugen.tflite.pool_lowering import lower_average_pool
from tpugen.tflite.reader import Graph, OpInfo, read_graph
from tpugen.tflite.unsupported import UnsupportedModel
from tpugen.tflite.window_chains import WindowChain, window_steps

__all__ = ["SUPPORTED_OPS", "HOST_OPS", "check_model_config", "TFLiteModel", "InferenceReport",
           "OpRun", "ChainRun", "load_tflite", "list_ops"]

#: The ops that run on the host: name -> handler (``host_op.HostOp`` -> a callable computing
#: the op's output from ``value(t)``, samples first; it records the output's shape and
#: refuses, with ``UnsupportedModel``, what it cannot run exactly).
HOST_OPS = {**BASIC_OPS, **MATH_OPS, **SHAPE_OPS}
#: Every op tpugen runs: the GEMM ops on the accelerator, ``HOST_OPS`` on the host, and the
#: shape arithmetic folded at load time (``folding.FOLDABLE``).
SUPPORTED_OPS = GEMM_OPS + tuple(HOST_OPS) + FOLDABLE


@dataclass(eq=False)
class _Chain:
    gemms: list
    number: int


@dataclass(eq=False)
class _Host:
    op: OpInfo
    run: object          # callable(value_of) -> the output value (samples first)


def unsupported_ops(graph: Graph) -> Counter:
    """The ops of ``graph`` that tpugen does not run, with their counts (model order)."""
    return Counter(op.name for op in graph.ops if op.name not in SUPPORTED_OPS)


def _refuse_unsupported(graph: Graph) -> None:
    missing = unsupported_ops(graph)
    if missing:
        names = ", ".join(f"{name} ({n})" for name, n in missing.items())
        raise UnsupportedModel(f"unsupported ops: {names}; tpugen runs "
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
        #: op index -> how it was folded at load time (``"constant"``, or ``"into op N"``)
        self.folded = {}
        pads = pads_to_fold(self.graph)
        for conv, (pad, _) in pads.items():
            self.folded[pad.index] = f"into op {conv}"
        consumers = Counter(t for op in self.graph.ops if op.name not in FOLDABLE
                            for t in op.inputs)
        chains = 0
        for op in self.graph.ops:
            if op.index in self.folded:
                continue
            if op.name in FOLDABLE and foldable(self.graph, op):
                self._set_constant(op.outputs[0], fold(self.graph, op,
                                                       lambda t, op=op: self._shape(op, t)))
                self.folded[op.index] = "constant"
                continue
            if op.name in FOLDABLE:
                raise UnsupportedModel(f"op {op.index} {op.name}: only constant inputs are "
                                       "supported (folded at load time)")
            if op.name in GEMM_OPS:
                pad = pads.get(op.index)
                if pad is not None:
                    pad = (pad[0].inputs[0], pad[1])
                    in_shape = self._shape(op, pad[0])
                else:
                    in_shape = self._shape(op, op.inputs[0])
                gemm = lower(self.graph, op, in_shape, pad)
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
        #: the plan for an accelerator with the window walk (``Config.window``)
        self.window_steps = window_steps(
            self.steps, _Chain, consumers, self.graph.outputs, self.shapes,
            pools=lambda op: lower_average_pool(self.graph, op, self.shapes[op.inputs[0]]))
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

    def _set_constant(self, t: int, value: np.ndarray) -> None:
        """Make tensor ``t`` the constant ``value`` (a folded op's output)."""
        tensors = list(self.graph.tensors)
        tensors[t] = replace(tensors[t], data=value, shape=tuple(value.shape))
        self.graph = replace(self.graph, tensors=tuple(tensors))
        self.shapes[t] = tuple(value.shape)

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
        h = HostOp(self, op, x_t, self.graph.tensors[x_t],
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

    def run(self, x, accelerator, tensors: dict | None = None) -> np.ndarray:
        """The model's output for ``x`` (``check_input``) on ``accelerator`` (a
        ``tpugen.Accelerator``: its ``config``, ``backend_name`` and ``run``); ``last`` then
        holds the ``InferenceReport``. Raises ``TypeError`` / ``ValueError`` for bad input,
        ``tpugen.ResultMismatch`` when a chain's result differs from NumPy's, and what the
        backend raises (a missing simulator, a board's link errors). ``tensors``: a dict to
        fill with every tensor the run materializes (index -> value, samples first)."""
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

        steps = self.window_steps if getattr(config, "window", 0) else self.steps
        for step in steps:
            if isinstance(step, _Host):
                env[step.op.outputs[0]] = step.run(value)
                report.ops.append(OpRun(step.op.index, step.op.name, "host"))
                continue
            if isinstance(step, WindowChain):
                self._run_window(accelerator, report, env, value, step, samples)
                continue
            self._run_chain(accelerator, report, env, value, step, samples)
        for index, how in self.folded.items():
            report.ops.append(OpRun(index, self.graph.ops[index].name, f"folded {how}"))
        report.ops.sort(key=lambda o: o.index)
        self.last = report
        if tensors is not None:
            tensors.update(env)
        y = env[self.output]
        return y if stacked else y[0]

    def _run_window(self, accelerator, report, env, value, step, samples) -> None:
        """Run a ``WindowChain`` (its segments: programs on planes, or the host path) and
        record it."""
        segments = step.run(accelerator, value, samples)
        for seg in segments:
            self._record(report, env, _Chain(seg.gemms, step.number), seg.y, seg.report,
                         samples, seg.note)
        env.update(step.env)
        for op in step.flattens:
            # On planes when the convolution before it and the FULLY_CONNECTED after it ran
            # in one program; else the host reshaped it (nothing to compute either way).
            inside = any(seg.note == "window walk"
                         and {g.out_tensor for g in seg.gemms} & {op.inputs[0]}
                         and {g.in_tensor for g in seg.gemms} & {op.outputs[0]}
                         for seg in segments)
            where = f"{report.backend}, chain {step.number}, window walk (a flatten)"
            report.ops.append(OpRun(op.index, op.name, where if inside else "host"))

    def _run_chain(self, accelerator, report, env, value, step, samples, note=None) -> None:
        """Run a chain of GEMM ops (``run_layers``: its first op's input matrix from the
        host) and record it."""
        first: GemmOp = step.gemms[0]
        matrix = first.input_matrix(value(first.in_tensor))
        y, chain = run_layers(accelerator, matrix, [g.layer for g in step.gemms])
        self._record(report, env, step, y, chain, samples, note)

    def _record(self, report, env, step, y, chain, samples, note) -> None:
        """The chain's output into ``env``, its ops and its ``ChainRun`` into ``report``
        (``note``: how it ran, added to each op's ``where``)."""
        last = step.gemms[-1]
        env[last.out_tensor] = last.output_tensor(y, samples)
        for gemm, run in zip(step.gemms, chain.layers, strict=True):
            where = f"{report.backend}, chain {step.number}"
            if run.input == "chip":
                where += ", on chip"
            if note:
                where += f", {note}"
            report.ops.append(OpRun(gemm.op.index, gemm.op.name, where, run.shape,
                                    run.ideal, step.number, run.cycles,
                                    gemm.macs * samples))
        report.chains.append(ChainRun(step.number, [g.op.index for g in step.gemms],
                                      len(chain.results), chain.ideal, chain.cycles,
                                      sum(g.macs for g in step.gemms) * samples))

    def describe(self) -> list[str]:
        """The plan, without running anything: one line per op (model order) with where it
        runs (``array, chain N``, ``+ on chip`` when its input stays on the array; ``host``;
        ``folded ...`` at load time), its MACs per sample (the model's own), the GEMM the array
        runs per sample (M x K x N) and its output shape; then the totals."""
        rows = {}
        macs = gemm_macs = 0
        for step in self.steps:
            if isinstance(step, _Host):
                rows[step.op.index] = (step.op.name, "host", "", "",
                                       self.shapes[step.op.outputs[0]])
                continue
            for i, g in enumerate(step.gemms):
                m = int(np.prod(g.out_shape[:-1]))
                where = f"array, chain {step.number}" + (", on chip" if i else "")
                rows[g.op.index] = (g.op.name, where, str(g.macs), f"{m} x {g.k} x {g.n}",
                                    g.out_shape)
                macs += g.macs
                gemm_macs += m * g.k * g.n
        for index, how in self.folded.items():
            rows[index] = (self.graph.ops[index].name, f"folded {how}", "", "", "")
        lines = [f"{'op':>3}  {'name':<18} {'runs on':<24} {'MACs':>10}  {'GEMM M x K x N':<20} "
                 "output"]
        for index in sorted(rows):
            name, where, m, gemm, shape = rows[index]
            lines.append(f"{index:>3}  {name:<18} {where:<24} {m:>10}  {gemm:<20} {shape}")
        lines.append(f"total: {macs} model MACs per sample on the array ({gemm_macs} in its "
                     f"GEMMs, zeros of depthwise layers included), {len(self.graph.ops)} ops")
        return lines


def list_ops(data) -> list[str]:
    """``tpugen infer --list-ops``: ``TFLiteModel.describe`` of the model ``data`` (bytes);
    for a model tpugen refuses, each op with where it would run (``array``, ``host`` or
    ``unsupported``) and the refusal."""
    try:
        return TFLiteModel(data).describe()
    except UnsupportedModel as e:
        graph = read_graph(data)
        lines = [f"{'op':>3}  {'name':<18} runs on"]
        for op in graph.ops:
            where = ("array" if op.name in GEMM_OPS else
                     "load (folded)" if op.name in FOLDABLE else
                     "host" if op.name in SUPPORTED_OPS else "unsupported")
            lines.append(f"{op.index:>3}  {op.name:<18} {where}")
        lines.append(f"refused: {e}")
        return lines


def load_tflite(path) -> TFLiteModel:
    """Read and plan the int8 ``.tflite`` model at ``path`` (a ``str`` or ``os.PathLike``;
    ``TypeError`` otherwise). ``ValueError`` names the path for a missing file, a directory or
    a file that is no ``.tflite`` flatbuffer; ``UnsupportedModel`` (a ``ValueError``) names the
    ops tpugen cannot run; ``OSError`` when the file cannot be read."""
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
