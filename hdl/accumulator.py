"""The accumulator buffer: rows of C sums, overwritten or accumulated into at one row per cycle."""

from amaranth.hdl import Const, Instance, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tpugen.hdl.activation import acc_row_layout
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.dsp import check_dsp_family
from tpugen.hdl.fp32_add import fp32_add

__all__ = ["AccumulatorBuffer", "ACC_DATA_DELAY", "ACC_WRITE_LATENCY", "ACC_REPEAT_GAP"]

#: Cycles from a write request (row, mode) to its data on ``wr_data``.
ACC_DATA_DELAY = 2
#: Cycles from a write request to the first cycle in which ``rd_en`` reads the new value.
ACC_WRITE_LATENCY = 3
#: Requests to the same row must be at least this many cycles apart.
ACC_REPEAT_GAP = 3


class AccumulatorBuffer(wiring.Component):
    """``acc_rows`` rows of C ``acc_width`` sums (``acc_row_layout``), zero at reset.

    Storage is one ``lib.memory.Memory`` (one write port, two synchronous read ports: one for
    the read-modify-write, one for ``rd_*``), initialised to zero. Its read ports never read a
    row in the cycle it is written (``no_rw_check``: the block RAMs need no collision logic):
    the rules below see to that.

    Write port (no back-pressure; a request may come in every cycle, to any row, in any order).
    A request is made in one cycle, its data comes ``ACC_DATA_DELAY`` = 2 cycles later (the row
    is read ahead of the data):
      wr_valid       ``In(1)``: a request this cycle.
      wr_addr        ``In(range(acc_rows))``: its row; must be ``< acc_rows``.
      wr_accumulate  ``In(1)``: 1 stores ``old + data`` lane by lane, wrapped to ``acc_width``
                     (two's complement; float operand types: the binary32 add of
                     ``hdl.fp32_add``); 0 stores ``data``.
      wr_data        ``In(acc_row_layout)``: the data of the request made two cycles before.
    Rule for the user: requests to the same row at least ``ACC_REPEAT_GAP`` = 3 cycles apart
    (the core's matmul engine leaves more between MATMULs, whose rows are distinct within one).
    Pipeline of a request made in cycle ``k``: in cycle ``k`` the row is read; in cycle ``k + 1``
    the read data is registered (``old``; 0 for an overwrite, by the register's reset); in
    cycle ``k + 2`` the sum ``old + wr_data`` is formed and written. So the memory's read data
    goes only into a register, and the adder sits between registers and the write port; there
    is no bypass (the rule: the request before to the row has been written when it is read).
    With ``family == "ice40"`` (integer operands) the row is read in cycle ``k + 1`` instead and
    its read data goes straight into the adder in cycle ``k + 2``, built from ``SB_LUT4`` /
    ``SB_CARRY`` cells whose sum LUTs also do the overwrite (sum = data when not
    accumulating; the carry chain's result is then ignored): no ``old`` register, one logic cell
    per bit. The timing above is the same.

    Write latency ``W = 3`` (``ACC_WRITE_LATENCY``): the result of a request in cycle ``k`` is in
    the memory from cycle ``k + 3``, so ``rd_en`` in cycle ``k + 3`` or later reads it.

    Read port:
      rd_en    ``In(1)``: read this cycle.
      rd_addr  ``In(range(acc_rows))``: the row; must be ``< acc_rows``.
      rd_data  ``Out(acc_row_layout)``: the row, valid in the cycle after ``rd_en`` (the block
               RAM's own read register); it holds its value while ``rd_en`` is low.
    Rule for the user: no ``rd_en`` for a row within ``W`` cycles of a write request to it,
    i.e. not in cycles ``k`` .. ``k + 2`` after a request in cycle ``k``.

    Breaking a rule gives undefined data in hardware (the simulation returns the row without
    the requests still in flight).

    Throughput: one write request and one read per cycle.
    """

    def __init__(self, config: Config, *, family=None):
        check_config(config)
        self.config = config
        self.family = check_dsp_family(family)
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

    @property
    def data_delay(self) -> int:
        return ACC_DATA_DELAY

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        row = self.row_layout
        aw = cfg.acc_width

        m.submodules.mem = mem = Memory(shape=row, depth=cfg.acc_rows, init=[],
                                        attrs={"no_rw_check": 1})
        wp = mem.write_port()
        rmw = mem.read_port()
        rd = mem.read_port()

        # Cycle k: read the row. Cycle k + 1: register it (0 for an overwrite). Cycle k + 2:
        # add and write. (p1, p2: the request of the cycle before, of two cycles before.)
        p1_valid, p1_acc, p2_valid = Signal(), Signal(), Signal()
        p1_addr, p2_addr = Signal.like(self.wr_addr), Signal.like(self.wr_addr)
        m.d.sync += [
            p1_valid.eq(self.wr_valid), p1_addr.eq(self.wr_addr), p1_acc.eq(self.wr_accumulate),
            p2_valid.eq(p1_valid), p2_addr.eq(p1_addr),
        ]
        new = Signal(row)
        if self.family == "ice40" and not cfg.operand_type.is_float:
            # Cycle k + 1: read the row; cycle k + 2: add (or pass the data) and write.
            p2_acc = Signal()
            m.d.sync += p2_acc.eq(p1_acc)
            m.d.comb += [rmw.addr.eq(p1_addr), rmw.en.eq(p1_valid)]
            for j in range(cfg.cols):
                m.d.comb += new[j].eq(_ice40_add_or_pass(m, rmw.data[j], self.wr_data[j], p2_acc,
                                                          f"acc_add_{j}"))
            m.d.comb += [wp.addr.eq(p2_addr), wp.data.eq(new), wp.en.eq(p2_valid)]
            m.d.comb += [rd.addr.eq(self.rd_addr), rd.en.eq(self.rd_en),
                         self.rd_data.eq(rd.data)]
            return m
        m.d.comb += [rmw.addr.eq(self.wr_addr), rmw.en.eq(self.wr_valid)]
        old = Signal(row)
        m.d.sync += old.eq(Mux(p1_acc, rmw.data.as_value(), 0))
        if cfg.operand_type.is_float:
            # binary32 sums: an overwrite stores the data as it is (a -0.0 stays -0.0).
            p2_acc = Signal()
            m.d.sync += p2_acc.eq(p1_acc)
            for j in range(cfg.cols):
                m.d.comb += new[j].eq(Mux(p2_acc, fp32_add(m, old[j], self.wr_data[j]),
                                          self.wr_data[j]))
        else:
            for j in range(cfg.cols):
                m.d.comb += new[j].eq((old[j] + self.wr_data[j])[:aw])
        m.d.comb += [wp.addr.eq(p2_addr), wp.data.eq(new), wp.en.eq(p2_valid)]

        m.d.comb += [
            rd.addr.eq(self.rd_addr),
            rd.en.eq(self.rd_en),
            self.rd_data.eq(rd.data),
        ]
        return m


