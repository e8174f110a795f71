"""Read a ``.tflite`` flatbuffer into plain Python records (with the ``tflite`` package).

``read_graph(data)`` returns the ``Graph`` of the model's first subgraph: its ``TensorInfo``
records (shape, dtype, quantization, constant data) and its ``OpInfo`` records (the builtin
operator's name, input and output tensor indices, its options table or ``None``), in the
model's execution order. Nothing is interpreted here beyond the file format.
"""

import struct
from dataclasses import dataclass

import flatbuffers
import numpy as np
import tflite

__all__ = ["TensorInfo", "OpInfo", "Graph", "read_graph"]

_DTYPES = {tflite.TensorType.INT8: np.int8, tflite.TensorType.INT32: np.int32,
           tflite.TensorType.FLOAT32: np.float32, tflite.TensorType.UINT8: np.uint8,
           tflite.TensorType.INT16: np.int16, tflite.TensorType.INT64: np.int64,
           tflite.TensorType.BOOL: np.bool_, tflite.TensorType.FLOAT16: np.float16}
_TYPE_NAMES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_OP_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_OPTION_NAMES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}


@dataclass(frozen=True, eq=False)
class TensorInfo:
    """One tensor: ``shape`` (as declared), ``dtype`` (a NumPy dtype, or ``None`` for a type
    NumPy has not, named in ``type_name``), ``scales`` (float32) and ``zero_points`` (int64)
    of its quantization (empty when it has none) along ``axis``, and ``data`` (its constant
    value, or ``None`` for an activation)."""

    index: int
    name: str
    shape: tuple
    dtype: object
    type_name: str
    scales: np.ndarray
    zero_points: np.ndarray
    axis: int
    data: np.ndarray | None

    @property
    def quantized(self) -> bool:
        return len(self.scales) > 0

    @property
    def scale(self) -> float:
        """The per-tensor scale (the first one)."""
        if not self.quantized:
            raise ValueError(f"tensor {self.name!r} has no quantization")
        return float(self.scales[0])

    @property
    def zero_point(self) -> int:
        """The per-tensor zero point (the first one; 0 when absent)."""
        return int(self.zero_points[0]) if len(self.zero_points) else 0


@dataclass(frozen=True, eq=False)
class OpInfo:
    """One operator: ``name`` (the builtin operator, e.g. ``"CONV_2D"``, or
    ``"CUSTOM:<code>"``), ``inputs`` / ``outputs`` (tensor indices; -1 is an absent optional
    input), ``options`` (the builtin options table, e.g. a ``tflite.Conv2DOptions``, or
    ``None`` when the model gives none)."""

    index: int
    name: str
    inputs: tuple
    outputs: tuple
    options: object | None


@dataclass(frozen=True, eq=False)
class Graph:
    """A model's first subgraph: ``tensors``, ``ops`` (execution order), graph ``inputs`` and
    ``outputs`` (tensor indices)."""

    tensors: tuple
    ops: tuple
    inputs: tuple
    outputs: tuple


