"""AVERAGE_POOL_2D lowered to a GEMM on the array: identity tiles and an exact average.

An int8 average pool whose every window has the same count of in-bounds values (VALID
padding, or SAME that pads nothing: the global pools that end the MLPerf Tiny models) is a
depthwise convolution with every weight 1 (a sum of each channel's taps) followed by TFLite's
rounded division by the count, which ``compiler.pool_quant.average_quant`` turns into one
requantization (bias 0, zero point 0; TFLite's pool keeps the input's quantization, so the
raw int8 values are summed). ``lower_average_pool`` returns that ``GemmOp`` (weights
``KH * KW * C`` x ``C`` block-diagonal, as ``lowering`` lowers a depthwise convolution), or the
reason the pool stays on the host: padding that changes the count at the edges, a fused
activation or a count the requantizer cannot divide by exactly.

The window walk (``Config.window``) runs such a pool on chip between convolutions
(``window_chains``); without it pools stay host ops.
"""

from __future__ import annotations

import numpy as np

from tpugen.compiler import ChainLayer
from tpugen.compiler.pool_quant import average_quant
from tpugen.tflite.geometry import Window
from tpugen.tflite.host_op import bounds
from tpugen.tflite.lowering import GemmOp, windows
from tpugen.tflite.reader import Graph, OpInfo

__all__ = ["lower_average_pool"]


def lower_average_pool(graph: Graph, op: OpInfo, in_shape: tuple) -> GemmOp | str:
    """The ``GemmOp`` of AVERAGE_POOL_2D ``op`` on an input of per-sample shape ``in_shape``
    (module docstring), or a one-line reason why it stays on the host."""
    if op.name != "AVERAGE_POOL_2D":
        raise ValueError(f"op must be AVERAGE_POOL_2D, not {op.name!r}")
    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    o = op.options
    if x.type_name != "INT8" or y.type_name != "INT8":
        return "not int8"
    if o is None or len(in_shape) != 4:
        return "no options or not NHWC"
    if x.scale != y.scale or x.zero_point != y.zero_point:
        return "input and output quantization differ"
    b, h, w, c = in_shape
    try:
        wy, wx = windows(op, o, h, w, o.FilterHeight(), o.FilterWidth(), dilated=False)
    except ValueError as e:
        return str(e)
    if wy.before or wy.after or wx.before or wx.after:
        return "SAME padding changes the count at the edges"
    # A window as large as its axis has one output whatever the stride: stride 1 (the walk's).
    wy, wx = (Window(a.size, a.k, 1, 1, "VALID") if a.k == a.size else a for a in (wy, wx))
    lo, hi = bounds(op, o, y)
    count = wy.k * wx.k
    if count > 1 << 16:
        return f"a window of {count} values"
    params = average_quant(count, lo, hi)
    if params is None:
        return f"no exact multiplier divides by {count}"
    weights = np.zeros((count, c, c), np.int8)
    weights[:, np.arange(c), np.arange(c)] = 1
    # The raw values are summed: input zero point 0 (nothing folded into the bias); VALID
    # windows read no padding.
    layer = ChainLayer(weights.reshape(count * c, c), params, 0)
    return GemmOp(op, layer, op.inputs[0], op.outputs[0], tuple(in_shape),
                  (b, wy.out, wx.out, c), direct=False, wy=wy, wx=wx, macs_per_row=count * c)
