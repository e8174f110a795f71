"""Write int8 ``.tflite`` models from Python: the examples' and tests' model builder.

It uses the flatbuffer writer inside the ``tflite-micro`` wheel (``model_editor``: no
TensorFlow), an optional dependency (``pip install tpugen[dev]``; a CPython 3.11 x86-64
wheel), imported when a ``ModelWriter`` is made. Shapes are computed here with the importer's
geometry; every int8 tensor is per-tensor quantized except weights and biases, which may be
per output channel.

    mw = ModelWriter()
    x = mw.input((1, 8, 8, 1), scale=0.02, zero_point=-3)
    y = mw.conv2d(x, w, bias, s_w, s_out=0.05, zp_out=4, stride=2, padding="SAME",
                  activation="RELU")
    y = mw.fully_connected(y, w2, bias2, s_w2, s_out=0.1, zp_out=0)
    data = mw.build(y)
"""

from dataclasses import dataclass

import numpy as np

from tpugen.tflite.geometry import Window

__all__ = ["ModelWriter", "WTensor"]


def _editor():
    # Deferred: tflite-micro is an optional (development) dependency of tpugen.
    try:
        from tflite_micro.tensorflow.lite.micro.compression import model_editor
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated
    except ImportError as e:
        raise RuntimeError("writing .tflite models needs the tflite-micro wheel "
                           "(pip install 'tpugen[dev]')") from e
    return model_editor, schema_py_generated


@dataclass(eq=False)
class WTensor:
    """A tensor of the model being written: its editor tensor, shape and quantization."""

    tensor: object
    shape: tuple
    scale: float | None
    zero_point: int
    float32: bool = False


