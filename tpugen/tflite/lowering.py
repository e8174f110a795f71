"""FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D lowered to accelerator GEMM layers.

``lower(graph, op)`` returns a ``GemmOp``: the ``ChainLayer`` (weights K x N int8, TFLite's
requantization parameters from the model's scales, the input zero point: what
``tpugen.chain.run_layers`` runs on the accelerator) and the host's two reshapes around it
(tensor -> M x K input matrix, M x N output -> tensor). Every value carries
one more leading axis than the model declares: the samples of a batch run, folded into M.

- FULLY_CONNECTED: weights (N, K); the input flattens to ``[prod / K, K]`` row-major (TFLite's
  rule for inputs that are not 2-D); output ``[prod / K, N]``, or the input's shape with the
  last axis N when ``keep_num_dims``.
- CONV_2D: input NHWC, weights (Cout, KH, KW, Cin); im2col on the host (patch rows in
  ``(ky, kx, cin)`` order, padding with the input zero point so that it adds nothing);
  ``K = KH * KW * Cin``, ``N = Cout``, ``M = B * OH * OW``.
- DEPTHWISE_CONV_2D: weights (1, KH, KW, Cout), ``Cout = Cin * multiplier``: the same
  patches against a block-diagonal K x Cout matrix (zero weights where an output channel does
  not read an input channel): exact, at the cost of ``Cin`` times the MACs.

Weights must be symmetric (zero point 0), per tensor or per output channel; bias int32 or
absent; activations int8; fused activation NONE, RELU, RELU6 or RELU_N1_TO_1; strides >= 1
(hand-built models may hold 0: refused).
"""

from dataclasses import dataclass

import numpy as np
import tflite

from tpugen.compiler import ChainLayer
from tpugen.sim.requant import ACTIVATIONS, QuantParams
from tpugen.tflite.geometry import Window, window
from tpugen.tflite.reader import Graph, OpInfo, TensorInfo
from tpugen.tflite.unsupported import UnsupportedModel

__all__ = ["GEMM_OPS", "GemmLayer", "GemmOp", "lower", "activation_name", "padding_name"]

GEMM_OPS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")
_ACT_NAMES = {v: k for k, v in vars(tflite.ActivationFunctionType).items()
              if not k.startswith("_")}


def activation_name(op: OpInfo, options) -> str:
    """The fused activation of ``op`` (one of ``ACTIVATIONS``), or refuse it."""
    code = options.FusedActivationFunction() if options is not None else 0
    name = _ACT_NAMES.get(code, str(code))
    if name not in ACTIVATIONS:
        raise UnsupportedModel(f"op {op.index} {op.name}: fused activation {name} is not "
                               f"supported (only {', '.join(ACTIVATIONS)})")
    return name


def padding_name(op: OpInfo, options) -> str:
    return "SAME" if options.Padding() == tflite.Padding.SAME else "VALID"


def windows(op: OpInfo, options, h: int, w: int, kh: int, kw: int, dilated=True):
    """The (y, x) ``Window`` pair of a conv or pool op, refusing stride 0."""
    sh, sw = options.StrideH(), options.StrideW()
    if sh < 1 or sw < 1:
        raise UnsupportedModel(f"op {op.index} {op.name}: stride must be at least 1, not "
                               f"{sh} x {sw} (hand-built models leave it 0)")
    dh, dw = (options.DilationHFactor(), options.DilationWFactor()) if dilated else (1, 1)
    if dh < 1 or dw < 1:
        raise UnsupportedModel(f"op {op.index} {op.name}: dilation must be at least 1, not "
                               f"{dh} x {dw}")
    pad = padding_name(op, options)
    try:
        return Window(h, kh, sh, dh, pad), Window(w, kw, sw, dw, pad)
    except ValueError as e:
        raise UnsupportedModel(f"op {op.index} {op.name}: {e}") from None


#: The importer's name for a layer: ``tpugen.compiler.ChainLayer`` (one type), ``y =
#: requantize((x - in_zp) @ weights, params)`` with K x N int8 ``weights``, their
#: ``QuantParams`` and the input zero point; ``lower`` always gives ``params`` and ``in_zp``.
GemmLayer = ChainLayer


