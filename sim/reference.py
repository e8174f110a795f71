"""Golden references of compiled GEMMs and chains, written from the specification.

What ``tpugen.compiler.compile_gemm(...).decode`` and ``compile_chain(...)`` must return,
computed with NumPy and nothing of the compiler (no tiles, no zero-point folding: a compiler
bug cannot hide in its own reference; ``tests/test_references.py`` checks the imports).

``gemm_reference(config, A, B, out=..., quant=..., in_zp=...)``:

  int32   ``A @ B`` exactly (int64), wrapped to ``config.acc_width`` bits (``model.wrap``).
  int8    TFLite's int8 kernels: ``acc = sum_k (A[m, k] - in_zp) * B[k, n]`` in int32, then
          ``requant.requantize(acc, quant)`` (which adds the bias in int32, mod 2**32, and
          requantizes); int4 operands: clamped to -8..7 as well.
          With ``acc_width < 32`` the accelerator cannot compute TFLite's sums: it accumulates
          the raw products ``A @ B`` in ``acc_width`` bits (wrapping there) and subtracts the
          zero point's ``in_zp * sum_k B[k, n]`` afterwards, in the activation unit's 32-bit
          bias; the reference gives that, ``requantize(wrap(A @ B, acc_width) - in_zp *
          colsum(B), quant)``. The two agree whenever no sum exceeds ``acc_width`` bits, and
          always with ``acc_width >= 32`` (everything is then taken mod 2**32).
  fp32    float operand types: the binary32 sums in the array's order
          (``float_golden.gemm`` with ``config.rows``) as ``np.float32``; A and B are numbers,
          converted to the operand type (``formats.encode``: round to nearest even, fp8
          saturates).

``chain_reference(config, X, layers, in_zp)``: ``gemm_reference`` layer by layer. A layer is
a tuple ``(weights, params)`` / ``(weights, params, in_zp)`` or an object with ``weights``,
``params`` and ``in_zp``; an ``in_zp`` of ``None`` is the previous layer's ``params.out_zp``
(the first layer's: ``in_zp``), and a last layer with ``params=None`` gives its int32 sums.

Bad input raises ``TypeError`` / ``ValueError`` (the checks here are the reference's own,
shorter than the compiler's).
"""

import numpy as np

from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config, OperandType, check_config
from tpugen.sim import float_golden
from tpugen.sim.formats import encode
from tpugen.sim.model import wrap
from tpugen.sim.requant import QuantParams, requantize

__all__ = ["gemm_reference", "chain_reference"]


def gemm_reference(config: Config, A, B, *, out: str | None = None,
                   quant: QuantParams | None = None, in_zp: int = 0) -> np.ndarray:
    """The M x N result of ``A @ B`` on ``config`` (module docstring): ``out="int32"`` (the
    default of integer operand types) the wrapped sums, ``out="int8"`` TFLite's requantization
    of ``(A - in_zp) @ B`` with ``quant``; float operand types (``out="fp32"``) the binary32
    sums as ``np.float32``."""
    check_config(config)
    ot = config.operand_type
    if ot.is_float:
        if out not in (None, "fp32"):
            raise ValueError(f"out must be 'fp32' for {config.operand}, not {out!r}")
        a, b = _pair(_float_bits("A", A, ot), _float_bits("B", B, ot))
        bits = float_golden.gemm(a, b, ot, config.rows)
        return np.asarray(bits, dtype=np.uint32).view(np.float32)
    A, B = _pair(_integers("A", A, ot), _integers("B", B, ot))
    in_zp = check_int("in_zp", in_zp, -128, 127)
    out = "int32" if out is None else out
    if out == "int32":
        if quant is not None or in_zp != 0:
            raise ValueError("quant and in_zp apply to out='int8' only")
        return wrap(_exact_matmul(A, B), config.acc_width)
    if out != "int8":
        raise ValueError(f"out must be 'int32' or 'int8' for {config.operand}, not {out!r}")
    if not isinstance(quant, QuantParams):
        raise TypeError(f"quant must be QuantParams for out='int8', not {quant!r}")
    if config.acc_width >= 32:
        acc = _exact_matmul(A - in_zp, B)                  # TFLite: requantize wraps to int32
    else:
        acc = wrap(_exact_matmul(A, B), config.acc_width) - in_zp * B.sum(axis=0)
    return np.clip(requantize(acc, quant), ot.min, ot.max)


def chain_reference(config: Config, X, layers, in_zp: int = 0) -> np.ndarray:
    """The last layer's M x N output of the chain ``layers`` applied to ``X`` (int8 values,
    or the int32 sums of a last layer without parameters): ``gemm_reference`` layer by
    layer, each layer's output the next one's input."""
    check_config(config)
    if config.operand_type.is_float:
        raise ValueError(f"chain_reference needs an integer operand type, not "
                         f"{config.operand!r}")
    if not isinstance(layers, list | tuple) or not layers:
        raise ValueError(f"layers must be a non-empty list of layers, not {layers!r}")
    x = X
    zp = check_int("in_zp", in_zp, -128, 127)
    for i, layer in enumerate(layers):
        if isinstance(layer, tuple):
            weights, params, own_zp = (*layer, None)[:3]
        else:
            weights, params, own_zp = layer.weights, layer.params, layer.in_zp
        if params is None and i < len(layers) - 1:
            raise ValueError(f"layers[{i}] has no params: only the last layer may give int32 "
                             f"sums")
        if own_zp is not None:
            zp = own_zp
        elif params is None:
            zp = 0
        x = gemm_reference(config, x, weights, out="int32" if params is None else "int8",
                           quant=params, in_zp=zp)
        if params is not None:
            zp = params.out_zp
    return x


def _pair(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"A is {A.shape[0]} x {A.shape[1]} but B is {B.shape[0]} x "
                         f"{B.shape[1]}: A's columns must equal B's rows")
    return A, B


def _matrix(name: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"{name} must be a non-empty 2-D matrix, not shape {arr.shape}")
    return arr


def _integers(name: str, value, ot: OperandType) -> np.ndarray:
    """An integer matrix of operand type ``ot``'s values, as int64."""
    arr = _matrix(name, value)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array, not dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < ot.min or arr.max() > ot.max:
        raise ValueError(f"{name} values must be in {ot.min}..{ot.max} ({ot.name})")
    return arr


def _float_bits(name: str, value, ot: OperandType) -> np.ndarray:
    """Numbers as operand type ``ot``'s bits (int64): integers are taken as their values."""
    arr = _matrix(name, value)
    if arr.dtype == bool:
        raise ValueError(f"{name} must be a numeric array, not dtype {arr.dtype}")
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.float64)
    return encode(arr, ot).astype(np.int64)


def _exact_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` of int64 matrices, exact: in float64 (BLAS, fast) while every product and
    partial sum is below 2**53 in magnitude, else NumPy's int64 product."""
    bound = A.shape[1] * max(1, int(np.abs(A).max())) * max(1, int(np.abs(B).max()))
    if bound < 1 << 53:
        return np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.int64)
    return np.matmul(A, B)
