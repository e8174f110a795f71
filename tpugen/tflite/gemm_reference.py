"""A stand-in for the accelerator's layer-chain runner, in NumPy (to be replaced).

The importer hands chains of GEMM layers to a runner with this interface::

    GemmLayer(weights, params, in_zp)        weights K x N int8, params QuantParams
    run_layers(accelerator, x, layers) -> (y, report)
        x: M x K int8, the first layer's input; each layer's int8 output is the next one's
        input (kept on chip by the hardware runner); y: M x N_last int8.

Until the activation unit that computes ``tpugen.sim.requant.requantize`` and its compiler
land (issue 12), ``run_layers_reference`` computes it here for the ``model`` backend:
``acc = (x - in_zp) @ w`` (int64, wrapped to int32 by ``requantize``), then ``requantize``.
Other backends are refused: they need that work. ``report.layers`` has one ``LayerRun`` per
layer (``shape``, ``cycles``: ``None`` here, the golden model counts none).
"""

from dataclasses import dataclass, field

import numpy as np

from tpugen.sim.requant import QuantParams, requantize

__all__ = ["GemmLayer", "LayerRun", "LayersReport", "run_layers_reference"]


@dataclass(frozen=True, eq=False)
class GemmLayer:
    """One accelerator layer: ``y = requantize((x - in_zp) @ weights, params)``."""

    weights: np.ndarray
    params: QuantParams
    in_zp: int = 0

    def __post_init__(self):
        w = np.asarray(self.weights)
        if w.ndim != 2 or w.dtype != np.int8:
            raise ValueError(f"weights must be a K x N int8 matrix, not {w.dtype} {w.shape}")
        if not isinstance(self.params, QuantParams):
            raise TypeError(f"params must be QuantParams, not {self.params!r}")
        if self.params.channels not in (None, w.shape[1]):
            raise ValueError(f"params have {self.params.channels} channels, the weights "
                             f"{w.shape[1]} columns")
        if isinstance(self.in_zp, bool) or not isinstance(self.in_zp, int | np.integer) \
                or not -128 <= self.in_zp <= 127:
            raise ValueError(f"in_zp must be an integer in -128..127, not {self.in_zp!r}")


@dataclass(frozen=True)
class LayerRun:
    """What a runner measured of one layer: its GEMM ``shape`` (M, K, N) and ``cycles``
    (``None`` when the backend counts none)."""

    shape: tuple
    cycles: int | None = None


@dataclass
class LayersReport:
    """A chain's run: ``layers`` (one ``LayerRun`` each), ``backend`` (its name)."""

    backend: str
    layers: list = field(default_factory=list)


def run_layers_reference(accelerator, x, layers) -> tuple[np.ndarray, LayersReport]:
    """Run the chain ``layers`` on ``x`` (M x K int8) for ``accelerator``'s ``model``
    backend, in NumPy; returns the last layer's M x N int8 output and the report."""
    name = getattr(accelerator, "backend_name", None)
    if name != "model":
        raise NotImplementedError(
            f"the {name} backend needs the activation-unit work (issue 12: TFLite "
            "requantization in hardware); run with --backend model")
    if not layers or not all(isinstance(layer, GemmLayer) for layer in layers):
        raise TypeError("layers must be a non-empty list of GemmLayer")
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype != np.int8:
        raise ValueError(f"x must be an M x K int8 matrix, not {x.dtype} {x.shape}")
    report = LayersReport(backend=name)
    for layer in layers:
        k, n = layer.weights.shape
        if x.shape[1] != k:
            raise ValueError(f"a layer of {k} inputs gets {x.shape[1]}")
        acc = (x.astype(np.int64) - layer.in_zp) @ layer.weights.astype(np.int64)
        x = requantize(acc, layer.params).astype(np.int8)
        report.layers.append(LayerRun(shape=(acc.shape[0], k, n)))
    return x, report