#: ``SB_LUT4`` truth table of the sum bit with the overwrite folded in: inputs I0 = accumulate,
#: I1 = old, I2 = data, I3 = carry in; output old ^ data ^ carry when accumulating, else data.
_ADD_OR_PASS = sum(1 << k for k in range(16)
                   if ((((k >> 1) ^ (k >> 2) ^ (k >> 3)) & 1) if k & 1 else (k >> 2) & 1))


def _ice40_add_or_pass(m, old, data, accumulate, name):
    """``old + data`` (wrapped to their width) when ``accumulate``, else ``data``: an iCE40
    carry chain of ``SB_LUT4`` + ``SB_CARRY`` cells (one logic cell per bit). The carries are
    those of ``old + data`` either way; the sum LUTs ignore them (and ``old``) when not
    accumulating."""
    width = len(old)
    out = Signal(width, name=f"{name}_sum")
    carry = Signal(width + 1, name=f"{name}_carry")
    m.d.comb += carry[0].eq(0)
    for i in range(width):
        m.submodules[f"{name}_lut{i}"] = Instance(
            "SB_LUT4", p_LUT_INIT=Const(_ADD_OR_PASS, 16),
            i_I0=accumulate, i_I1=old[i], i_I2=data[i], i_I3=carry[i], o_O=out[i])
        if i + 1 < width:
            m.submodules[f"{name}_carry{i}"] = Instance(
                "SB_CARRY", i_I0=old[i], i_I1=data[i], i_CI=carry[i], o_CO=carry[i + 1])
    return out
