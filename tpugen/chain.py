"""Chains of int8 GEMM layers on an accelerator: the runner the TFLite importer calls.

``run_layers(accelerator, x, layers) -> (y, report)``: ``x`` is the first layer's M x K input
(int8 values); each layer (the TFLite importer's ``tpugen.tflite.lowering.GemmLayer``, a
``tpugen.compiler.ChainLayer`` or a tuple ``(weights, params[, in_zp])``) computes
``y = requantize((x - in_zp) @ weights, params)``, the next layer's input. The chain is compiled
for ``accelerator.config`` (``compile_chain``: the activations between layers stay on chip, no
host round trip, whenever the unified buffer can hold them), run with ``accelerator.run``
(any backend), decoded, and checked against ``chain_reference`` (NumPy): a result that differs
raises ``tpugen.ResultMismatch`` (its ``report`` is the ``ChainReport``), so nothing wrong is
ever returned.

Cycles: the hardware counts cycles per program, not per layer, and the layers of one program
overlap (a layer's last outputs drain while the next one's first products run), so a run's
cycles cannot be split between its layers. ``ChainReport.cycles`` is the whole run's (all
programs; ``None`` on a backend that counts none, such as ``model``); a ``LayerRun`` has
``cycles`` only when its layer ran alone in its program (after a host round trip, or a
one-layer chain), else ``None``, and always its ``ideal`` cycles and its ``matmuls`` (the
MATMUL instructions it took).
"""

from dataclasses import dataclass, field

import numpy as np

from tpugen.accelerator import ResultMismatch, result_dtype
from tpugen.compiler import CompiledChain, LayerPlan, compile_chain
from tpugen.compiler.planes import ConvLayer, compile_planes
from tpugen.sim.ideal_cycles import ideal_cycles
from tpugen.sim.reference import chain_reference

__all__ = ["LayerRun", "ChainReport", "run_layers", "run_planes"]


@dataclass
class LayerRun:
    """One layer of a run: its GEMM ``shape`` (M, K, N), ``ideal`` cycles
    (``ceil(M*K*N / (R*C))``), ``matmuls`` (MATMUL instructions), where its ``input`` came
    from and its ``output`` went (``"host"`` / ``"chip"``), and ``cycles``: its program's
    cycles when it ran alone in one, else ``None`` (module docstring)."""

    shape: tuple
    ideal: int
    matmuls: int
    input: str
    output: str
    cycles: int | None = None


@dataclass
class ChainReport:
    """A chain's run: the ``backend``'s name, ``layers`` (one ``LayerRun`` each), ``results``
    (the backend's ``RunResult`` of each program), ``first_mismatch`` (``(row, col, got,
    expected)`` of the first wrong output element, or ``None``), ``problem`` (a line, when not
    passed) and ``passed``."""

    backend: str
    layers: list = field(default_factory=list)
    results: list = field(default_factory=list)
    first_mismatch: tuple | None = None
    problem: str | None = None

    @property
    def passed(self) -> bool:
        return self.problem is None

    @property
    def cycles(self) -> int | None:
        """Cycles of the whole run (every program), or ``None`` when the backend counts
        none."""
        counts = [r.cycles for r in self.results]
        return sum(counts) if counts and all(c is not None for c in counts) else None

    @property
    def ideal(self) -> int:
        return sum(layer.ideal for layer in self.layers)

    def lines(self) -> list[str]:
        out = []
        for i, layer in enumerate(self.layers):
            m, k, n = layer.shape
            cycles = "" if layer.cycles is None else f", {layer.cycles} cycles"
            out.append(f"layer {i}      {m} x {k} x {n}, input from {layer.input}, output to "
                       f"{layer.output}, {layer.matmuls} MATMULs, ideal {layer.ideal}{cycles}")
        total = self.cycles
        counted = f"not counted by the {self.backend} backend" if total is None else total
        out.append(f"cycles       {counted} (ideal {self.ideal})")
        if self.problem:
            out.append(f"problem      {self.problem}")
        out.append("PASS" if self.passed else "FAIL")
        return out


class _Stop(Exception):
    """A program's result is wrong: the later programs do not run."""


