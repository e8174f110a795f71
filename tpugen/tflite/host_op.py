"""What a host op's handler gets while a model is planned (``HostOp``), and the checks the
handlers share. A handler (``host_ops_*.py``) takes a ``HostOp``, records the op's output
shape, refuses (``UnsupportedModel``) what it cannot run exactly, and returns a callable
computing the op's output from ``value(t)`` (every value with a leading axis of samples).
"""

from dataclasses import dataclass

import numpy as np

from tpugen.sim.requant import activation_bounds
from tpugen.tflite.lowering import activation_name
from tpugen.tflite.reader import OpInfo, TensorInfo
from tpugen.tflite.unsupported import UnsupportedModel

__all__ = ["HostOp", "bounds"]


@dataclass(eq=False)
class HostOp:
    """What a host op's handler (``HOST_OPS``) gets: the ``model`` being planned, the ``op``,
    its first input (tensor ``x_t``, ``x``) and its output ``y`` (``TensorInfo``), and the
    input's ``shape``."""

    model: object        # the TFLiteModel being planned
    op: OpInfo
    x_t: int
    x: TensorInfo
    y: TensorInfo
    shape: tuple

    def need(self, cond, what: str) -> None:
        if not cond:
            raise UnsupportedModel(f"op {self.op.index} {self.op.name}: {what}")

    def int8(self, info: TensorInfo, role: str) -> None:
        self.need(info.type_name == "INT8" and info.quantized and len(info.scales) == 1,
                  f"the {role} must be a per-tensor quantized int8 tensor, not "
                  f"{info.type_name}")

    def const(self, t: int, what: str) -> np.ndarray:
        """The constant value of input tensor ``t`` (refused when it is none)."""
        data = None if t < 0 else self.model.graph.tensors[t].data
        self.need(data is not None, f"the {what} must be a constant")
        return data

    def same_quantization(self, a: TensorInfo, b: TensorInfo, what: str) -> None:
        self.need(np.float32(a.scale) == np.float32(b.scale) and a.zero_point == b.zero_point,
                  f"{what} must have the same quantization")

    def output_shape(self, shape: tuple) -> tuple:
        """Record the op's output shape; returns it."""
        self.model.shapes[self.op.outputs[0]] = shape
        return shape


    def int8_binary(self) -> tuple[int, TensorInfo, int, int]:
        """An elementwise int8 op of two inputs (ADD, MUL, SUB): both inputs and the output
        int8, the shapes broadcast (the output's shape set); returns the second input's tensor
        index and info and the output clamp ``(lo, hi)``."""
        op, y = self.op, self.y
        b_t = op.inputs[1]
        b = self.model.graph.tensors[b_t]
        self.int8(self.x, "first input")
        self.int8(b, "second input")
        self.int8(y, "output")
        b_shape = self.model._shape(op, b_t)
        try:
            self.output_shape(tuple(np.broadcast_shapes(self.shape, b_shape)))
        except ValueError:
            self.need(False, f"shapes {self.shape} and {b_shape} do not broadcast")
        lo, hi = bounds(op, op.options, y)
        return b_t, b, lo, hi


def bounds(op: OpInfo, options, y_info) -> tuple[int, int]:
    """The clamp of a host op's fused activation (TFLite's activation range)."""
    return activation_bounds(activation_name(op, options), y_info.scale, y_info.zero_point)