def _tensor_data(model, raw: bytes, t) -> np.ndarray | None:
    buf = model.Buffers(t.Buffer()) if t.Buffer() < model.BuffersLength() else None
    if buf is None:
        return None
    if buf.Offset() > 1:                     # data stored after the flatbuffer (large models)
        data = np.frombuffer(raw, np.uint8, buf.Size(), buf.Offset())
    elif buf.DataLength():
        data = buf.DataAsNumpy()
    else:
        return None
    dtype = _DTYPES.get(t.Type())
    if dtype is None:
        raise ValueError(f"tensor {t.Name().decode()!r}: constant data of type "
                         f"{_TYPE_NAMES.get(t.Type(), t.Type())} is not supported")
    shape = tuple(int(v) for v in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    return np.frombuffer(data.tobytes(), dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)


def _tensor(model, raw, index, t) -> TensorInfo:
    q = t.Quantization()
    scales = np.zeros(0, np.float32)
    zps = np.zeros(0, np.int64)
    axis = 0
    if q is not None and q.ScaleLength():
        scales = q.ScaleAsNumpy().astype(np.float32)
        zps = (q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength()
               else np.zeros(len(scales), np.int64))
        axis = int(q.QuantizedDimension())
    shape = tuple(int(v) for v in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    return TensorInfo(index=index, name=(t.Name() or b"").decode(), shape=shape,
                      dtype=_DTYPES.get(t.Type()), type_name=_TYPE_NAMES.get(t.Type(), "?"),
                      scales=scales, zero_points=zps, axis=axis,
                      data=_tensor_data(model, raw, t))


def _options(op):
    kind = op.BuiltinOptionsType()
    table = op.BuiltinOptions()
    if not kind or table is None:
        return None
    cls = getattr(tflite, _OPTION_NAMES.get(kind, ""), None)
    if cls is None:
        return None
    options = cls()
    options.Init(table.Bytes, table.Pos)
    return options


def _builtin_code(code) -> int:
    """TFLite's ``GetBuiltinCode``: ``max(builtin_code, deprecated_builtin_code)``. The
    ``tflite`` package's ``BuiltinCode()`` returns the deprecated field for codes below 127,
    which writers that fill only ``builtin_code`` leave 0 (ADD): read the field itself."""
    field = code._tab.Offset(10)                 # OperatorCode.builtin_code (int32)
    raw = code._tab.Get(flatbuffers.number_types.Int32Flags, field + code._tab.Pos) \
        if field else 0
    return max(raw, code.DeprecatedBuiltinCode())


def _op_name(model, op) -> str:
    code = model.OperatorCodes(op.OpcodeIndex())
    builtin = _builtin_code(code)
    if builtin == tflite.BuiltinOperator.CUSTOM:
        return f"CUSTOM:{(code.CustomCode() or b'').decode()}"
    return _OP_NAMES.get(builtin, f"BUILTIN_{builtin}")


def read_graph(data) -> Graph:
    """The first subgraph of the ``.tflite`` flatbuffer ``data`` (bytes): ``TypeError`` for
    data that is not bytes, ``ValueError`` for bytes that are not a readable ``.tflite``
    flatbuffer (no ``TFL3`` identifier, truncated, offsets out of range)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be the bytes of a .tflite file, not {type(data).__name__}")
    raw = bytes(data)
    if len(raw) < 8 or raw[4:8] != b"TFL3":
        raise ValueError("not a .tflite flatbuffer (no 'TFL3' identifier)")
    try:
        return _read(raw)
    except (struct.error, IndexError, TypeError, UnicodeDecodeError, OverflowError) as e:
        raise ValueError(f"not a valid .tflite flatbuffer (truncated or corrupt: {e})") \
            from None
    except ValueError as e:
        raise ValueError(f"not a valid .tflite flatbuffer ({e})") from None


def _read(raw: bytes) -> Graph:
    model = tflite.Model.GetRootAs(raw, 0)
    if model.SubgraphsLength() < 1:
        raise ValueError("the model has no subgraph")
    sg = model.Subgraphs(0)
    tensors = tuple(_tensor(model, raw, i, sg.Tensors(i)) for i in range(sg.TensorsLength()))
    ops = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        ins = tuple(int(v) for v in op.InputsAsNumpy()) if op.InputsLength() else ()
        outs = tuple(int(v) for v in op.OutputsAsNumpy()) if op.OutputsLength() else ()
        ops.append(OpInfo(index=i, name=_op_name(model, op), inputs=ins, outputs=outs,
                          options=_options(op)))
    return Graph(tensors=tensors, ops=tuple(ops),
                 inputs=tuple(int(v) for v in sg.InputsAsNumpy()),
                 outputs=tuple(int(v) for v in sg.OutputsAsNumpy()))
