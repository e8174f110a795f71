"""The unified buffer: rows of R operands, one write port and two synchronous read ports."""

from amaranth.hdl import Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import Config, check_config

__all__ = ["UnifiedBuffer", "ub_row_layout"]


def ub_row_layout(config: Config) -> data.ArrayLayout:
    """One unified-buffer row: R operand lanes (what the array takes as one activation vector)."""
    return data.ArrayLayout(signed(config.operand_width), config.rows)


class UnifiedBuffer(wiring.Component):
    """``ub_rows`` rows of R operand lanes (``ub_row_layout``: ``operand_width`` bits each, so
    int4 two a byte), zero at reset.

    Storage is one ``lib.memory.Memory`` with one write port (lane granularity) and two
    synchronous, non-transparent read ports, initialised to zero. It is marked ``no_rw_check``:
    a block RAM needs no logic for reads of the row being written (see below).

    Write port:
      wr_en    ``In(1)``: write this cycle.
      wr_addr  ``In(range(ub_rows))``: the row; must be ``< ub_rows``.
      wr_data  ``In(ub_row_layout)``.
      wr_mask  ``In(R)``, reset value all ones: lane ``k`` is written only where bit ``k`` is set
               (the other lanes keep their value). Leave it undriven to write whole rows.
      The row holds the new value from the cycle after ``wr_en``.

    Read ports ``rd0_*`` (the array's activation feed) and ``rd1_*`` (host write-back and the
    rest), independent and identical:
      rdN_en    ``In(1)``: read this cycle.
      rdN_addr  ``In(range(ub_rows))``: the row; must be ``< ub_rows``.
      rdN_data  ``Out(ub_row_layout)``: the row, valid in the cycle after ``rdN_en``; it holds its
                value while ``rdN_en`` is low.

    Read during write (same row, same cycle): not allowed (the core's interlocks keep readers
    off rows being written); the block RAMs return undefined data, the simulation the **old**
    row. A read one cycle after the write returns the new one. So the write latency, request to
    the first ``rdN_en`` that sees it, is 1 cycle.

    Throughput: one write and two reads per cycle.
    """

    def __init__(self, config: Config):
        check_config(config)
        self.config = config
        row = ub_row_layout(config)
        addr = range(config.ub_rows)
        super().__init__({
            "wr_en": In(1),
            "wr_addr": In(addr),
            "wr_data": In(row),
            "wr_mask": In(config.rows, init=(1 << config.rows) - 1),
            "rd0_en": In(1),
            "rd0_addr": In(addr),
            "rd0_data": Out(row),
            "rd1_en": In(1),
            "rd1_addr": In(addr),
            "rd1_data": Out(row),
        })

    @property
    def row_layout(self) -> data.ArrayLayout:
        return ub_row_layout(self.config)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.mem = mem = Memory(shape=self.row_layout, depth=cfg.ub_rows, init=[],
                                        attrs={"no_rw_check": 1})
        wp = mem.write_port(granularity=1)
        m.d.comb += [
            wp.addr.eq(self.wr_addr),
            wp.data.eq(self.wr_data),
            wp.en.eq(Mux(self.wr_en, self.wr_mask, 0)),
        ]
        for n in range(2):
            rp = mem.read_port()
            m.d.comb += [
                rp.addr.eq(getattr(self, f"rd{n}_addr")),
                rp.en.eq(getattr(self, f"rd{n}_en")),
                getattr(self, f"rd{n}_data").eq(rp.data),
            ]
        return m
