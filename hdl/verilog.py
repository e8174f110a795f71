"""Hierarchical Verilog of the array: one cell module, one row module, the array top."""

from .convert import to_verilog

from .array import Array
from .cell import Cell
from .config import Config
from .row import Row

__all__ = ["array_verilog", "module_names"]


def module_names(prefix: str = "tpugen") -> dict[str, str]:
    return {
        "cell": f"{prefix}_cell",
        "cell_fault": f"{prefix}_cell_fault",
        "row": f"{prefix}_row",
        "row_fault": f"{prefix}_row_fault",
        "array": f"{prefix}_array",
    }


def array_verilog(config: Config, *, fault=None, prefix: str = "tpugen") -> str:
    """Return the Verilog of the array (top module ``<prefix>_array``) as one text.

    Every module holds O(R + C) instances: the top holds R rows, a row holds C cells. With
    ``fault=(i, j)`` (a debug option), row ``i`` is a separate module whose cell ``j`` computes
    a wrong product; without it, no trace of the option is in the output.
    """
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    if not isinstance(prefix, str) or not prefix.isidentifier():
        raise ValueError(f"prefix must be a Verilog identifier, not {prefix!r}")
    names = module_names(prefix)
    parts = [to_verilog(Cell(config), name=names["cell"]),
             to_verilog(Row(config, cell_module=names["cell"]), name=names["row"])]
    if fault is not None:
        Array(config, fault=fault)._MustUse__silence = True  # validates the coordinates
        parts.append(to_verilog(Cell(config, fault=True), name=names["cell_fault"]))
        parts.append(to_verilog(
            Row(config, cell_module=names["cell"], fault_col=fault[1],
                fault_cell_module=names["cell_fault"]), name=names["row_fault"]))
    parts.append(to_verilog(
        Array(config, hierarchical=True, module_names=names, fault=fault), name=names["array"]))
    return "\n".join(parts)
