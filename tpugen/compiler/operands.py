"""The compiler's argument checks: operand matrices, the output kind, the requantization
parameters, zero points and the weight lookahead (``TypeError`` / ``ValueError`` naming the
argument)."""

from __future__ import annotations

import numpy as np

from tpugen.hdl.checks import check_instance, check_int
from tpugen.hdl.config import OPERAND_TYPES, Config
from tpugen.sim.formats import encode, ml_dtype
from tpugen.sim.model import wrap
from tpugen.sim.requant import QuantParams

__all__ = ["ceil_div", "operand_matrix", "require_integer_operands", "gemm_out", "out_quant",
           "zero_point", "check_lookahead"]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def operand_matrix(name: str, value, config: Config | None = None) -> np.ndarray:
    """``value`` as an int64 matrix of ``config``'s operand lanes (int8 without a config).

    Integer types: integer values in the type's range. Float types: numbers (any float or
    integer dtype, or the ``ml_dtypes`` type itself) converted with ``sim.formats.encode``
    (round to nearest even; fp8 saturates), as the signed ``operand_width``-bit values of
    their bits."""
    ot = OPERAND_TYPES["int8"] if config is None else config.operand_type
    arr = np.asarray(value)
    if ot.is_float:
        if arr.dtype == bool or not (arr.dtype.kind in "iuf" or arr.dtype == ml_dtype(ot)):
            raise ValueError(f"{name} must be a numeric array ({ot.name} operands), not dtype "
                             f"{arr.dtype}")
    elif arr.dtype == bool or arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer ({ot.name}) array, not dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, not shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"{name} must have at least one row and column, not shape {arr.shape}")
    if ot.is_float:
        if arr.dtype.kind in "iu":
            arr = arr.astype(np.float64)
        return wrap(encode(arr, ot).astype(np.int64), ot.width)
    arr = arr.astype(np.int64)
    lo, hi = arr.min(), arr.max()
    if lo < ot.min or hi > ot.max:
        raise ValueError(f"{name} values must be in {ot.min}..{ot.max} ({ot.name}), found "
                         f"{lo}..{hi}")
    return arr


def require_integer_operands(config: Config, what: str) -> None:
    """``ValueError`` unless ``config``'s operands are integers (``what`` names the caller)."""
    if config.operand_type.is_float:
        raise ValueError(f"{what} needs an integer operand type, not {config.operand!r} (float "
                         f"types compute single GEMMs: compile_gemm with out='fp32')")


def gemm_out(config: Config, out: str | None) -> str:
    """``out`` of ``compile_gemm`` checked against the operand type (``None``: its default)."""
    if config.operand_type.is_float:
        if out not in (None, "fp32"):
            raise ValueError(f"out must be 'fp32' for {config.operand}, not {out!r}")
        return "fp32"
    if out == "fp32":
        raise ValueError(f"out='fp32' needs a float operand type, not {config.operand!r}")
    return "int32" if out is None else out


def out_quant(out: str, quant, in_zp: int, n: int, what: str = "quant") -> QuantParams | None:
    """The output requantization of a layer with ``n`` channels, checked (``None`` for
    ``out="int32"``, which takes no parameters and no input zero point)."""
    if out not in ("int32", "int8"):
        raise ValueError(f"out must be 'int32' or 'int8', not {out!r}")
    if out == "int32":
        if quant is not None or in_zp != 0:
            raise ValueError(f"{what} and in_zp apply to out='int8' only")
        return None
    check_instance(what, quant, QuantParams, "QuantParams for out='int8'")
    if quant.channels not in (None, n):
        raise ValueError(f"{what} has {quant.channels} channels, but the layer has {n}")
    return quant


def zero_point(name: str, value) -> int:
    """An int8 zero point (-128..127)."""
    return check_int(name, value, -128, 127)


def check_lookahead(config: Config, lookahead: int | None) -> int:
    """The tiles requested ahead of the MATMUL taking the current one: ``lookahead`` checked
    (0 .. ``weight_fifo_depth - 1``), by default ``min(1, weight_fifo_depth - 1)``."""
    if lookahead is None:
        return min(1, config.weight_fifo_depth - 1)
    return check_int("weight_lookahead", lookahead, 0, config.weight_fifo_depth - 1)
