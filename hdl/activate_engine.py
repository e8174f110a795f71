"""The activate engine: accumulator rows through the activation unit into the unified buffer."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .activation import acc_row_layout, q_row_layout
from .config import Config
from .read_ahead import ReadAhead
from .unified_buffer import ub_row_layout

__all__ = ["ActivateEngine"]


class ActivateEngine(wiring.Component):
    """Runs one ACTIVATE: rows ``src .. src+n-1`` of the accumulators through the activation
    unit (``act_i`` / ``act_o``) into unified-buffer rows ``dst ..``.

    Unified-buffer lane ``k`` of a result row is activation lane ``part*R + k`` (zero where that
    is >= C). The write port is shared: a result waits while ``ub_grant`` is low. ``busy`` ends
    in the cycle after the last row's write; ``done`` pulses with it.
    """

    def __init__(self, config: Config):
        self.config = config
        super().__init__({
            "start": In(1),
            "src": In(16),
            "dst": In(16),
            "n": In(17),
            "part": In(8),
            "busy": Out(1),
            "done": Out(1),
            "acc_lo": Out(17),
            "acc_hi": Out(17),
            "ub_lo": Out(17),
            "ub_hi": Out(17),
            "acc_rd_en": Out(1),
            "acc_rd_addr": Out(16),
            "acc_rd_data": In(acc_row_layout(config)),
            "act_i": Out(stream.Signature(acc_row_layout(config))),
            "act_o": In(stream.Signature(q_row_layout(config))),
            "ub_grant": In(1),
            "ub_we": Out(1),
            "ub_addr": Out(16),
            "ub_data": Out(ub_row_layout(config)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        r, c, ow = cfg.rows, cfg.cols, cfg.operand_width
        src, dst, n, part = Signal(16), Signal(16), Signal(17), Signal(8)
        written, busy = Signal(17), Signal()
        go_in = self.act_i.valid & self.act_i.ready
        ahead = ReadAhead(m, active=busy, count=n, go=go_in)
        m.d.comb += [
            self.busy.eq(busy),
            self.acc_lo.eq(src), self.acc_hi.eq(src + n),
            self.ub_lo.eq(dst), self.ub_hi.eq(dst + n),
            self.acc_rd_en.eq(ahead.read),
            self.acc_rd_addr.eq(src + ahead.issued),
            self.act_i.valid.eq(ahead.staged),
            self.act_i.payload.eq(self.acc_rd_data),
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
            m.d.sync += written.eq(written + 1)
            with m.If(written + 1 == n):
                m.d.comb += self.done.eq(1)
                m.d.sync += busy.eq(0)
        with m.If(self.start & ~busy):
            m.d.sync += [src.eq(self.src), dst.eq(self.dst), n.eq(self.n), part.eq(self.part),
                         written.eq(0), busy.eq(1), *ahead.restart()]
        return m
