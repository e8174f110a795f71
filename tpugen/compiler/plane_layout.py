"""The planes of a convolution chain (``planes`` module docstring): the layer type, the
tensors as planes, the walks of each convolution and the unified-buffer layout."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpugen.compiler.layers import ChainLayer
from tpugen.compiler.operands import ceil_div
from tpugen.compiler.plan import MATMUL_GAP, MAX_ROWS
from tpugen.hdl import isa
from tpugen.hdl.checks import check_instance, check_int
from tpugen.hdl.config import Config
from tpugen.sim.requant import QuantParams

__all__ = ["MAX_SIDE", "MAX_STRIDE", "ConvLayer", "PlaneMisfit", "PlaneTensor", "ConvPlan",
           "PlaneLayout", "walk_band", "walks", "check_layers", "plane_tensors", "conv_plans"]

MAX_SIDE = 255         # the SHAPE register's in_w / in_h / out_w
MAX_STRIDE = 15
#: Rows of each of the two staging buffers of a convolution's output to the host.
STAGE = 32


class PlaneMisfit(ValueError):
    """The chain does not fit the window walk's planes (the message says why)."""


@dataclass(frozen=True, eq=False)
class ConvLayer:
    """``y = requantize(conv(x - in_zp, weights), params)``: ``weights`` KH x KW x Cin x Cout
    int8, ``stride``, ``dilation`` ``(dy, dx)``, ``padding`` ``(top, left)`` (the input zero
    point fills it; the output size ``out_hw`` ``(OH, OW)`` says how much comes after)."""

    weights: np.ndarray
    params: QuantParams
    in_zp: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]
    out_hw: tuple[int, int]

    def __post_init__(self):
        w = np.asarray(self.weights)
        if w.ndim != 4 or w.dtype.kind not in "iu" or w.size == 0:
            raise ValueError(f"weights must be a KH x KW x Cin x Cout integer array, not "
                             f"{w.dtype} {w.shape}")
        object.__setattr__(self, "weights", w.astype(np.int64))
        check_instance("params", self.params, QuantParams, "QuantParams")
        check_int("in_zp", self.in_zp, -128, 127)
        for name in ("stride", "dilation", "padding", "out_hw"):
            v = getattr(self, name)
            lo = 0 if name == "padding" else 1
            if not (isinstance(v, tuple) and len(v) == 2 and all(
                    isinstance(i, int) and not isinstance(i, bool) and i >= lo for i in v)):
                raise ValueError(f"{name} must be a pair of integers >= {lo}, not {v!r}")


@dataclass
class PlaneTensor:
    """A spatial tensor as planes: ``h`` x ``w``, ``chan[t, r]`` (-1: no channel)."""

    h: int
    w: int
    chan: np.ndarray

    @property
    def planes(self) -> int:
        return len(self.chan)

    @property
    def hw(self) -> int:
        return self.h * self.w


def walk_band(conv: ConvLayer, src: PlaneTensor, oy0: int, oy1: int) -> tuple[int, int]:
    """The input rows ``b0..b1`` output rows ``oy0..oy1`` read, clipped to the image."""
    s, dy, top = conv.stride[0], conv.dilation[0], conv.padding[0]
    kh = conv.weights.shape[0]
    lo, hi = oy0 * s - top, oy1 * s - top + (kh - 1) * dy
    b0 = min(max(lo, 0), src.h - 1)
    b1 = max(min(hi, src.h - 1), b0)
    return b0, b1


@dataclass
class ConvPlan:
    """One convolution's walks: ``px`` output pixels each (the last one fewer)."""

    px: int


