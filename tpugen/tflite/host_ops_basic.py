"""The host ops tpugen has run from the start: QUANTIZE, DEQUANTIZE, RESHAPE, MAX_POOL_2D,
AVERAGE_POOL_2D, SOFTMAX and ADD (``kernels``, ``softmax``); ``BASIC_OPS`` maps each name to
its handler (``host_op``)."""

import numpy as np

from tpugen.tflite.host_op import HostOp, bounds
from tpugen.tflite.kernels import add, average_pool, dequantize, max_pool, quantize, requantize_int8
from tpugen.tflite.lowering import windows
from tpugen.tflite.softmax import SOFTMAX_OUT_SCALE, SOFTMAX_OUT_ZP, softmax

__all__ = ["BASIC_OPS"]


def _quantize(h: HostOp):
    x_t, x, y = h.x_t, h.x, h.y
    h.int8(y, "output")
    h.output_shape(h.shape)
    if x.type_name == "FLOAT32":
        return lambda v: quantize(v(x_t), y.scale, y.zero_point)
    h.int8(x, "input")
    return lambda v: requantize_int8(v(x_t), x.scale, x.zero_point, y.scale, y.zero_point)


def _dequantize(h: HostOp):
    x_t, x = h.x_t, h.x
    h.int8(x, "input")
    h.need(h.y.type_name == "FLOAT32", "the output must be float32")
    h.output_shape(h.shape)
    return lambda v: dequantize(v(x_t), x.scale, x.zero_point)


def _reshape(h: HostOp):
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


def _pool(h: HostOp):
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
    lo, hi = bounds(op, o, y)
    fn = max_pool if op.name == "MAX_POOL_2D" else average_pool

    def pool(v):
        xv = v(x_t)
        yv = fn(xv.reshape((-1,) + shape[1:]), wy, wx, lo, hi)
        return yv.reshape((xv.shape[0],) + out_shape)
    return pool


def _softmax(h: HostOp):
    op, x, y, x_t = h.op, h.x, h.y, h.x_t
    h.int8(x, "input")
    h.int8(y, "output")
    h.need(np.float32(y.scale) == np.float32(SOFTMAX_OUT_SCALE)
           and y.zero_point == SOFTMAX_OUT_ZP,
           "the output quantization must be scale 1/256, zero point -128")
    beta = float(op.options.Beta()) if op.options is not None else 1.0
    h.output_shape(h.shape)
    return lambda v: softmax(v(x_t), x.scale, beta)


def _add(h: HostOp):
    x, y, x_t = h.x, h.y, h.x_t
    b_t, b, lo, hi = h.int8_binary()
    return lambda v: add(v(x_t), v(b_t), (x.scale, x.zero_point), (b.scale, b.zero_point),
                         (y.scale, y.zero_point), lo, hi)


BASIC_OPS = {
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "RESHAPE": _reshape,
    "MAX_POOL_2D": _pool,
    "AVERAGE_POOL_2D": _pool,
    "SOFTMAX": _softmax,
    "ADD": _add,
}
