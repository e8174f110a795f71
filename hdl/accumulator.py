"""The accumulator buffer: rows of C sums, overwritten or accumulated into at one row per cycle."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .activation import acc_row_layout
from .config import Config

__all__ = ["AccumulatorBuffer", "ACC_WRITE_LATENCY"]

#: Cycles from a write request to the first cycle in which ``rd_en`` reads the new value.
ACC_WRITE_LATENCY = 2


class AccumulatorBuffer(wiring.Component):
    """``acc_rows`` rows of C ``acc_width`` sums (``acc_row_layout``), zero at reset.

    Storage is one ``lib.memory.Memory`` (one write port, two synchronous read ports: one for
    the read-modify-write, one for ``rd_*``), initialised to zero.

    Write port (no back-pressure; a request may come in every cycle, to any row, in any order,
    the same row in consecutive cycles included):
      wr_valid       ``In(1)``: a request this cycle.
      wr_addr        ``In(range(acc_rows))``: its row; must be ``< acc_rows``.
      wr_accumulate  ``In(1)``: 1 stores ``old + wr_data`` lane by lane, wrapped to
                     ``acc_width`` (two's complement); 0 stores ``wr_data``.
      wr_data        ``In(acc_row_layout)``: the row to store or add.
    Requests take effect in order: ``old`` includes every earlier request, also the one of the
    cycle before. Pipeline: in the request's cycle the row is read (synchronously); in the next
    cycle the sum is formed, from the memory's data or, when the previous request was to the
    same row, from that request's result (a one-deep bypass; older requests have already been
    written, since a synchronous read sees writes from the cycles before), and written.

    Write latency ``W = 2`` (``ACC_WRITE_LATENCY``): the result of a request in cycle ``k`` is in
    the memory from cycle ``k + 2``, so ``rd_en`` in cycle ``k + 2`` or later reads it.

    Read port:
      rd_en    ``In(1)``: read this cycle.
      rd_addr  ``In(range(acc_rows))``: the row; must be ``< acc_rows``.
      rd_data  ``Out(acc_row_layout)``: the row, valid in the cycle after ``rd_en``; it holds its
               value while ``rd_en`` is low.
    Rule for the user: no ``rd_en`` for a row within ``W`` cycles of a write request to it,
    i.e. not in cycles ``k`` and ``k + 1`` after a request in cycle ``k``; such a read returns
    the row without the requests still in flight (those of its own cycle and the one before).

    Throughput: one write request and one read per cycle.
    """

    def __init__(self, config: Config):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        row = acc_row_layout(config)
        super().__init__({
            "wr_valid": In(1),
            "wr_addr": In(range(config.acc_rows)),
            "wr_accumulate": In(1),
            "wr_data": In(row),
            "rd_en": In(1),
            "rd_addr": In(range(config.acc_rows)),
            "rd_data": Out(row),
        })

    @property
    def row_layout(self) -> data.ArrayLayout:
        return acc_row_layout(self.config)

    @property
    def write_latency(self) -> int:
        return ACC_WRITE_LATENCY

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        row = self.row_layout
        aw = cfg.acc_width

        m.submodules.mem = mem = Memory(shape=row, depth=cfg.acc_rows, init=[])
        wp = mem.write_port()
        rmw = mem.read_port()       # not transparent: the bypass below covers the collision
        rd = mem.read_port()

        # Stage 0 (the request's cycle): read the old row; register the request.
        s1_valid = Signal()
        s1_addr = Signal.like(self.wr_addr)
        s1_acc = Signal()
        s1_data = Signal(row)
        m.d.comb += [rmw.addr.eq(self.wr_addr), rmw.en.eq(self.wr_valid)]
        m.d.sync += [
            s1_valid.eq(self.wr_valid),
            s1_addr.eq(self.wr_addr),
            s1_acc.eq(self.wr_accumulate),
            s1_data.eq(self.wr_data),
        ]

        # Stage 1: old row from memory, or the result of the request just before when it went
        # to the same row (its write lands at the edge where our read was sampled).
        last_valid = Signal()
        last_addr = Signal.like(self.wr_addr)
        last_data = Signal(row)
        bypass = last_valid & (last_addr == s1_addr)
        old = Signal(row)
        m.d.comb += old.eq(Mux(bypass, last_data.as_value(), rmw.data.as_value()))
        new = Signal(row)
        for j in range(cfg.cols):
            m.d.comb += new[j].eq(Mux(s1_acc, (old[j] + s1_data[j])[:aw], s1_data[j]))
        m.d.comb += [wp.addr.eq(s1_addr), wp.data.eq(new), wp.en.eq(s1_valid)]
        m.d.sync += [
            last_valid.eq(s1_valid),
            last_addr.eq(s1_addr),
            last_data.eq(new),
        ]

        m.d.comb += [
            rd.addr.eq(self.rd_addr),
            rd.en.eq(self.rd_en),
            self.rd_data.eq(rd.data),
        ]
        return m