def walks(conv: ConvLayer, px: int) -> list[tuple[int, int, int, int]]:
    """The walks of ``px`` output pixels (any pixel boundary): ``(p0, n, oy0, oy1)``, the
    first pixel, the count, the first and last output rows."""
    oh, ow = conv.out_hw
    total = oh * ow
    return [(p0, min(px, total - p0), p0 // ow, (min(px, total - p0) + p0 - 1) // ow)
            for p0 in range(0, total, px)]


def _walk_sizes(conv: ConvLayer, most: int) -> list[int]:
    """Walk sizes worth trying, largest first: whole output rows, balanced splits, ``most``."""
    oh, ow = conv.out_hw
    total = oh * ow
    sizes = {most} | {r * ow for r in range(1, oh + 1) if r * ow <= most}
    sizes |= {ceil_div(total, k) for k in range(1, 257) if ceil_div(total, k) <= most}
    return sorted(sizes, reverse=True)


def _bands(conv: ConvLayer, src, px: int) -> list[int]:
    """The input rows each walk of ``px`` pixels reads."""
    return [b1 - b0 + 1 for b0, b1 in (walk_band(conv, src, oy0, oy1)
                                       for _, _, oy0, oy1 in walks(conv, px))]


class PlaneLayout:
    """The unified-buffer rows of a chain (module docstring), checked against the buffer."""

    def __init__(self, config: Config, B: int, tensors: list[PlaneTensor], convs, tail, mb,
                 band_rows: int, nbuf: int, out_px: int):
        self.config = config
        k = len(convs)
        at = 0
        self.base: dict = {}
        # Intermediate tensors 1..k-1 in two areas (a layer reads one, writes the other).
        areas = [max((tensors[i].hw * tensors[i].planes for i in range(1, k) if i % 2 == a),
                     default=0) for a in (0, 1)]
        area_base = [at, at + areas[0]]
        at += areas[0] + areas[1]
        for i in range(1, k):
            self.base[i] = area_base[i % 2]
        self.band = [at + i * band_rows for i in range(nbuf)]
        at += nbuf * band_rows
        last = tensors[k]
        self.base[k] = at
        # To the host: two walks' output rows in turn; else every image's planes.
        # To the host: two staging buffers of ``stage`` rows; else every image's planes.
        self.out_stage = min(out_px, STAGE)
        at += last.hw * last.planes * B if tail else 2 * self.out_stage
        self.tail = []
        for kt in tail[1:]:
            self.tail.append(at)
            at += kt * mb
        self.stage = at
        at += mb if tail else 0
        self.used = at
        if at > config.ub_rows:
            raise PlaneMisfit(f"the planes need {at} unified-buffer rows, there are "
                              f"{config.ub_rows}")


def _out_tensor(config: Config, conv: ConvLayer) -> PlaneTensor:
    R, C = config.rows, config.cols
    P = ceil_div(C, R)
    cout = conv.weights.shape[3]
    nt = ceil_div(cout, C)
    t = np.arange(nt * P)[:, None]
    r = np.arange(R)[None, :]
    lane = (t % P) * R + r
    ch = (t // P) * C + lane
    chan = np.where((lane < C) & (ch < cout), ch, -1)
    return PlaneTensor(conv.out_hw[0], conv.out_hw[1], chan)


def check_layers(config: Config, x: np.ndarray, layers) -> tuple[list, list]:
    if not isinstance(layers, list | tuple) or not layers:
        raise ValueError(f"layers must be a non-empty list of layers, not {layers!r}")
    convs, fcs = [], []
    for i, layer in enumerate(layers):
        if isinstance(layer, ConvLayer):
            if fcs:
                raise ValueError(f"layers[{i}] is a ConvLayer after a fully connected layer")
            convs.append(layer)
        elif isinstance(layer, ChainLayer):
            if layer.params is None:
                raise ValueError(f"layers[{i}] must have params (int8 outputs)")
            fcs.append(layer)
        else:
            raise TypeError(f"layers[{i}] must be a ConvLayer or a ChainLayer, not {layer!r}")
    if not convs:
        raise ValueError("layers must start with a ConvLayer")
    if x.ndim != 4:
        raise ValueError(f"x must be B x H x W x Cin, not shape {x.shape}")
    return convs, fcs


def plane_tensors(config: Config, x: np.ndarray, convs: list, fcs: list) -> list[PlaneTensor]:
    """The spatial tensors (the input, each convolution's output), checked."""
    R = config.rows
    _, h, w, cin = x.shape
    t = np.arange(ceil_div(cin, R))[:, None] * R + np.arange(R)[None, :]
    out = [PlaneTensor(h, w, np.where(t < cin, t, -1))]
    for i, conv in enumerate(convs):
        kh, kw, ci, _ = conv.weights.shape
        have = int(out[-1].chan.max()) + 1
        if ci != have:
            raise ValueError(f"layer {i} takes {ci} channels, its input has {have}")
        if conv.stride[0] != conv.stride[1] or conv.stride[0] > MAX_STRIDE:
            raise PlaneMisfit(f"layer {i}: stride {conv.stride} (the walk takes one stride "
                              f"of at most {MAX_STRIDE})")
        src = out[-1]
        if src.w > MAX_SIDE or conv.out_hw[1] > MAX_SIDE:
            raise PlaneMisfit(f"layer {i}: a plane {src.w} wide or an output {conv.out_hw[1]} "
                              f"wide (the walk takes at most {MAX_SIDE})")
        out.append(_out_tensor(config, conv))
    k = None
    for i, fc in enumerate(fcs):
        K = fc.weights.shape[0]
        want = out[-1].hw * (int(out[-1].chan.max()) + 1) if i == 0 else k
        if K != want:
            raise ValueError(f"fully connected layer {i} has {K} inputs, not {want}")
        k = fc.weights.shape[1]
    return out


def conv_plans(config: Config, B: int, tensors, convs, fcs, mb: int):
    """The walks of each convolution, the layout and the first layer's estimated cost per
    image: the walks of the first layer whose bands fit at the lowest cost (the larger of its
    host-in beats, bands with their halos and each walk's weights, and its MATMUL cycles;
    then the fewer beats; two band buffers on a tie), the longest walks of the others."""
    half = config.acc_rows // 2
    plans, sizes = [], []
    for i, conv in enumerate(convs):
        nts = ceil_div(conv.weights.shape[3], config.cols)
        oh, ow = conv.out_hw
        most = min(oh * ow, half // nts, MAX_ROWS)
        if most < 1:
            raise PlaneMisfit(f"layer {i}: {nts} n-tiles do not fit half the accumulators "
                              f"({half} rows)")
        sizes.append(_walk_sizes(conv, most))
        plans.append(ConvPlan(most))
    tail = [0] + [ceil_div(fc.weights.shape[1], config.cols) * ceil_div(
        config.cols, config.rows) for fc in fcs[:-1]]
    for i in range(1, len(convs)):
        fit = [px for px in sizes[i] if max(_bands(convs[i], tensors[i], px)) <= MAX_SIDE]
        if not fit:
            raise PlaneMisfit(f"layer {i}: no walk's band fits {MAX_SIDE} rows")
        plans[i].px = fit[0]
    src = tensors[0]
    kh, kw, _, cout = convs[0].weights.shape
    tiles = kh * kw * src.planes * ceil_div(cout, config.cols)
    best = None
    # The last layer's output to the host goes through two walks' rows: shorter walks of it
    # when nothing fits with the longest.
    lasts = [plans[-1].px]
    if len(convs) > 1 and not fcs:
        lasts += sorted({plans[-1].px >> i for i in range(1, 12)} - {0}, reverse=True)
    for last in lasts:
        for nbuf in (2, 1):
            for px in sizes[0]:
                bands = _bands(convs[0], src, px)
                band = max(bands)
                if band > MAX_SIDE:
                    continue
                size = band * src.w * src.planes
                try:
                    out_px = px if len(convs) == 1 else last
                    layout = PlaneLayout(config, B, tensors, convs, tail if fcs else [], mb, size,
                                         nbuf, out_px)
                except PlaneMisfit:
                    continue
                layout.band_size = band * src.w
                if not _extents_fit(config, layout, tensors, convs, band * src.w):
                    continue
                # Per image: the host-in beats (the bands, halos again, and each walk's weights)
                # and the MATMUL cycles (a window MATMUL like a GEMM MATMUL of n rows), the
                # larger first (they overlap).
                beats = sum(bands) * src.w * src.planes + len(bands) * tiles * config.rows
                cycles = sum(tiles * max(n + MATMUL_GAP, config.rows)
                             for _, n, _, _ in walks(convs[0], px))
                cost = (max(beats, cycles), beats)
                if best is None or cost < best[0]:
                    best = (cost, px, layout)
        if best is not None:
            if len(convs) > 1:
                plans[-1].px = last
            break
    if best is None:
        raise PlaneMisfit(f"the planes do not fit {config.ub_rows} unified-buffer rows "
                          f"(first layer's input {src.h} x {src.w} in {src.planes} plane(s))")
    plans[0].px = best[1]
    return plans, best[2], best[0][0]


def _extents_fit(config: Config, layout: PlaneLayout, tensors, convs, band: int) -> bool:
    """Whether every window MATMUL's extent stays in the unified buffer."""
    def end(base, rows):        # a sub-plane's extent may end a block past its plane's rows
        return base + rows + isa.WINDOW_BLOCK - 1
    ok = all(end(b + t * layout.band_size, band) <= config.ub_rows
             for b in layout.band for t in range(tensors[0].planes))
    for i in range(1, len(convs)):
        ok &= all(end(layout.base[i] + t * tensors[i].hw, tensors[i].hw) <= config.ub_rows
                  for t in range(tensors[i].planes))
    return ok
