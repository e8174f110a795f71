"""One row of the systolic array: C cells chained east."""

from amaranth.hdl import Cat, Module, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.cell import Cell, DspLink, cell_signature
from tpugen.hdl.config import Config
from tpugen.hdl.dsp import DSP_ROLES
from tpugen.hdl.place import place

__all__ = ["Row", "row_index_width", "row_signature"]


def row_index_width(config: Config) -> int:
    """Bits of a row index of the array (at least 1)."""
    return max(1, (config.rows - 1).bit_length())


def row_signature(config: Config) -> wiring.Signature:
    """The ports of a ``Row`` of ``config`` (also those of its Verilog module)."""
    c, ow, aw = config.cols, config.operand_width, config.psum_width
    iw = row_index_width(config)
    return wiring.Signature({
        "a_in": In(signed(ow)),
        "first_in": In(1),
        "ps_in": In(unsigned(c * aw)),
        "w_data": In(unsigned(c * ow)),
        "w_we": In(unsigned(c)),
        "w_idx": In(unsigned(c * iw)),
        "row_index": In(unsigned(iw)),
        "ps_out": Out(unsigned(c * aw)),
    })


class Row(wiring.Component):
    """C cells in a row; the same module serves every row of the array.

    Ports (packed vectors, lane ``j`` at bits ``[j*w, (j+1)*w)``):
      a_in, first_in   the row's activation and tile flag, entering cell 0; cell ``j`` sees
                       them ``j`` cycles later.
      ps_in, ps_out    C partial sums from the row above / to the row below
                       (``config.psum_width`` each); ``ps_out`` lane ``j`` is registered in
                       cell ``j``.
      w_data, w_we,    per-column weight broadcast: when ``w_we[j]`` and ``w_idx[j]`` equals
      w_idx            ``row_index``, cell ``j`` loads lane ``j`` of ``w_data`` into its shadow.
      row_index        this row's index (a constant tie-off at the instance).

    ``cell_module``: ``None`` elaborates the cells flat; otherwise the name of the Verilog
    cell module to instance. ``fault_col``: the column whose cell gets the debug fault.
    ``dsp_roles``: ``{col: role}``, the DSP blocks of this row's cells (this row's part of an
    ``hdl.dsp.dsp_plan``; flat elaboration only); ``dsp_sites``: ``{col: BEL}``, where their
    ECP5 blocks go (``fpga.gateware.floorplan``).
    """

    def __init__(self, config: Config, *, cell_module=None, fault_col=None,
                 fault_cell_module=None, dsp_roles=None, dsp_sites=None):
        dsp_roles = dict(dsp_roles or {})
        if any(j not in range(config.cols) or r not in DSP_ROLES for j, r in dsp_roles.items()):
            raise ValueError(f"dsp_roles must map columns of the row to roles of "
                             f"{', '.join(DSP_ROLES)}, not {dsp_roles!r}")
        if dsp_roles and cell_module is not None:
            raise ValueError("dsp_roles needs the flat elaboration (cell_module None)")
        self.config = config
        self.cell_module = cell_module
        self.fault_col = fault_col
        self.fault_cell_module = fault_cell_module
        self.dsp_roles = dsp_roles
        self.dsp_sites = dict(dsp_sites or {})
        super().__init__(row_signature(config))

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        c, ow, aw = cfg.cols, cfg.operand_width, cfg.psum_width
        iw = row_index_width(cfg)
        a = [Signal(signed(ow), name=f"a_{j}") for j in range(c + 1)]
        first = [Signal(name=f"first_{j}") for j in range(c + 1)]
        ps_out = [Signal(signed(aw), name=f"ps_{j}") for j in range(c)]
        m.d.comb += [a[0].eq(self.a_in), first[0].eq(self.first_in)]
        sig = cell_signature(cfg, aw)
        # DSP blocks for the multipliers (hdl.dsp); a faulty cell keeps its own multiplier.
        links = {}
        for j in range(c):
            if self.dsp_roles.get(j) == "mac16_lo" and j != self.fault_col \
                    and j + 1 != self.fault_col:
                links[j] = links[j + 1] = DspLink(cfg, f"mac16_{j}")
        roles = {j: r for j, r in self.dsp_roles.items()
                 if r not in ("mac16_lo", "mac16_hi") or j in links}
        for j in range(c):
            faulty = j == self.fault_col
            module = self.fault_cell_module if faulty else self.cell_module
            load = self.w_we[j] & (self.w_idx[j * iw:(j + 1) * iw] == self.row_index)
            place(m, f"cell_{j}", lambda faulty=faulty, j=j: Cell(
                cfg, fault=faulty, dsp_role=None if faulty else roles.get(j),
                dsp_link=None if faulty else links.get(j), ps_width=aw,
                dsp_site=None if faulty else self.dsp_sites.get(j)), {
                "a_in": a[j],
                "first_in": first[j],
                "ps_in": self.ps_in[j * aw:(j + 1) * aw].as_signed(),
                "w_data": self.w_data[j * ow:(j + 1) * ow].as_signed(),
                "w_load": load,
                "a_out": a[j + 1],
                "first_out": first[j + 1],
                "ps_out": ps_out[j],
            }, module_name=module, signature=sig)
        m.d.comb += self.ps_out.eq(Cat(*ps_out))
        return m