class ModelWriter:
    """Builds one subgraph op by op (see the module docstring); ``build(output)`` returns
    the ``.tflite`` bytes with the first ``input`` as the model input."""

    def __init__(self):
        self._me, self._tfl = _editor()
        self._tensors = []
        self._ops = []
        self._inputs = []
        self._count = 0

    # --- tensors ------------------------------------------------------------------------------
    def _new(self, shape, *, dtype="int8", scale=None, zero_point=0, data=None, axis=None,
             name=None) -> object:
        me, tfl = self._me, self._tfl
        types = {"int8": tfl.TensorType.INT8, "int32": tfl.TensorType.INT32,
                 "float32": tfl.TensorType.FLOAT32}
        q = None
        if scale is not None:
            scales = [float(s) for s in np.atleast_1d(scale)]
            zps = [int(z) for z in np.broadcast_to(zero_point, (len(scales),))]
            q = me.Quantization(scales if len(scales) > 1 else scales[0],
                                zps if len(zps) > 1 else zps[0], axis=axis)
        self._count += 1
        t = me.Tensor(shape=tuple(int(s) for s in shape), dtype=types[dtype],
                      quantization=q, data=data, name=name or f"t{self._count}")
        self._tensors.append(t)
        return t

    def _act(self, shape, scale, zero_point) -> WTensor:
        return WTensor(self._new(shape, scale=scale, zero_point=zero_point), tuple(shape),
                       float(scale), int(zero_point))

    def input(self, shape, scale=None, zero_point=0) -> WTensor:
        """The model input: int8 with ``scale`` / ``zero_point``, or float32 if ``scale`` is
        ``None``."""
        if scale is None:
            t = WTensor(self._new(shape, dtype="float32"), tuple(shape), None, 0, True)
        else:
            t = self._act(shape, scale, zero_point)
        self._inputs.append(t)
        return t

    def _op(self, code, inputs, outputs, options_kind=None, options=None):
        op = self._me.Operator(opcode=code, inputs=inputs, outputs=outputs)
        if options is not None:
            op._fb.builtinOptionsType = options_kind
            op._fb.builtinOptions = options
        self._ops.append(op)

    def _activation(self, name):
        return getattr(self._tfl.ActivationFunctionType, name)

    def _weights(self, w, s_w, axis):
        per_channel = np.ndim(s_w) == 1
        scales = [float(s) for s in np.atleast_1d(s_w)]
        return self._new(np.shape(w), scale=scales, zero_point=[0] * len(scales),
                         data=np.asarray(w, np.int8), axis=axis if per_channel else None)

    def _bias(self, bias, s_in, s_w, n, axis=0):
        if bias is None:
            return None
        scales = [s_in * float(s) for s in np.atleast_1d(s_w)]
        return self._new((n,), dtype="int32", scale=scales, zero_point=[0] * len(scales),
                         data=np.asarray(bias, np.int32),
                         axis=axis if len(scales) > 1 else None)

    # --- ops ------------------------------------------------------------------------------
    def quantize(self, x: WTensor, scale, zero_point) -> WTensor:
        y = self._act(x.shape, scale, zero_point)
        self._op(self._tfl.BuiltinOperator.QUANTIZE, [x.tensor], [y.tensor])
        return y

    def dequantize(self, x: WTensor) -> WTensor:
        y = WTensor(self._new(x.shape, dtype="float32"), x.shape, None, 0, True)
        self._op(self._tfl.BuiltinOperator.DEQUANTIZE, [x.tensor], [y.tensor])
        return y

    def fully_connected(self, x: WTensor, w, bias, s_w, s_out, zp_out, activation="NONE",
                        keep_num_dims=False) -> WTensor:
        """``w`` (N, K) int8; ``s_w`` one scale or one per output channel."""
        tfl = self._tfl
        n, k = np.shape(w)
        size = int(np.prod(x.shape))
        shape = x.shape[:-1] + (n,) if keep_num_dims else (size // k, n)
        y = self._act(shape, s_out, zp_out)
        opt = tfl.FullyConnectedOptionsT()
        opt.fusedActivationFunction = self._activation(activation)
        opt.keepNumDims = bool(keep_num_dims)
        self._op(tfl.BuiltinOperator.FULLY_CONNECTED,
                 [x.tensor, self._weights(w, s_w, 0), self._bias(bias, x.scale, s_w, n)],
                 [y.tensor], tfl.BuiltinOptions.FullyConnectedOptions, opt)
        return y

    def _window_shape(self, x, kh, kw, stride, padding, dilation, channels):
        wy = Window(x.shape[1], kh, stride, dilation, padding)
        wx = Window(x.shape[2], kw, stride, dilation, padding)
        return (x.shape[0], wy.out, wx.out, channels)

    def conv2d(self, x: WTensor, w, bias, s_w, s_out, zp_out, *, stride=1, padding="SAME",
               activation="NONE", dilation=1) -> WTensor:
        """``w`` (Cout, KH, KW, Cin) int8, ``s_w`` one scale or one per output channel."""
        return self._conv(False, x, w, bias, s_w, s_out, zp_out, stride, padding, activation,
                          dilation)

    def depthwise_conv2d(self, x: WTensor, w, bias, s_w, s_out, zp_out, *, stride=1,
                         padding="SAME", activation="NONE", dilation=1) -> WTensor:
        """``w`` (1, KH, KW, Cout) int8 with ``Cout = Cin * multiplier``."""
        return self._conv(True, x, w, bias, s_w, s_out, zp_out, stride, padding, activation,
                          dilation)

    def _conv(self, depthwise, x, w, bias, s_w, s_out, zp_out, stride, padding, activation,
              dilation) -> WTensor:
        """CONV_2D, or DEPTHWISE_CONV_2D (``depthwise``: the output channels are ``w``'s last
        axis, not its first, and the options carry the depth multiplier)."""
        tfl = self._tfl
        axis = 3 if depthwise else 0          # the output channels' axis of w (and its scales)
        kh, kw = np.shape(w)[1:3]
        cout = np.shape(w)[axis]
        y = self._act(self._window_shape(x, kh, kw, stride, padding, dilation, cout), s_out,
                      zp_out)
        opt = tfl.DepthwiseConv2DOptionsT() if depthwise else tfl.Conv2DOptionsT()
        opt.padding = getattr(tfl.Padding, padding)
        opt.strideH = opt.strideW = stride
        opt.dilationHFactor = opt.dilationWFactor = dilation
        if depthwise:
            opt.depthMultiplier = cout // x.shape[3]
        opt.fusedActivationFunction = self._activation(activation)
        code, kind = ((tfl.BuiltinOperator.DEPTHWISE_CONV_2D,
                       tfl.BuiltinOptions.DepthwiseConv2DOptions) if depthwise else
                      (tfl.BuiltinOperator.CONV_2D, tfl.BuiltinOptions.Conv2DOptions))
        self._op(code, [x.tensor, self._weights(w, s_w, axis),
                        self._bias(bias, x.scale, s_w, cout, axis)], [y.tensor], kind, opt)
        return y

    def _pool(self, code, x, k, stride, padding, activation):
        tfl = self._tfl
        y = self._act(self._window_shape(x, k, k, stride, padding, 1, x.shape[3]), x.scale,
                      x.zero_point)
        opt = tfl.Pool2DOptionsT()
        opt.padding = getattr(tfl.Padding, padding)
        opt.strideH = opt.strideW = stride
        opt.filterHeight = opt.filterWidth = k
        opt.fusedActivationFunction = self._activation(activation)
        self._op(code, [x.tensor], [y.tensor], tfl.BuiltinOptions.Pool2DOptions, opt)
        return y

    def max_pool(self, x: WTensor, k, stride, padding="VALID", activation="NONE") -> WTensor:
        return self._pool(self._tfl.BuiltinOperator.MAX_POOL_2D, x, k, stride, padding,
                          activation)

    def average_pool(self, x: WTensor, k, stride, padding="VALID",
                     activation="NONE") -> WTensor:
        return self._pool(self._tfl.BuiltinOperator.AVERAGE_POOL_2D, x, k, stride, padding,
                          activation)

    def softmax(self, x: WTensor, beta=1.0) -> WTensor:
        tfl = self._tfl
        y = self._act(x.shape, 1.0 / 256, -128)
        opt = tfl.SoftmaxOptionsT()
        opt.beta = float(beta)
        self._op(tfl.BuiltinOperator.SOFTMAX, [x.tensor], [y.tensor],
                 tfl.BuiltinOptions.SoftmaxOptions, opt)
        return y

    def constant(self, data, scale, zero_point) -> WTensor:
        """A constant int8 tensor (e.g. the second operand of ``add``)."""
        data = np.asarray(data, np.int8)
        t = self._new(data.shape, scale=scale, zero_point=zero_point, data=data)
        return WTensor(t, data.shape, float(scale), int(zero_point))

    def add(self, a: WTensor, b: WTensor, s_out, zp_out, activation="NONE") -> WTensor:
        tfl = self._tfl
        y = self._act(tuple(np.broadcast_shapes(a.shape, b.shape)), s_out, zp_out)
        opt = tfl.AddOptionsT()
        opt.fusedActivationFunction = self._activation(activation)
        self._op(tfl.BuiltinOperator.ADD, [a.tensor, b.tensor], [y.tensor],
                 tfl.BuiltinOptions.AddOptions, opt)
        return y

    def reshape(self, x: WTensor, shape) -> WTensor:
        tfl = self._tfl
        shape = tuple(int(s) for s in shape)
        y = WTensor(self._new(shape, scale=x.scale, zero_point=x.zero_point), shape, x.scale,
                    x.zero_point)
        s = self._new((len(shape),), dtype="int32", data=np.asarray(shape, np.int32))
        opt = tfl.ReshapeOptionsT()
        opt.newShape = list(shape)
        self._op(tfl.BuiltinOperator.RESHAPE, [x.tensor, s], [y.tensor],
                 tfl.BuiltinOptions.ReshapeOptions, opt)
        return y

    def _int32(self, values) -> object:
        values = np.asarray(values, np.int32)
        return self._new(values.shape, dtype="int32", data=values)

    def _options(self, name: str, **fields):
        opt = getattr(self._tfl, f"{name}OptionsT")()
        for k, v in fields.items():
            setattr(opt, k, v)
        return getattr(self._tfl.BuiltinOptions, f"{name}Options"), opt

    def _simple(self, code: str, inputs, shape, scale, zero_point, options=None) -> WTensor:
        y = self._act(shape, scale, zero_point)
        kind, opt = options if options is not None else (None, None)
        self._op(getattr(self._tfl.BuiltinOperator, code), inputs, [y.tensor], kind, opt)
        return y

    def pad(self, x: WTensor, pads, value=None) -> WTensor:
        """PAD (with the zero point), or PADV2 with the int8 ``value``; ``pads`` one
        ``(before, after)`` per axis."""
        shape = tuple(s + a + b for s, (a, b) in zip(x.shape, pads, strict=True))
        ins = [x.tensor, self._int32(pads)]
        if value is None:
            return self._simple("PAD", ins, shape, x.scale, x.zero_point, self._options("Pad"))
        ins.append(self._new((1,), scale=x.scale, zero_point=x.zero_point,
                             data=np.asarray([value], np.int8)))
        return self._simple("PADV2", ins, shape, x.scale, x.zero_point, self._options("PadV2"))

    def mean(self, x: WTensor, axes, s_out, zp_out, keep_dims=False) -> WTensor:
        axes = [a % len(x.shape) for a in axes]
        shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape)) if keep_dims else \
            tuple(s for i, s in enumerate(x.shape) if i not in axes)
        return self._simple("MEAN", [x.tensor, self._int32(axes)], shape, s_out, zp_out,
                            self._options("Reducer", keepDims=bool(keep_dims)))

    def logistic(self, x: WTensor) -> WTensor:
        return self._simple("LOGISTIC", [x.tensor], x.shape, 1.0 / 256, -128)

    def tanh(self, x: WTensor) -> WTensor:
        return self._simple("TANH", [x.tensor], x.shape, 1.0 / 128, 0)

    def mul(self, a: WTensor, b: WTensor, s_out, zp_out, activation="NONE") -> WTensor:
        return self._simple("MUL", [a.tensor, b.tensor], np.broadcast_shapes(a.shape, b.shape),
                            s_out, zp_out, self._options(
                                "Mul", fusedActivationFunction=self._activation(activation)))

    def sub(self, a: WTensor, b: WTensor, s_out, zp_out, activation="NONE") -> WTensor:
        return self._simple("SUB", [a.tensor, b.tensor], np.broadcast_shapes(a.shape, b.shape),
                            s_out, zp_out, self._options(
                                "Sub", fusedActivationFunction=self._activation(activation)))

    def transpose(self, x: WTensor, perm) -> WTensor:
        shape = tuple(x.shape[p] for p in perm)
        return self._simple("TRANSPOSE", [x.tensor, self._int32(perm)], shape, x.scale,
                            x.zero_point, self._options("Transpose"))

    def concatenation(self, xs, axis) -> WTensor:
        """CONCATENATION of tensors quantized alike (the first one's quantization)."""
        shape = list(xs[0].shape)
        shape[axis] = sum(t.shape[axis] for t in xs)
        return self._simple("CONCATENATION", [t.tensor for t in xs], tuple(shape),
                            xs[0].scale, xs[0].zero_point,
                            self._options("Concatenation", axis=int(axis)))

    def keras_reshape(self, x: WTensor, rest) -> WTensor:
        """RESHAPE to ``(batch,) + rest`` the way Keras writes it: SHAPE -> STRIDED_SLICE
        (the batch) -> PACK (with ``rest``) -> RESHAPE, the shape computed at run time."""
        tfl = self._tfl
        shape = self._new((len(x.shape),), dtype="int32")
        kind, opt = self._options("Shape", outType=tfl.TensorType.INT32)
        self._op(tfl.BuiltinOperator.SHAPE, [x.tensor], [shape], kind, opt)
        batch = self._new((), dtype="int32")
        kind, opt = self._options("StridedSlice", shrinkAxisMask=1)
        self._op(tfl.BuiltinOperator.STRIDED_SLICE, [shape, self._int32([0]), self._int32([1]),
                                                     self._int32([1])], [batch], kind, opt)
        dims = [batch] + [self._int32(v) for v in rest]
        new_shape = self._new((len(dims),), dtype="int32")
        kind, opt = self._options("Pack", valuesCount=len(dims), axis=0)
        self._op(tfl.BuiltinOperator.PACK, dims, [new_shape], kind, opt)
        out = (x.shape[0],) + tuple(rest)
        return self._simple("RESHAPE", [x.tensor, new_shape], out, x.scale, x.zero_point,
                            self._options("Reshape"))

    def gather(self, params: WTensor, indices, axis=0) -> WTensor:
        """GATHER of ``indices`` (int32 constants) from ``params`` along ``axis``."""
        indices = np.asarray(indices, np.int32)
        shape = params.shape[:axis] + indices.shape + params.shape[axis + 1:]
        return self._simple("GATHER", [params.tensor, self._int32(indices)], shape,
                            params.scale, params.zero_point, self._options("Gather", axis=axis))

    def op(self, code_name: str, inputs, shape, scale, zero_point) -> WTensor:
        """Any builtin op by name with no options (to write models tpugen must refuse)."""
        y = self._act(shape, scale, zero_point)
        self._op(getattr(self._tfl.BuiltinOperator, code_name), [t.tensor for t in inputs],
                 [y.tensor])
        return y

    def build(self, output: WTensor) -> bytes:
        if len(self._inputs) != 1:
            raise ValueError(f"the model must have one input, not {len(self._inputs)}")
        sg = self._me.Subgraph(tensors=self._tensors, operators=self._ops,
                               inputs=[self._inputs[0].tensor], outputs=[output.tensor])
        return bytes(self._me.Model(subgraphs=[sg]).build())
