"""What the importer does at load time instead of at run time.

- **Constant folding** (``FOLDABLE``): SHAPE of a tensor whose shape is known, and
  STRIDED_SLICE, PACK and GATHER whose inputs are all constants, are computed once while the
  model is planned; their outputs become constants. Keras writes ``reshape`` as SHAPE ->
  STRIDED_SLICE -> PACK -> RESHAPE (the batch size read at run time); folded, it is a plain
  RESHAPE. Values follow TFLite's kernels (``reference_ops::StridedSlice``, ``Pack``,
  ``Gather``); the per-sample shape is what TFLite Micro sees too (batch 1).
- **PAD folded into a convolution** (``pads_to_fold``): an int8 PAD pads with its zero point,
  which is the convolution's input zero point, and im2col pads with that same value; so a
  PAD whose only reader is a VALID CONV_2D or DEPTHWISE_CONV_2D, padding only the spatial
  axes, becomes that convolution's own padding (exact, and the padded tensor is never made).
"""

import numpy as np

from tpugen.tflite.lowering import padding_name
from tpugen.tflite.reader import Graph, OpInfo
from tpugen.tflite.unsupported import UnsupportedModel

__all__ = ["FOLDABLE", "foldable", "fold", "pads_to_fold"]

#: The ops folded when their inputs are constants (SHAPE: when its input's shape is known).
FOLDABLE = ("SHAPE", "STRIDED_SLICE", "PACK", "GATHER")


def _need(op: OpInfo, cond, what: str) -> None:
    if not cond:
        raise UnsupportedModel(f"op {op.index} {op.name}: {what}")


def foldable(graph: Graph, op: OpInfo) -> bool:
    """Whether ``op`` (one of ``FOLDABLE``) can be computed at load time."""
    if op.name == "SHAPE":
        return True
    return all(t >= 0 and graph.tensors[t].data is not None for t in op.inputs)


def _strided_slice(graph: Graph, op: OpInfo) -> np.ndarray:
    x, begin, end, strides = (graph.tensors[t].data for t in op.inputs[:4])
    o = op.options
    masks = ((o.BeginMask(), o.EndMask(), o.EllipsisMask(), o.NewAxisMask(),
              o.ShrinkAxisMask()) if o is not None else (0, 0, 0, 0, 0))
    _need(op, not masks[2] and not masks[3], "ellipsis and new-axis masks are not supported")
    _need(op, o is None or not getattr(o, "Offset", lambda: False)(),
          "offset slices are not supported")
    _need(op, len(begin) == len(end) == len(strides) <= x.ndim,
          f"begin, end and strides must have one value per axis of {x.shape}")
    index = []
    for i in range(x.ndim):
        if i >= len(begin):
            index.append(slice(None))
            continue
        b, e, s = int(begin[i]), int(end[i]), int(strides[i])
        _need(op, s != 0, "stride 0")
        if masks[4] >> i & 1:
            _need(op, -x.shape[i] <= b < x.shape[i], f"index {b} out of range")
            index.append(b)
            continue
        index.append(slice(None if masks[0] >> i & 1 else b,
                           None if masks[1] >> i & 1 else e, s))
    return np.asarray(x[tuple(index)])


def _pack(graph: Graph, op: OpInfo) -> np.ndarray:
    values = [graph.tensors[t].data for t in op.inputs]
    axis = int(op.options.Axis()) if op.options is not None else 0
    _need(op, len({v.shape for v in values}) == 1, "the inputs' shapes differ")
    rank = values[0].ndim + 1
    _need(op, -rank <= axis < rank, f"axis {axis} out of range")
    return np.stack(values, axis=axis % rank)


def _gather(graph: Graph, op: OpInfo) -> np.ndarray:
    params, indices = (graph.tensors[t].data for t in op.inputs[:2])
    o = op.options
    axis = int(o.Axis()) if o is not None else 0
    _need(op, o is None or not o.BatchDims(), "batch_dims is not supported")
    _need(op, -params.ndim <= axis < params.ndim, f"axis {axis} out of range")
    axis %= params.ndim
    _need(op, ((indices >= 0) & (indices < params.shape[axis])).all(), "index out of range")
    return np.take(params, indices.astype(np.int64), axis=axis)


def fold(graph: Graph, op: OpInfo, shape_of) -> np.ndarray:
    """The value of ``op`` (``foldable``); ``shape_of(t)`` gives a tensor's known shape."""
    if op.name == "SHAPE":
        out = graph.tensors[op.outputs[0]]
        dtype = np.int64 if out.type_name == "INT64" else np.int32
        return np.asarray(shape_of(op.inputs[0]), dtype)
    value = {"STRIDED_SLICE": _strided_slice, "PACK": _pack, "GATHER": _gather}[op.name](
        graph, op)
    dtype = graph.tensors[op.outputs[0]].dtype
    return value.astype(dtype) if dtype is not None else value


def pads_to_fold(graph: Graph) -> dict:
    """The PAD ops to fold into the convolution reading them: ``{conv op index: (PAD op,
    ((top, bottom), (left, right)))}``."""
    readers = {}
    for op in graph.ops:
        for t in set(op.inputs):
            readers.setdefault(t, []).append(op)
    found = {}
    for op in graph.ops:
        if op.name != "PAD" or len(op.inputs) < 2:
            continue
        x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        pads = graph.tensors[op.inputs[1]].data
        users = readers.get(op.outputs[0], [])
        if (pads is None or pads.shape != (4, 2) or (pads < 0).any() or pads[0].any()
                or pads[3].any() or len(users) != 1 or op.outputs[0] in graph.outputs
                or x.type_name != "INT8" or y.type_name != "INT8" or not x.quantized
                or not y.quantized or x.zero_point != y.zero_point
                or np.float32(x.scale) != np.float32(y.scale)):
            continue
        conv = users[0]
        if (conv.name in ("CONV_2D", "DEPTHWISE_CONV_2D") and conv.inputs[0] == op.outputs[0]
                and conv.options is not None and padding_name(conv, conv.options) == "VALID"):
            found[conv.index] = (op, tuple(tuple(int(v) for v in pads[i]) for i in (1, 2)))
    return found