@dataclass(frozen=True, eq=False)
class GemmOp:
    """A GEMM op of the model: ``layer`` (what the accelerator runs), ``in_tensor`` /
    ``out_tensor`` (indices), ``out_shape`` (per sample, computed), ``direct`` (the input
    matrix is the input tensor itself, ``x.reshape(-1, K)``: a chain can feed it from the
    previous layer's output on chip)."""

    op: OpInfo
    layer: ChainLayer
    in_tensor: int
    out_tensor: int
    in_shape: tuple
    out_shape: tuple
    direct: bool
    wy: Window | None = None
    wx: Window | None = None
    macs_per_row: int = 0

    @property
    def macs(self) -> int:
        """The op's own multiply-accumulates per sample (a depthwise convolution's taps, not
        its block-diagonal GEMM's ``K * N`` per row)."""
        rows = int(np.prod(self.out_shape[:-1]))
        return rows * self.macs_per_row

    @property
    def k(self) -> int:
        return self.layer.weights.shape[0]

    @property
    def n(self) -> int:
        return self.layer.weights.shape[1]

    def input_matrix(self, x: np.ndarray) -> np.ndarray:
        """The M x K int8 GEMM input of the input tensor ``x`` (samples first)."""
        if self.direct:
            return np.ascontiguousarray(x).reshape(-1, self.k)
        b = x.reshape((-1,) + self.in_shape[1:])
        patches = window(b, self.wy, self.wx, fill=self.layer.in_zp)
        return patches.reshape(-1, self.k).astype(np.int8)

    def output_tensor(self, y: np.ndarray, samples: int) -> np.ndarray:
        return y.reshape((samples,) + self.out_shape)


def _int8_activation(graph: Graph, op: OpInfo, index: int, what: str) -> TensorInfo:
    t = graph.tensors[index]
    if t.type_name != "INT8" or not t.quantized:
        raise UnsupportedModel(f"op {op.index} {op.name}: the {what} must be a quantized "
                               f"int8 tensor, not {t.type_name}")
    if len(t.scales) != 1:
        raise UnsupportedModel(f"op {op.index} {op.name}: the {what} must have one scale")
    if t.data is not None:
        raise UnsupportedModel(f"op {op.index} {op.name}: a constant {what} is not supported")
    return t


def _weights(graph: Graph, op: OpInfo, axis: int, n_axis_size: int) -> tuple[np.ndarray, object]:
    w = graph.tensors[op.inputs[1]]
    if w.type_name != "INT8" or w.data is None or not w.quantized:
        raise UnsupportedModel(f"op {op.index} {op.name}: the weights must be constant "
                               f"quantized int8, not {w.type_name}")
    if np.any(w.zero_points != 0):
        raise UnsupportedModel(f"op {op.index} {op.name}: weights must be symmetric "
                               "(zero point 0)")
    if len(w.scales) == 1:
        s_w = float(w.scales[0])
    elif len(w.scales) == n_axis_size and w.axis == axis:
        s_w = w.scales.astype(np.float64)
    else:
        raise UnsupportedModel(f"op {op.index} {op.name}: weight scales must be one or one "
                               f"per output channel (axis {axis}), not {len(w.scales)} along "
                               f"axis {w.axis}")
    return w.data.astype(np.int8), s_w


def _bias(graph: Graph, op: OpInfo, n: int) -> np.ndarray:
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        return np.zeros(n, np.int64)
    b = graph.tensors[op.inputs[2]]
    if b.type_name != "INT32" or b.data is None or b.data.size != n:
        raise UnsupportedModel(f"op {op.index} {op.name}: the bias must be {n} constant "
                               f"int32 values, not {b.type_name} {b.shape}")
    return b.data.reshape(n).astype(np.int64)


def _params(graph, op, x: TensorInfo, s_w, bias, options) -> tuple[QuantParams, TensorInfo]:
    y = _int8_activation(graph, op, op.outputs[0], "output")
    params = QuantParams.from_scales(x.scale, s_w, y.scale, bias=bias, out_zp=y.zero_point,
                                     activation=activation_name(op, options))
    return params, y


