"""Host ops that move int8 values without arithmetic: PAD and PADV2 (filled with the zero
point, or PADV2's constant), TRANSPOSE and CONCATENATION (inputs and output quantized
alike); ``SHAPE_OPS`` maps each name to its handler (``host_op``). A PAD before a VALID
convolution usually never runs here: the model folds it into the convolution's padding
(``folding.pads_to_fold``)."""

import numpy as np

from tpugen.tflite.host_op import HostOp
from tpugen.tflite.kernels_math import pad
from tpugen.tflite.lowering import activation_name

__all__ = ["SHAPE_OPS", "pad_amounts"]


def pad_amounts(h: HostOp) -> list:
    """PAD's constant ``(before, after)`` per axis of the input, checked."""
    pads = h.const(h.op.inputs[1], "padding").astype(int)
    h.need(pads.shape == (len(h.shape), 2),
           f"paddings of shape {pads.shape} do not fit an input of rank {len(h.shape)}")
    h.need((pads >= 0).all(), "negative padding")
    return pads.tolist()


def _pad(h: HostOp):
    x, y, x_t = h.x, h.y, h.x_t
    h.int8(x, "input")
    h.int8(y, "output")
    h.same_quantization(x, y, "input and output")
    pads = pad_amounts(h)
    value = y.zero_point
    if h.op.name == "PADV2" and len(h.op.inputs) > 2 and h.op.inputs[2] >= 0:
        value = int(h.const(h.op.inputs[2], "pad value").ravel()[0])
    out_shape = h.output_shape(tuple(s + a + b for s, (a, b) in zip(h.shape, pads,
                                                                    strict=True)))
    return lambda v: pad(v(x_t).reshape((-1,) + h.shape), [(0, 0)] + pads,
                         value).reshape((-1,) + out_shape)


def _transpose(h: HostOp):
    x, y, x_t, shape = h.x, h.y, h.x_t, h.shape
    h.need(x.type_name == y.type_name, "input and output types differ")
    if x.quantized or y.quantized:
        h.same_quantization(x, y, "input and output")
    perm = [int(p) % len(shape) for p in h.const(h.op.inputs[1], "permutation").ravel()]
    h.need(sorted(perm) == list(range(len(shape))),
           f"{perm} is no permutation of {len(shape)} axes")
    out_shape = h.output_shape(tuple(shape[p] for p in perm))
    axes = (0,) + tuple(p + 1 for p in perm)
    return lambda v: np.transpose(v(x_t).reshape((-1,) + shape), axes).reshape(
        (-1,) + out_shape)


def _concatenation(h: HostOp):
    op, y, model = h.op, h.y, h.model
    h.need(op.options is not None, "no options")
    h.need(activation_name(op, op.options) == "NONE", "a fused activation is not supported")
    ins = list(op.inputs)
    infos = [model.graph.tensors[t] for t in ins]
    shapes = [model._shape(op, t) for t in ins]
    for i, info in enumerate(infos):
        h.need(info.type_name == y.type_name, f"input {i} is {info.type_name}, the output "
                                              f"{y.type_name}")
        if info.quantized or y.quantized:
            h.same_quantization(info, y, f"input {i} and the output")
    rank = len(shapes[0])
    axis = int(op.options.Axis())
    h.need(-rank <= axis < rank, f"axis {axis} out of range for rank {rank}")
    axis %= rank
    for s in shapes:
        h.need(len(s) == rank and all(a == b for i, (a, b) in enumerate(zip(s, shapes[0],
                                                                            strict=True))
                                      if i != axis), f"shapes {shapes} do not concatenate")
    out_shape = h.output_shape(shapes[0][:axis] + (sum(s[axis] for s in shapes),)
                               + shapes[0][axis + 1:])

    def run(v):
        values = [v(t) for t in ins]
        samples = max(val.shape[0] if info.data is None else 1
                      for val, info in zip(values, infos, strict=True))
        parts = [np.broadcast_to(val, (samples,) + s) if info.data is not None
                 else val.reshape((-1,) + s)
                 for val, info, s in zip(values, infos, shapes, strict=True)]
        return np.concatenate(parts, axis=axis + 1).reshape((samples,) + out_shape)
    return run


SHAPE_OPS = {
    "PAD": _pad,
    "PADV2": _pad,
    "TRANSPOSE": _transpose,
    "CONCATENATION": _concatenation,
}
