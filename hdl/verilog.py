"""Hierarchical Verilog of the array: cell, row, block and array modules in one text."""

import functools

from tpugen.hdl.array import SystolicArray, check_fault
from tpugen.hdl.block import Block, block_rows
from tpugen.hdl.cell import Cell
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.convert import to_verilog
from tpugen.hdl.core import Core
from tpugen.hdl.row import Row

__all__ = ["array_verilog", "core_verilog", "module_names"]


def module_names(prefix: str = "tpugen") -> dict[str, str]:
    kinds = ("cell", "cell_fault", "row", "row_fault", "block", "block_tail", "block_fault",
             "array", "core")
    return {k: f"{prefix}_{k}" for k in kinds}


def array_verilog(config: Config, *, fault=None, prefix: str = "tpugen") -> str:
    """Return the Verilog of the array (top module ``<prefix>_array``) as one text.

    One cell module; a row module of C cell instances; a block module of G = ceil(sqrt(R)) row
    instances (and a tail block for the R mod G last rows); the top of ceil(R / G) blocks. So
    every module holds O(R + C) instances and wiring. With ``fault=(i, j)`` (a debug option),
    the block holding row ``i`` is a separate module whose row has a faulty cell ``j``; without
    it, no trace of the option is in the output.
    """
    check_config(config)
    if not isinstance(prefix, str) or not prefix.isidentifier():
        raise ValueError(f"prefix must be a Verilog identifier, not {prefix!r}")
    names = module_names(prefix)
    r = config.rows
    g = block_rows(config)
    # The array's modules are most of the core's logic: synchronous resets folded into their
    # flip-flops, which Verilator simulates about twice as fast (``hdl.convert``).
    to_v = functools.partial(to_verilog, fold_resets=True)
    pw = config.psum_width
    parts = [to_v(Cell(config, ps_width=pw), names["cell"]),
             to_v(Row(config, cell_module=names["cell"]), names["row"]),
             to_v(Block(config, g, row_module=names["row"]), names["block"])]
    if r % g:
        parts.append(to_v(Block(config, r % g, row_module=names["row"]), names["block_tail"]))
    if fault is not None:
        check_fault(config, fault)
        i, j = fault
        base = (i // g) * g
        parts.append(to_v(Cell(config, fault=True, ps_width=pw), names["cell_fault"]))
        parts.append(to_v(Row(config, cell_module=names["cell"], fault_col=j,
                              fault_cell_module=names["cell_fault"]), names["row_fault"]))
        parts.append(to_v(Block(config, min(g, r - base), row_module=names["row"],
                                fault=(i - base, j), fault_row_module=names["row_fault"]),
                          names["block_fault"]))
    parts.append(to_v(SystolicArray(config, hierarchical=True, module_names=names, fault=fault),
                      names["array"]))
    return "\n".join(parts)


def core_verilog(config: Config, *, fault=None, prefix: str = "tpugen",
                 probe_port: bool = False) -> str:
    """Return the Verilog of the whole core (top ``<prefix>_core``): the array's modules and the
    core top, which instances ``<prefix>_array``. ``probe_port``: with the ``probe`` output
    (``hdl.core.Core``; the compiled Verilator harness's engine timelines)."""
    check_fault(config, fault)
    names = module_names(prefix)
    array = array_verilog(config, fault=fault, prefix=prefix)
    top = to_verilog(Core(config, hierarchical=True, array_module=names["array"],
                          probe_port=probe_port),
                     f"{prefix}_core")
    return array + "\n" + top