def _fully_connected(graph: Graph, op: OpInfo, in_shape: tuple) -> GemmOp:
    options = op.options
    x = _int8_activation(graph, op, op.inputs[0], "input")
    w, s_w = _weights(graph, op, 0, graph.tensors[op.inputs[1]].shape[0])
    if w.ndim != 2:
        raise UnsupportedModel(f"op {op.index} {op.name}: weights must be 2-D, not {w.shape}")
    n, k = w.shape
    size = int(np.prod(in_shape))
    if size % k:
        raise UnsupportedModel(f"op {op.index} {op.name}: an input of {size} values does not "
                               f"flatten to rows of {k}")
    keep = bool(options.KeepNumDims()) if options is not None else False
    if keep and in_shape[-1] != k:
        raise UnsupportedModel(f"op {op.index} {op.name}: keep_num_dims needs the last axis "
                               f"to be {k}, not {in_shape[-1]}")
    out_shape = in_shape[:-1] + (n,) if keep else (size // k, n)
    params, y = _params(graph, op, x, s_w, _bias(graph, op, n), options)
    layer = ChainLayer(np.ascontiguousarray(w.T), params, x.zero_point)
    return GemmOp(op, layer, op.inputs[0], op.outputs[0], in_shape, out_shape, direct=True,
                  macs_per_row=k * n)


def _conv(graph: Graph, op: OpInfo, in_shape: tuple, depthwise: bool, pads=None,
          in_tensor=None) -> GemmOp:
    options = op.options
    if options is None:
        raise UnsupportedModel(f"op {op.index} {op.name}: no options (stride 0)")
    x = _int8_activation(graph, op, op.inputs[0], "input")
    if len(in_shape) != 4:
        raise UnsupportedModel(f"op {op.index} {op.name}: the input must be NHWC, not "
                               f"{in_shape}")
    wt = graph.tensors[op.inputs[1]]
    if len(wt.shape) != 4:
        raise UnsupportedModel(f"op {op.index} {op.name}: weights must be 4-D, not {wt.shape}")
    cout = wt.shape[3] if depthwise else wt.shape[0]
    w, s_w = _weights(graph, op, 3 if depthwise else 0, cout)
    b, h, wd, cin = in_shape
    if depthwise:
        _, kh, kw, _ = w.shape
        if w.shape[0] != 1 or cout % cin:
            raise UnsupportedModel(f"op {op.index} {op.name}: weights {w.shape} do not fit "
                                   f"{cin} input channels")
        mult = cout // cin
        taps = w.reshape(kh * kw, cout)
        dense = np.zeros((kh * kw, cin, cout), np.int8)
        for c in range(cout):
            dense[:, c // mult, c] = taps[:, c]
        weights = dense.reshape(kh * kw * cin, cout)
    else:
        _, kh, kw, wcin = w.shape
        if wcin != cin:
            raise UnsupportedModel(f"op {op.index} {op.name}: weights for {wcin} input "
                                   f"channels, the input has {cin}")
        weights = np.ascontiguousarray(w.reshape(cout, -1).T)
    (pt, pb), (pl, pr) = pads or ((0, 0), (0, 0))
    wy, wx = windows(op, options, h + pt + pb, wd + pl + pr, kh, kw)
    if pads:                                    # a PAD folded in (``folding.pads_to_fold``)
        wy, wx = wy.unpadded(pt, pb), wx.unpadded(pl, pr)
    out_shape = (b, wy.out, wx.out, cout)
    params, y = _params(graph, op, x, s_w, _bias(graph, op, cout), options)
    direct = (kh == kw == 1 and wy.stride == wx.stride == 1 and wy.out == h and wx.out == wd
              and not wy.before + wy.after + wx.before + wx.after)
    layer = ChainLayer(weights, params, x.zero_point)
    return GemmOp(op, layer, op.inputs[0] if in_tensor is None else in_tensor, op.outputs[0],
                  in_shape, out_shape, direct=direct, wy=wy, wx=wx,
                  macs_per_row=kh * kw * (1 if depthwise else cin) * cout)


def lower(graph: Graph, op: OpInfo, in_shape: tuple, pad=None) -> GemmOp:
    """The ``GemmOp`` of ``op`` (one of ``GEMM_OPS``) whose input has the (computed)
    per-sample shape ``in_shape``. ``pad``: a PAD folded into a VALID convolution, ``(PAD
    input tensor, ((top, bottom), (left, right)))``: the convolution then reads that tensor
    (``in_shape`` is its shape) and pads it itself."""
    if op.name == "FULLY_CONNECTED":
        return _fully_connected(graph, op, tuple(in_shape))
    if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        in_tensor, pads = pad if pad is not None else (None, None)
        return _conv(graph, op, tuple(in_shape), op.name == "DEPTHWISE_CONV_2D", pads,
                     in_tensor)
    raise ValueError(f"op must be one of {', '.join(GEMM_OPS)}, not {op.name!r}")
