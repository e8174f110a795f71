"""A block of consecutive rows of the array: the middle level of the hierarchy."""

import math

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import Config
from tpugen.hdl.place import place
from tpugen.hdl.row import Row, row_index_width, row_signature

__all__ = ["Block", "block_signature", "block_rows"]


def block_rows(config: Config) -> int:
    """Rows per block: about sqrt(R), so that the top and each block hold O(R + C) cells' worth
    of wiring (R / G blocks in the top, G rows in a block)."""
    return math.isqrt(config.rows - 1) + 1 if config.rows > 1 else 1


def block_signature(config: Config, nrows: int) -> wiring.Signature:
    """Ports of a block of ``nrows`` rows: the row ports with ``nrows`` activation lanes and
    flags, and ``row_base`` (the index of its first row) instead of ``row_index``."""
    c, ow, aw = config.cols, config.operand_width, config.psum_width
    iw = row_index_width(config)
    return wiring.Signature({
        "a_in": In(unsigned(nrows * ow)),
        "first_in": In(unsigned(nrows)),
        "ps_in": In(unsigned(c * aw)),
        "w_data": In(unsigned(c * ow)),
        "w_we": In(unsigned(c)),
        "w_idx": In(unsigned(c * iw)),
        "row_base": In(unsigned(iw)),
        "ps_out": Out(unsigned(c * aw)),
    })


class Block(wiring.Component):
    """``nrows`` rows chained by their partial sums; row ``k`` gets lane ``k`` of ``a_in`` and
    ``first_in`` (already skewed by the caller) and row index ``row_base + k``.

    ``row_module``: ``None`` elaborates the rows flat; else the Verilog row module's name.
    ``fault``: ``(k, col)``, the row within the block and the column of the debug fault; that
    row is ``fault_row_module`` (or a flat faulty row). ``dsp_plan``: the array's
    ``hdl.dsp.dsp_plan`` (flat elaboration only); its rows ``base .. base + nrows - 1`` are this
    block's. ``dsp_sites``: the array's BELs of its ECP5 blocks (``fpga.gateware.floorplan``).
    """

    def __init__(self, config: Config, nrows: int, *, row_module=None, cell_module=None,
                 fault=None, fault_row_module=None, base=0, dsp_plan=None, dsp_sites=None):
        if not isinstance(nrows, int) or not 1 <= nrows <= config.rows:
            raise ValueError(f"nrows must be in 1..{config.rows}, not {nrows!r}")
        self.config = config
        self.nrows = nrows
        self.base = base    # the first row's index (for the rows of dsp_plan)
        self.dsp_plan = dict(dsp_plan or {})
        self.dsp_sites = dict(dsp_sites or {})
        if self.dsp_plan and row_module is not None:
            raise ValueError("dsp_plan needs the flat elaboration (row_module None)")
        self.row_module = row_module
        self.cell_module = cell_module
        self.fault = fault
        self.fault_row_module = fault_row_module
        super().__init__(block_signature(config, nrows))

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        c, ow, aw = cfg.cols, cfg.operand_width, cfg.psum_width
        iw = row_index_width(cfg)
        ps = [self.ps_in] + [Signal(c * aw, name=f"ps_{k}") for k in range(self.nrows)]
        sig = row_signature(cfg)
        fault_row, fault_col = self.fault if self.fault else (None, None)
        for k in range(self.nrows):
            faulty = k == fault_row
            index = Signal(iw, name=f"row_index_{k}")
            m.d.comb += index.eq(self.row_base + k)
            place(m, f"row_{k}",
                  lambda faulty=faulty, k=k: Row(cfg, fault_col=fault_col if faulty else None,
                                                 dsp_roles=self._dsp_roles(self.base + k),
                                                 dsp_sites=self._dsp_sites(self.base + k)), {
                      "a_in": self.a_in[k * ow:(k + 1) * ow].as_signed(),
                      "first_in": self.first_in[k],
                      "ps_in": ps[k],
                      "w_data": self.w_data,
                      "w_we": self.w_we,
                      "w_idx": self.w_idx,
                      "row_index": index,
                      "ps_out": ps[k + 1],
                  }, module_name=self.fault_row_module if faulty else self.row_module,
                  signature=sig)
        m.d.comb += self.ps_out.eq(ps[-1])
        return m

    def _dsp_roles(self, row):
        return {j: role for (i, j), role in self.dsp_plan.items() if i == row}

    def _dsp_sites(self, row):
        return {j: site for (i, j), site in self.dsp_sites.items() if i == row}


