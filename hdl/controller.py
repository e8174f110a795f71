"""The controller: decodes the instruction stream and dispatches it to four engines, in order,
with interlocks that keep every valid program's results equal to sequential execution."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .activate_engine import ActivateEngine
from .activation import acc_row_layout, q_row_layout
from .array import act_layout, array_latency, weight_layout
from .config import Config
from .host_in import HostInEngine, HostInJob
from .host_out import HostOutEngine, HostOutJob
from .isa import HOST_DATA_BIT, INSTR_LAYOUT, N_COUNTERS, QUANT_LAYOUT, Cause, Flag, Op
from .layouts import STATUS_LAYOUT, host_in_layout, host_out_layout
from .matmul_engine import MatmulEngine, acc_tag_layout
from .unified_buffer import ub_row_layout

__all__ = ["Controller", "ACC_DRAIN"]

#: Cycles after a MATMUL's last row entered the array until its last accumulator write can be
#: read back: the array's latency plus the accumulator's write latency (2) plus one.
ACC_DRAIN = 3


def _overlap(a_lo, a_hi, b_lo, b_hi):
    return (a_lo < b_hi) & (b_lo < a_hi)


class Controller(wiring.Component):
    """Instruction dispatch, the engines, the sticky error and the counters.

    Dispatch takes one instruction per cycle at most, in order. An instruction waits while its
    engine is busy or while it touches rows that an in-flight instruction touches in a
    conflicting way (read after write, write after read, write after write, per buffer):
      READ_HOST   its UB rows vs. MATMUL, ACTIVATE, WRITE_HOST reading / writing them.
      MATMUL      its UB rows vs. READ_HOST / ACTIVATE writing them; its ACC rows vs.
                  ACTIVATE / WRITE_HOST reading them. MATMULs follow each other through the
                  array in order, so accumulations into the same rows need no interlock.
      ACTIVATE    its ACC rows vs. MATMUL results not yet written (the issuing MATMUL and those
                  still in the array); its UB rows vs. every UB reader and writer; it shares the
                  ACC read port with WRITE_HOST FROM_ACC (one at a time).
      WRITE_HOST  its rows vs. writers of them (and the ACC read port as above).
      SET_QUANT   waits for ACTIVATE to finish (the activation unit reads the parameters live).
      SYNC, READ_COUNTERS  wait for everything to finish.
    Errors (``hdl.isa.Cause``) drop the instruction, record the first cause (sticky until
    ``clear_error``), and when the opcode has ``HOST_DATA_BIT``, discard its host-in data up to
    its ``last`` beat.

    Ports: ``cmd`` (64-bit instruction words), ``host_in``, ``host_out``; the engines' memory
    ports ``ub_*`` (one write, two reads), ``acc_rd_*``; ``act`` (to the array) with ``tag`` /
    ``tag_valid`` (to be delayed by the array latency), ``results`` (a pulse per array output
    vector, for the drain tracking); ``w_out`` (to the weight FIFO); ``q_in`` / ``q_out`` /
    ``params`` (the activation unit); ``status``; ``clear_error``, ``clear_counters``.
    """

    def __init__(self, config: Config):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        super().__init__({
            "cmd": In(stream.Signature(INSTR_LAYOUT)),
            "host_in": In(stream.Signature(host_in_layout(config))),
            "host_out": Out(stream.Signature(host_out_layout(config))),
            "ub_we": Out(1),
            "ub_waddr": Out(16),
            "ub_wdata": Out(ub_row_layout(config)),
            "ub_rd0_en": Out(1),
            "ub_rd0_addr": Out(16),
            "ub_rd0_data": In(ub_row_layout(config)),
            "ub_rd1_en": Out(1),
            "ub_rd1_addr": Out(16),
            "ub_rd1_data": In(ub_row_layout(config)),
            "acc_rd_en": Out(1),
            "acc_rd_addr": Out(16),
            "acc_rd_data": In(acc_row_layout(config)),
            "act": Out(stream.Signature(act_layout(config))),
            "tag_valid": Out(1),
            "tag": Out(acc_tag_layout(config)),
            "results": In(1),
            "w_out": Out(stream.Signature(weight_layout(config))),
            "q_in": Out(stream.Signature(acc_row_layout(config))),
            "q_out": In(stream.Signature(q_row_layout(config))),
            "params": Out(QUANT_LAYOUT, init={"mult": 1}),  # the ISA's values at reset
            "status": Out(STATUS_LAYOUT),
            "clear_error": In(1),
            "clear_counters": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        r = cfg.rows
        m.submodules.hi = hi = HostInEngine(cfg)
        m.submodules.mm = mm = MatmulEngine(cfg)
        m.submodules.av = av = ActivateEngine(cfg)
        m.submodules.ho = ho = HostOutEngine(cfg)

        # Engines to the outside.
        wiring.connect(m, wiring.flipped(self.host_in), hi.host_in)
        wiring.connect(m, hi.w_out, wiring.flipped(self.w_out))
        wiring.connect(m, mm.act, wiring.flipped(self.act))
        wiring.connect(m, av.act_i, wiring.flipped(self.q_in))
        wiring.connect(m, wiring.flipped(self.q_out), av.act_o)
        wiring.connect(m, ho.host_out, wiring.flipped(self.host_out))
        m.d.comb += [
            self.ub_we.eq(hi.ub_we | av.ub_we),
            self.ub_waddr.eq(hi.ub_addr),
            self.ub_wdata.eq(hi.ub_data),
            av.ub_grant.eq(~hi.ub_we),
            self.ub_rd0_en.eq(mm.ub_rd_en),
            self.ub_rd0_addr.eq(mm.ub_rd_addr),
            mm.ub_rd_data.eq(self.ub_rd0_data),
            self.ub_rd1_en.eq(ho.ub_rd_en),
            self.ub_rd1_addr.eq(ho.ub_rd_addr),
            ho.ub_rd_data.eq(self.ub_rd1_data),
            self.acc_rd_en.eq(av.acc_rd_en | ho.acc_rd_en),
            self.acc_rd_addr.eq(av.acc_rd_addr),
            av.acc_rd_data.eq(self.acc_rd_data),
            ho.acc_rd_data.eq(self.acc_rd_data),
            self.tag_valid.eq(mm.tag_valid),
            self.tag.eq(mm.tag),
        ]
        with m.If(~hi.ub_we):
            m.d.comb += [self.ub_waddr.eq(av.ub_addr), self.ub_wdata.eq(av.ub_data)]
        with m.If(ho.acc_rd_en):
            m.d.comb += self.acc_rd_addr.eq(ho.acc_rd_addr)

        # MATMUL results still on their way to the accumulators: the issuing MATMUL's rows, and
        # the union of finished MATMULs' rows until ACC_DRAIN + latency cycles after the last.
        drain_cycles = array_latency(cfg) + ACC_DRAIN
        drain = Signal(range(drain_cycles + 1))
        drain_lo, drain_hi = Signal(17), Signal(17)
        in_array = Signal(range(array_latency(cfg) + 2))
        with m.If(mm.done):
            m.d.sync += drain.eq(drain_cycles)
            with m.If(drain == 0):
                m.d.sync += [drain_lo.eq(mm.acc_lo), drain_hi.eq(mm.acc_hi)]
            with m.Else():
                m.d.sync += [drain_lo.eq(_min(drain_lo, mm.acc_lo)),
                             drain_hi.eq(_max(drain_hi, mm.acc_hi))]
        with m.Elif(drain != 0):
            m.d.sync += drain.eq(drain - 1)
        m.d.sync += in_array.eq(in_array + mm.tag_valid - self.results)

        def acc_pending(lo, hi_):
            return ((mm.busy & _overlap(lo, hi_, mm.acc_lo, mm.acc_hi))
                    | ((drain != 0) & _overlap(lo, hi_, drain_lo, drain_hi)))

        # Decode.
        word = self.cmd.payload
        op, flags = word.op, word.flags
        mem, quant = word.body.mem, word.body.quant
        src, dst, n, part = mem.src, mem.dst, mem.n, mem.part
        src_end = Signal(17)
        dst_end = Signal(17)
        m.d.comb += [src_end.eq(src + n), dst_end.eq(dst + n)]
        ub_rows, acc_rows = cfg.ub_rows, cfg.acc_rows
        known = Signal()
        m.d.comb += known.eq(0)
        with m.Switch(op):
            for o in Op:
                with m.Case(o):
                    m.d.comb += known.eq(1)

        tiles_out = Signal(range(cfg.weight_fifo_depth + 1))  # requested, not yet taken
        tile_taken = Signal()                                  # a tile was ever taken
        new_tile = (flags & Flag.NEW_TILE) != 0
        from_acc = (flags & Flag.FROM_ACC) != 0
        bad_range = Signal()
        no_tile = Signal()
        overflow = Signal()
        with m.Switch(op):
            with m.Case(Op.MATMUL):
                m.d.comb += [
                    bad_range.eq((n == 0) | (src_end > ub_rows) | (dst_end > acc_rows)),
                    no_tile.eq(Mux(new_tile, tiles_out == 0, ~tile_taken)),
                ]
            with m.Case(Op.ACTIVATE):
                m.d.comb += bad_range.eq((n == 0) | (src_end > acc_rows) | (dst_end > ub_rows)
                                         | ((part != 0) & (part * r >= cfg.cols)))
            with m.Case(Op.WRITE_HOST):
                with m.If(from_acc):
                    m.d.comb += bad_range.eq((n == 0) | (src_end > acc_rows) | (part != 0))
                with m.Else():
                    m.d.comb += bad_range.eq((n == 0) | (src_end > ub_rows)
                                             | ((part != 0) & (part * cfg.cols >= r)))
            with m.Case(Op.READ_HOST):
                m.d.comb += bad_range.eq((n == 0) | (dst_end > ub_rows))
            with m.Case(Op.READ_WEIGHTS):
                m.d.comb += [bad_range.eq(n == 0),
                             overflow.eq(tiles_out + n > cfg.weight_fifo_depth)]
        cause = Signal(4)
        with m.If(~known):
            m.d.comb += cause.eq(Cause.BAD_OPCODE)
        with m.Elif(bad_range):
            m.d.comb += cause.eq(Cause.OUT_OF_RANGE)
        with m.Elif(no_tile):
            m.d.comb += cause.eq(Cause.NO_TILE)
        with m.Elif(overflow):
            m.d.comb += cause.eq(Cause.WEIGHT_OVERFLOW)
        host_data = (op & HOST_DATA_BIT) != 0

        # Interlocks: can this instruction go this cycle?
        ub_wr_busy = lambda lo, hi_: (  # noqa: E731
            (hi.writes_ub & _overlap(lo, hi_, hi.ub_lo, hi.ub_hi))
            | (av.busy & _overlap(lo, hi_, av.ub_lo, av.ub_hi)))
        ub_rd_busy = lambda lo, hi_: (  # noqa: E731
            (mm.busy & _overlap(lo, hi_, mm.ub_lo, mm.ub_hi))
            | (ho.reads_ub & _overlap(lo, hi_, ho.lo, ho.hi)))
        all_idle = (~hi.busy & ~mm.busy & ~av.busy & ~ho.busy & (drain == 0) & (in_array == 0))
        can_go = Signal()
        with m.If(cause != 0):
            m.d.comb += can_go.eq(~host_data | ~hi.busy)
        with m.Else():
            with m.Switch(op):
                with m.Case(Op.READ_HOST):
                    m.d.comb += can_go.eq(~hi.busy & ~ub_rd_busy(dst, dst_end)
                                          & ~ub_wr_busy(dst, dst_end))
                with m.Case(Op.READ_WEIGHTS):
                    m.d.comb += can_go.eq(~hi.busy)
                with m.Case(Op.MATMUL):
                    m.d.comb += can_go.eq(
                        ~mm.busy & ~ub_wr_busy(src, src_end)
                        & ~(av.busy & _overlap(dst, dst_end, av.acc_lo, av.acc_hi))
                        & ~(ho.reads_acc & _overlap(dst, dst_end, ho.lo, ho.hi)))
                with m.Case(Op.ACTIVATE):
                    m.d.comb += can_go.eq(
                        ~av.busy & ~ho.reads_acc & ~acc_pending(src, src_end)
                        & ~ub_wr_busy(dst, dst_end) & ~ub_rd_busy(dst, dst_end))
                with m.Case(Op.WRITE_HOST):
                    with m.If(from_acc):
                        m.d.comb += can_go.eq(~ho.busy & ~av.busy & ~acc_pending(src, src_end))
                    with m.Else():
                        m.d.comb += can_go.eq(~ho.busy & ~ub_wr_busy(src, src_end))
                with m.Case(Op.SET_QUANT):
                    m.d.comb += can_go.eq(~av.busy)
                with m.Case(Op.SYNC, Op.READ_COUNTERS):
                    m.d.comb += can_go.eq(all_idle)
                with m.Default():
                    m.d.comb += can_go.eq(1)
        m.d.comb += self.cmd.ready.eq(can_go)
        issue = self.cmd.valid & can_go
        ok = issue & (cause == 0)

        # Issue.
        m.d.comb += [
            hi.dst.eq(dst), hi.count.eq(Mux(op == Op.READ_WEIGHTS, n * r, n)),
            hi.kind.eq(Mux(op == Op.READ_WEIGHTS, HostInJob.READ_WEIGHTS, HostInJob.READ_HOST)),
            mm.src.eq(src), mm.dst.eq(dst), mm.n.eq(n),
            mm.accumulate.eq((flags & Flag.ACCUMULATE) != 0), mm.new_tile.eq(new_tile),
            av.src.eq(src), av.dst.eq(dst), av.n.eq(n), av.part.eq(part),
            ho.src.eq(src), ho.n.eq(n), ho.part.eq(part),
        ]
        with m.If(issue & (cause != 0) & host_data):
            m.d.comb += [hi.start.eq(1), hi.kind.eq(HostInJob.DISCARD)]
        with m.If(ok):
            with m.Switch(op):
                with m.Case(Op.READ_HOST, Op.READ_WEIGHTS):
                    m.d.comb += hi.start.eq(1)
                with m.Case(Op.MATMUL):
                    m.d.comb += mm.start.eq(1)
                with m.Case(Op.ACTIVATE):
                    m.d.comb += av.start.eq(1)
                with m.Case(Op.WRITE_HOST):
                    m.d.comb += [ho.start.eq(1),
                                 ho.kind.eq(Mux(from_acc, HostOutJob.FROM_ACC,
                                                 HostOutJob.FROM_UB))]
                with m.Case(Op.SYNC):
                    m.d.comb += [ho.start.eq(1), ho.kind.eq(HostOutJob.SYNC)]
                with m.Case(Op.READ_COUNTERS):
                    m.d.comb += [ho.start.eq(1), ho.kind.eq(HostOutJob.COUNTERS)]
                with m.Case(Op.SET_QUANT):
                    m.d.sync += self.params.eq(quant)

        # Weight tiles in program order.
        took = ok & (op == Op.MATMUL) & new_tile
        asked = ok & (op == Op.READ_WEIGHTS)
        m.d.sync += tiles_out.eq(tiles_out + Mux(asked, n, 0) - took)
        with m.If(took):
            m.d.sync += tile_taken.eq(1)

        # Sticky error.
        err_cause = Signal(4)
        with m.If(self.clear_error):
            m.d.sync += err_cause.eq(0)
        with m.Elif(err_cause == 0):
            with m.If(issue & (cause != 0)):
                m.d.sync += err_cause.eq(cause)
            with m.Elif(hi.framing_error):
                m.d.sync += err_cause.eq(Cause.HOST_FRAMING)

        # Counters.
        retired_now = Signal(range(6))
        simple = ok & ((op == Op.NOP) | (op == Op.SET_QUANT))
        m.d.comb += retired_now.eq((issue & (cause != 0)) + simple + hi.done + mm.done
                                   + av.done + ho.done)
        counters = {
            "cycles": Const(1),
            "array_busy": self.act.valid & self.act.ready,
            "host_in_stall": hi.stall,
            "host_out_stall": self.host_out.valid & ~self.host_out.ready,
            "retired": retired_now,
        }
        for name, inc in counters.items():
            field = getattr(self.status, name)
            with m.If(self.clear_counters):
                m.d.sync += field.eq(0)
            with m.Else():
                m.d.sync += field.eq(field + inc)
        m.d.comb += [
            self.status.busy.eq(self.cmd.valid | ~all_idle),
            self.status.error.eq(err_cause != 0),
            self.status.cause.eq(err_cause),
            ho.cause.eq(err_cause),
            ho.counters.eq(self.status.as_value()[6:6 + 64 * N_COUNTERS]),
        ]
        return m



def _min(a, b):
    return Mux(a < b, a, b)


def _max(a, b):
    return Mux(a > b, a, b)
