"""Host ops with arithmetic of their own: MEAN, LOGISTIC, TANH, MUL and SUB (``kernels_math``);
``MATH_OPS`` maps each name to its handler (``host_op``)."""


from tpugen.tflite.host_op import HostOp
from tpugen.tflite.kernels_math import logistic, mean, mul, sigmoid_params, sub, tanh

__all__ = ["MATH_OPS"]


def _mean(h: HostOp):
    op, x, y, shape, x_t = h.op, h.x, h.y, h.shape, h.x_t
    h.int8(x, "input")
    h.int8(y, "output")
    axes = h.const(op.inputs[1], "axis").ravel().astype(int).tolist()
    rank = len(shape)
    h.need(all(-rank <= a < rank for a in axes), f"axes {axes} out of range for {shape}")
    axes = sorted({a % rank for a in axes})
    keep = bool(op.options.KeepDims()) if op.options is not None else False
    out = tuple(1 if i in axes else s for i, s in enumerate(shape)) if keep else \
        tuple(s for i, s in enumerate(shape) if i not in axes)
    out_shape = h.output_shape(out)
    value_axes = [a + 1 for a in axes]

    def run(v):
        xv = v(x_t).reshape((-1,) + shape)
        yv = mean(xv, value_axes, x.scale, x.zero_point, y.scale, y.zero_point, keep)
        return yv.reshape((xv.shape[0],) + out_shape)
    return run


def _sigmoid(h: HostOp):
    x, y, x_t = h.x, h.y, h.x_t
    h.int8(x, "input")
    h.int8(y, "output")
    if h.op.name == "LOGISTIC":
        h.need(y.zero_point == -128, f"the output zero point must be -128, not {y.zero_point}")
        fn = logistic
    else:
        fn = tanh
    h.need(sigmoid_params(x.scale)[1] >= 0,
           f"the input scale {x.scale!r} is too small (below 2**-28)")
    h.output_shape(h.shape)
    return lambda v: fn(v(x_t), x.scale, x.zero_point)


def _binary(h: HostOp):
    op, x, y, x_t = h.op, h.x, h.y, h.x_t
    b_t, b, lo, hi = h.int8_binary()
    fn = mul if op.name == "MUL" else sub
    return lambda v: fn(v(x_t), v(b_t), (x.scale, x.zero_point), (b.scale, b.zero_point),
                        (y.scale, y.zero_point), lo, hi)


MATH_OPS = {
    "MEAN": _mean,
    "LOGISTIC": _sigmoid,
    "TANH": _sigmoid,
    "MUL": _binary,
    "SUB": _binary,
}