def run_layers(accelerator, x, layers) -> tuple[np.ndarray, ChainReport]:
    """Run the chain ``layers`` on ``x`` (M x K int8 values) on ``accelerator`` (an
    ``Accelerator``: its ``config``, ``backend_name`` and ``run(program)``); returns the last
    layer's M x N output (int8, or the int32 sums of a last layer without parameters: dtype
    as ``Accelerator.matmul``'s) and the ``ChainReport``. ``TypeError`` / ``ValueError`` for
    bad input (``compile_chain``); ``ResultMismatch`` when a program's result differs from
    NumPy's (checked after each program: with host round trips, the next program takes the
    previous one's output)."""
    config = getattr(accelerator, "config", None)
    if config is None or not callable(getattr(accelerator, "run", None)):
        raise TypeError(f"accelerator must be an Accelerator (config and run), not "
                        f"{accelerator!r}")
    compiled = compile_chain(config, x, layers)
    report = ChainReport(getattr(accelerator, "backend_name", "?"))
    stages = [p.stage for p in compiled.layers]
    ends = [max(i for i, s in enumerate(stages) if s == st) + 1 for st in range(compiled.stages)]

    def execute(program):
        i = len(report.results)
        result = accelerator.run(program)
        report.results.append(result)
        expected = chain_reference(config, x, list(layers)[:ends[i]])
        report.problem, report.first_mismatch = _check(compiled.stage(i), result, expected,
                                                       report.backend)
        if report.problem is not None:
            if compiled.stages > 1:
                report.problem = (f"program {i + 1} of {compiled.stages} (layers up to "
                                  f"{ends[i] - 1}): {report.problem}")
            raise _Stop
        return result

    try:
        y, _ = compiled.run(execute)
    except _Stop:
        y = None
    report.layers = [_layer_run(config, plan, compiled, report.results)
                     for plan in compiled.layers]
    if y is None:
        raise ResultMismatch(report)
    return y.astype(result_dtype(config, compiled.out)), report


def _check(stage, result, expected: np.ndarray, backend: str):
    """``(problem, first_mismatch)`` of one program's ``result`` (``(None, None)``: right)."""
    try:
        got = stage.decode(result.host_out)
    except ValueError as e:
        return f"the {backend} run gave no result: {e}", None
    diff = np.argwhere(got != expected)
    if len(diff):
        i, j = (int(v) for v in diff[0])
        first = (i, j, int(got[i, j]), int(expected[i, j]))
        return (f"{len(diff)} of {expected.size} results differ from the golden model; first "
                f"[{i}, {j}] = {first[2]}, expected {first[3]}"), first
    if result.mismatches:
        return f"the testbench found a mismatch: {result.mismatches[0]}", None
    if result.error:
        return f"the accelerator reported error cause {result.error}", None
    return None, None


def _layer_run(config, plan: LayerPlan, compiled: CompiledChain, results) -> LayerRun:
    alone = sum(p.stage == plan.stage for p in compiled.layers) == 1
    cycles = results[plan.stage].cycles if alone and plan.stage < len(results) else None
    return LayerRun(plan.shape, ideal_cycles(config, *plan.shape), plan.matmuls, plan.input,
                    plan.output, cycles)


def run_planes(accelerator, x, layers, expected) -> tuple[np.ndarray, ChainReport]:
    """Run a convolution chain on planes (``compiler.planes.compile_planes``: ``x`` B x H x W
    x Cin int8, ``layers`` ``ConvLayer`` s then optionally ``ChainLayer`` s) as one program on
    ``accelerator``; returns its int8 output (``B * OH * OW`` x ``Cout``, or ``B`` x ``N``)
    and the ``ChainReport``. ``expected``: the NumPy result to check it against (the caller's
    golden model: the importer's host-path GEMMs), or a callable giving it (called once the
    chain is compiled); ``ResultMismatch`` when it differs,
    ``compiler.planes.PlaneMisfit`` when the chain does not fit the planes (nothing ran)."""
    config = getattr(accelerator, "config", None)
    if config is None or not callable(getattr(accelerator, "run", None)):
        raise TypeError(f"accelerator must be an Accelerator (config and run), not "
                        f"{accelerator!r}")
    compiled = compile_planes(config, x, layers)
    report = ChainReport(getattr(accelerator, "backend_name", "?"))
    result = accelerator.run(compiled.program)
    report.results.append(result)
    expected = np.asarray(expected() if callable(expected) else expected)
    report.problem, report.first_mismatch = _check(compiled, result, expected, report.backend)
    images = np.asarray(x).shape[0]
    for i, layer in enumerate(layers):
        w = layer.weights
        if isinstance(layer, ConvLayer):
            shape = (images * layer.out_hw[0] * layer.out_hw[1], int(np.prod(w.shape[:3])),
                     w.shape[3])
        else:
            shape = (images, *w.shape)
        report.layers.append(LayerRun(shape, ideal_cycles(config, *shape),
                                      compiled.plan["matmuls"][i], "host" if i == 0 else "chip",
                                      "host" if i == len(layers) - 1 else "chip",
                                      result.cycles if len(layers) == 1 else None))
    if report.problem is not None:
        raise ResultMismatch(report)
    return compiled.decode(result.host_out).astype(result_dtype(config, "int8")), report
