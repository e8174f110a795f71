"""The activate engine: accumulator rows through the activation unit into the unified buffer."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.activation import acc_row_layout, act_in_layout, q_row_layout
from tpugen.hdl.config import Config
from tpugen.hdl.layouts import acc_bits, ub_bits
from tpugen.hdl.read_ahead import ReadAhead
from tpugen.hdl.unified_buffer import ub_row_layout

__all__ = ["ActivateEngine"]


class ActivateEngine(wiring.Component):
    """Runs one ACTIVATE: rows ``src .. src+n-1`` of the accumulators through the activation
    unit (``act_i`` / ``act_o``) into unified-buffer rows ``dst ..``.

    Job (``start`` pulse while ``busy`` is low; the job registers follow the job inputs in every
    cycle ``busy`` is low): ``src``, ``dst``, ``n`` (>= 1), ``part``, ``qset`` (the parameter
    set every row of the job goes through the unit with), and
    the range ends ``src_end = src + n``, ``dst_end = dst + n`` (precomputed by the caller;
    every range in its buffer). The first row enters the unit two cycles after ``start``.
    Unified-buffer lane ``k`` of a result row is activation lane ``part*R + k`` (zero where that
    is >= C). The write port is shared: a result waits while ``ub_grant`` is low. ``busy`` ends
    in the cycle after the last row's write; ``done`` pulses with it. ``acc_lo`` / ``acc_hi``
    and ``ub_lo`` / ``ub_hi`` (registers) are the job's row ranges while ``busy``.
    """

    def __init__(self, config: Config):
        self.config = config
        uw, xw = ub_bits(config), acc_bits(config)
        nw = min(config.ub_rows, config.acc_rows).bit_length()
        self._pw = max(1, ((config.cols + config.rows - 1) // config.rows - 1).bit_length())
        super().__init__({
            "start": In(1),
            "src": In(xw),
            "src_end": In(xw),
            "dst": In(uw),
            "dst_end": In(uw),
            "n": In(nw),
            "part": In(self._pw),
            "qset": In(range(config.quant_sets)),
            "busy": Out(1),
            "done": Out(1),
            "acc_lo": Out(xw),
            "acc_hi": Out(xw),
            "ub_lo": Out(uw),
            "ub_hi": Out(uw),
            "acc_rd_en": Out(1),
            "acc_rd_addr": Out(xw),
            "acc_rd_data": In(acc_row_layout(config)),
            "act_i": Out(stream.Signature(act_in_layout(config))),
            "act_o": In(stream.Signature(q_row_layout(config))),
            "ub_grant": In(1),
            "ub_we": Out(1),
            "ub_addr": Out(uw),
            "ub_data": Out(ub_row_layout(config)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        r, c, ow = cfg.rows, cfg.cols, cfg.operand_width
        src, src_end = Signal.like(self.src), Signal.like(self.src_end)
        dst, dst_end = Signal.like(self.dst), Signal.like(self.dst_end)
        n, part = Signal.like(self.n), Signal.like(self.part)
        qset = Signal.like(self.qset)
        written, busy = Signal.like(self.n), Signal()
        left, final = Signal.like(self.n), Signal()    # rows to write; left == 1 (a register)
        go_in = self.act_i.valid & self.act_i.ready
        ahead = ReadAhead(m, active=busy, count=n, go=go_in)
        m.d.comb += [
            self.busy.eq(busy),
            self.acc_lo.eq(src), self.acc_hi.eq(src_end),
            self.ub_lo.eq(dst), self.ub_hi.eq(dst_end),
            self.acc_rd_en.eq(ahead.read),
            self.acc_rd_addr.eq(src + ahead.issued),
            self.act_i.valid.eq(ahead.staged),
            self.act_i.payload.row.eq(self.acc_rd_data),
            self.act_i.payload.qset.eq(qset),
            self.act_o.ready.eq(busy & self.ub_grant),
            self.ub_addr.eq(dst + written),
        ]

        # Lane selection: part p maps activation lanes p*R .. p*R+R-1 onto the R UB lanes.
        q = self.act_o.payload
        with m.Switch(part):
            for p in range((c + r - 1) // r):
                lanes = [q[p * r + k] if p * r + k < c else Const(0, ow) for k in range(r)]
                with m.Case(p):
                    m.d.comb += self.ub_data.eq(Cat(*lanes))
        go_out = self.act_o.valid & self.act_o.ready
        with m.If(go_out):
            m.d.comb += self.ub_we.eq(1)
            m.d.sync += [written.eq(written + 1), left.eq(left - 1), final.eq(left == 2)]
            with m.If(final):
                m.d.comb += self.done.eq(1)
                m.d.sync += busy.eq(0)
        with m.If(~busy):      # job fields follow the inputs while idle: the start cycle's stay
            m.d.sync += [src.eq(self.src), src_end.eq(self.src_end), dst.eq(self.dst),
                         dst_end.eq(self.dst_end), n.eq(self.n), part.eq(self.part),
                         qset.eq(self.qset),
                         written.eq(0), left.eq(self.n), final.eq(self.n == 1),
                         busy.eq(self.start), *ahead.restart()]
        return m
