"""Layers: the layer type, its checks, the input zero point folded into the bias, and the
tiles the scheduler runs.

Tiles (R x C array): a layer's K is cut into k-tiles of R rows and its N into n-tiles of C
columns (``kt``, ``nt``; the edges are zero-padded). Tile (kt, nt) of the weights is an R x C
block; a MATMUL takes a new tile from the weight FIFO (NEW_TILE; only the ramps' pieces reuse
one: ``schedule``) and runs rows of one m-block of A (one k-tile wide) through it into
accumulator rows (ACCUMULATE for kt > 0).

Hidden layers: a layer of a chain whose output stays on chip writes part p of its n-tile nt
(lanes p*R .. p*R + R-1 of the C-lane result row, ``P = ceil(C/R)`` parts) into unified-buffer
rows that are the next layer's A k-tile ``nt*P + p``. The next layer's weights are re-laid to
match (``TiledLayer.padded``): its tile row r of k-tile nt*P + p is the hidden channel
nt*C + p*R + r, zero past C or the layer's K. So with R != C a hidden n-tile becomes P k-tiles
(with R > C a k-tile holds only C channels).

Requantization (int8 outputs) is TFLite's (``sim.requant.QuantParams``: per output channel
bias, multiplier and shift; per layer zero point and clamp). A layer's input zero point
``in_zp`` is folded into its bias, ``bias'[c] = bias[c] - in_zp * sum_k W[k, c]`` (mod 2**32;
``fold_input_zero_point``), so the array multiplies the raw int8 inputs. With
``acc_width >= 32`` this is TFLite's int32 arithmetic exactly (every sum taken mod 2**32);
narrower accumulators wrap earlier.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpugen.compiler.operands import ceil_div, operand_matrix, zero_point
from tpugen.hdl.checks import check_instance
from tpugen.hdl.config import Config
from tpugen.sim.requant import QuantParams

__all__ = ["ChainLayer", "LayerSpec", "TiledLayer", "fold_input_zero_point", "layer_specs",
           "stage_dims", "tiled_layers"]


@dataclass(frozen=True, eq=False)
class ChainLayer:
    """One GEMM layer: ``y = requantize((x - in_zp) @ weights, params)`` (int8), or, for the
    last layer of a chain only, the ``acc_width``-wrapped sums ``x @ weights`` when ``params``
    is ``None`` (then ``in_zp`` must be 0 or ``None``).

    ``weights``: K x N int8 values (an integer array). ``params``: ``QuantParams``, per tensor
    or N channels. ``in_zp``: the input zero point (-128..127); ``None`` means the previous
    layer's ``params.out_zp`` (for the first layer: ``compile_chain``'s ``in_zp``). The TFLite
    importer's layers are of this type (``tpugen.tflite.lowering.GemmLayer`` is another name
    for it). ``TypeError`` / ``ValueError`` name the field and its value.

    ``compile_chain`` also takes tuples ``(weights, params)`` / ``(weights, params, in_zp)``
    and objects with ``weights``, ``params`` and ``in_zp`` attributes.
    """

    weights: np.ndarray
    params: QuantParams | None = None
    in_zp: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "weights", np.asarray(self.weights))
        _check_fields("", self.weights, self.params, self.in_zp, last=True)
        if self.in_zp is not None:
            object.__setattr__(self, "in_zp", zero_point("in_zp", self.in_zp))


def _check_fields(prefix: str, weights, params, in_zp, last: bool) -> np.ndarray:
    """A layer's fields checked (``prefix`` names the layer in messages; ``last``: it may give
    int32 sums); its weights as an int64 matrix."""
    W = operand_matrix(f"{prefix}weights", weights)
    if params is None and not last:
        raise ValueError(f"{prefix}params must be QuantParams: only the last layer may give "
                         f"int32 sums (params=None)")
    if params is not None:
        check_instance(f"{prefix}params", params, QuantParams, "QuantParams or None")
        if params.channels not in (None, W.shape[1]):
            raise ValueError(f"{prefix}params has {params.channels} channels, but its weights "
                             f"have {W.shape[1]} columns")
    if params is None and in_zp is not None and zero_point(f"{prefix}in_zp", in_zp) != 0:
        raise ValueError(f"{prefix}in_zp must be 0 for int32 sums (params=None), not {in_zp}")
    return W


def fold_input_zero_point(quant: QuantParams, W: np.ndarray, in_zp: int) -> QuantParams:
    """``quant`` with the input zero point folded into the bias: ``bias - in_zp * colsum(W)``
    (mod 2**32), one bias per column of ``W`` (K x N)."""
    n = W.shape[1]
    bias, mult, shift = quant.per_channel(n)
    folded = bias - in_zp * W.astype(np.int64).sum(axis=0)
    folded = ((folded + (1 << 31)) % (1 << 32)) - (1 << 31)
    return QuantParams(bias=folded, multiplier=mult, shift=shift, out_zp=quant.out_zp,
                       act_min=quant.act_min, act_max=quant.act_max)


@dataclass
class LayerSpec:
    """A checked layer: int64 weights, the original parameters and the input zero point."""

    W: np.ndarray
    params: QuantParams | None
    in_zp: int

    @property
    def folded(self) -> QuantParams | None:
        """The parameters with ``in_zp`` folded into the bias (``None`` for int32 sums)."""
        return None if self.params is None else fold_input_zero_point(self.params, self.W,
                                                                      self.in_zp)


def _layer_fields(name: str, layer) -> tuple:
    """``(weights, params, in_zp)`` of one of the forms ``ChainLayer`` names."""
    if isinstance(layer, tuple):
        if len(layer) not in (2, 3):
            raise ValueError(f"{name} must be (weights, params) or (weights, params, in_zp), "
                             f"not a tuple of {len(layer)}")
        return layer if len(layer) == 3 else (*layer, None)
    if not all(hasattr(layer, a) for a in ("weights", "params", "in_zp")):
        raise TypeError(f"{name} must be a ChainLayer, a (weights, params[, in_zp]) tuple or "
                        f"have weights, params and in_zp, not {layer!r}")
    return layer.weights, layer.params, layer.in_zp


def layer_specs(layers, in_zp) -> list[LayerSpec]:
    """``layers`` checked (``ChainLayer`` says what they may be); ``in_zp``: the first layer's
    input zero point when it does not give its own."""
    if not isinstance(layers, list | tuple):
        raise TypeError(f"layers must be a list of layers, not {layers!r}")
    layers = list(layers)
    if not layers:
        raise ValueError("layers must hold at least one layer, not none")
    in_zp = zero_point("in_zp", in_zp)
    out: list[LayerSpec] = []
    for i, layer in enumerate(layers):
        name = f"layers[{i}]"
        weights, params, zp = _layer_fields(name, layer)
        W = _check_fields(f"{name}.", weights, params, zp, last=i == len(layers) - 1)
        if zp is None:
            zp = 0 if params is None else (in_zp if i == 0 else out[-1].params.out_zp)
        zp = zero_point(f"{name}.in_zp", zp)
        if out and out[-1].W.shape[1] != W.shape[0]:
            raise ValueError(f"layers[{i - 1}] gives {out[-1].W.shape[1]} columns but "
                             f"{name}.weights has {W.shape[0]} rows")
        out.append(LayerSpec(W, params, zp))
    return out


@dataclass(eq=False)
class TiledLayer:
    """A layer as the scheduler sees it: tiles, padded (re-laid) weights, folded parameters.

    ``out``: "int32" / "fp32" / "int8" (to the host) / "ub" (kept on chip for the next layer).
    ``prev_nt``: ``None`` when the input comes from the host, else the previous layer's n-tile
    count (the input is its on-chip activations, re-laid: module docstring).
    """

    W: np.ndarray
    quant: QuantParams | None
    out: str
    kt: int
    nt: int
    prev_nt: int | None

    def padded(self, config: Config) -> np.ndarray:
        """The weights as ``kt * R`` x ``nt * C``: row ``kt*R + r`` feeds UB lane r of k-tile
        kt (zero where no input channel sits there)."""
        R, C = config.rows, config.cols
        K, N = self.W.shape
        rows = np.arange(self.kt * R)
        if self.prev_nt is None:
            src = np.where(rows < K, rows, -1)
        else:
            P = ceil_div(C, R)
            t, r = rows // R, rows % R
            lane = (t % P) * R + r
            ch = (t // P) * C + lane
            src = np.where((lane < C) & (ch < K), ch, -1)
        out = np.zeros((self.kt * R, self.nt * C), dtype=np.int64)
        ok = src >= 0
        out[ok, :N] = self.W[src[ok]]
        return out

    def tile_quant(self, nt: int, config: Config) -> QuantParams:
        """The parameters of n-tile ``nt``: channels nt*C .. nt*C + C - 1 (0 past N)."""
        C = config.cols
        N = self.W.shape[1]
        arrays = []
        for a in self.quant.per_channel(N):
            t = np.zeros(C, dtype=np.int64)
            part = a[nt * C:(nt + 1) * C]
            t[:len(part)] = part
            arrays.append(t)
        q = self.quant
        return QuantParams(bias=arrays[0], multiplier=arrays[1], shift=arrays[2],
                           out_zp=q.out_zp, act_min=q.act_min, act_max=q.act_max)


def stage_dims(config: Config, specs: list[LayerSpec]) -> list[tuple[int, int, bool]]:
    """(kt, nt, on-chip input) of each layer of one stage (the first takes the host's)."""
    R, C = config.rows, config.cols
    P = ceil_div(C, R)
    out: list[tuple[int, int, bool]] = []
    for i, s in enumerate(specs):
        K, N = s.W.shape
        kt = ceil_div(K, R) if i == 0 else out[-1][1] * P
        out.append((kt, ceil_div(N, C), i > 0))
    return out


def tiled_layers(config: Config, specs: list[LayerSpec], last_out: str) -> list[TiledLayer]:
    """The scheduler's layers of one stage; ``last_out``: the last one's output kind."""
    dims = stage_dims(config, specs)
    layers = []
    for i, (s, (kt, nt, _)) in enumerate(zip(specs, dims, strict=True)):
        out = last_out if i == len(specs) - 1 else "ub"
        layers.append(TiledLayer(s.W, s.folded, out, kt, nt, dims[i - 1][1] if i else None))
    return layers
