"""Single-layer int8 TFLite models for tests, written with the ``tflite-micro`` wheel's
``model_editor`` (no TensorFlow), and run with its interpreter (the external oracle,
``tpugen.tflite.oracle``)."""

import numpy as np
from tflite_micro.tensorflow.lite.micro.compression import model_editor as me
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as tfl

from tpugen.tflite.oracle import run_tflite_micro

__all__ = ["fully_connected", "conv2d", "run"]

_ACT = {"NONE": tfl.ActivationFunctionType.NONE, "RELU": tfl.ActivationFunctionType.RELU,
        "RELU6": tfl.ActivationFunctionType.RELU6,
        "RELU_N1_TO_1": tfl.ActivationFunctionType.RELU_N1_TO_1}


def _q(scales, zps, axis=None):
    return me.Quantization(scales, zps, axis=axis)


def _model(inputs, tensors, op):
    sg = me.Subgraph(tensors=tensors, operators=[op], inputs=inputs, outputs=[tensors[-1]])
    return bytes(me.Model(subgraphs=[sg]).build())


def fully_connected(w, bias, s_in, zp_in, s_w, s_out, zp_out, activation, m):
    """FULLY_CONNECTED: input (m, K) int8, weights (N, K) int8 (scales ``s_w``: one, or one
    per output channel), bias (N,) int32 or None."""
    n, k = w.shape
    per_channel = np.ndim(s_w) == 1
    s_w_list = [float(s) for s in np.atleast_1d(s_w)]
    x = me.Tensor(shape=(m, k), dtype=tfl.TensorType.INT8, quantization=_q(s_in, zp_in),
                  name="x")
    wt = me.Tensor(shape=(n, k), dtype=tfl.TensorType.INT8, data=np.asarray(w, np.int8),
                   quantization=_q(s_w_list, [0] * len(s_w_list), 0 if per_channel else None),
                   name="w")
    tensors = [x, wt]
    inputs = [x, wt]
    if bias is not None:
        bt = me.Tensor(shape=(n,), dtype=tfl.TensorType.INT32, data=np.asarray(bias, np.int32),
                       quantization=_q([s_in * s for s in s_w_list], [0] * len(s_w_list),
                                       0 if per_channel else None), name="b")
        tensors.append(bt)
        inputs.append(bt)
    else:
        inputs.append(None)
    y = me.Tensor(shape=(m, n), dtype=tfl.TensorType.INT8, quantization=_q(s_out, zp_out),
                  name="y")
    tensors.append(y)
    op = me.Operator(opcode=tfl.BuiltinOperator.FULLY_CONNECTED, inputs=inputs, outputs=[y])
    opt = tfl.FullyConnectedOptionsT()
    opt.fusedActivationFunction = _ACT[activation]
    op._fb.builtinOptionsType = tfl.BuiltinOptions.FullyConnectedOptions
    op._fb.builtinOptions = opt
    return _model([x], tensors, op)


def conv2d(w, bias, s_in, zp_in, s_w, s_out, zp_out, activation, in_shape, stride, padding):
    """CONV_2D: input NHWC ``in_shape`` int8, weights (Cout, KH, KW, Cin) int8 with one scale
    per output channel ``s_w``, bias (Cout,) int32; ``padding`` "SAME" or "VALID"."""
    cout = w.shape[0]
    nb, h, wd, _ = in_shape
    kh, kw = w.shape[1:3]
    if padding == "SAME":
        oh, ow = -(-h // stride), -(-wd // stride)
    else:
        oh, ow = (h - kh + stride) // stride, (wd - kw + stride) // stride
    s_w_list = [float(s) for s in s_w]
    x = me.Tensor(shape=tuple(in_shape), dtype=tfl.TensorType.INT8,
                  quantization=_q(s_in, zp_in), name="x")
    wt = me.Tensor(shape=w.shape, dtype=tfl.TensorType.INT8, data=np.asarray(w, np.int8),
                   quantization=_q(s_w_list, [0] * cout, 0), name="w")
    bt = me.Tensor(shape=(cout,), dtype=tfl.TensorType.INT32, data=np.asarray(bias, np.int32),
                   quantization=_q([s_in * s for s in s_w_list], [0] * cout, 0), name="b")
    y = me.Tensor(shape=(nb, oh, ow, cout), dtype=tfl.TensorType.INT8,
                  quantization=_q(s_out, zp_out), name="y")
    op = me.Operator(opcode=tfl.BuiltinOperator.CONV_2D, inputs=[x, wt, bt], outputs=[y])
    opt = tfl.Conv2DOptionsT()
    opt.padding = tfl.Padding.SAME if padding == "SAME" else tfl.Padding.VALID
    opt.strideW = opt.strideH = stride
    opt.dilationWFactor = opt.dilationHFactor = 1
    opt.fusedActivationFunction = _ACT[activation]
    op._fb.builtinOptionsType = tfl.BuiltinOptions.Conv2DOptions
    op._fb.builtinOptions = opt
    return _model([x], [x, wt, bt, y], op), (nb, oh, ow, cout)


def run(model: bytes, x: np.ndarray) -> np.ndarray:
    """The TFLite Micro interpreter's output for the int8 input ``x`` (one sample)."""
    return run_tflite_micro(model, np.asarray(x, np.int8), stacked=False)
