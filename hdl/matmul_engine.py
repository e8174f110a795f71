"""The matmul engine: feeds unified-buffer rows to the array, tagging each with its
accumulator row."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .array import act_layout
from .config import Config
from .read_ahead import ReadAhead
from .unified_buffer import ub_row_layout

__all__ = ["MatmulEngine", "acc_tag_layout"]


def acc_tag_layout(config: Config) -> data.StructLayout:
    """What travels beside a vector through the array: its accumulator row and mode."""
    return data.StructLayout({"addr": 16, "accumulate": 1})


class MatmulEngine(wiring.Component):
    """Streams rows ``src .. src+n-1`` of the unified buffer into the array.

    Job (``start`` pulse while ``busy`` is low): ``src``, ``dst``, ``n`` (>= 1), ``accumulate``,
    ``new_tile``. The first vector carries ``first = new_tile`` (the array then switches to the
    next weight tile); every vector's transfer into the array outputs ``tag`` (its accumulator
    row ``dst + b`` and ``accumulate``) in the same cycle, for the caller to delay by the
    array's latency.
    Reads are synchronous (``ub_rd_*``, data the next cycle) and one row ahead, so that rows
    enter the array one per cycle while ``act.ready`` holds. ``busy`` ends in the cycle after
    the last row entered the array; ``done`` pulses with that transfer.
    """

    def __init__(self, config: Config):
        self.config = config
        super().__init__({
            "start": In(1),
            "src": In(16),
            "dst": In(16),
            "n": In(17),
            "accumulate": In(1),
            "new_tile": In(1),
            "busy": Out(1),
            "done": Out(1),
            "ub_lo": Out(17),
            "ub_hi": Out(17),
            "acc_lo": Out(17),
            "acc_hi": Out(17),
            "ub_rd_en": Out(1),
            "ub_rd_addr": Out(16),
            "ub_rd_data": In(ub_row_layout(config)),
            "act": Out(stream.Signature(act_layout(config))),
            "tag_valid": Out(1),
            "tag": Out(acc_tag_layout(config)),
        })

    def elaborate(self, platform):
        m = Module()
        src, dst, n = Signal(16), Signal(16), Signal(17)
        acc, new = Signal(), Signal()
        sent = Signal(17)     # rows that entered the array
        busy = Signal()
        go = self.act.valid & self.act.ready
        ahead = ReadAhead(m, active=busy, count=n, go=go)
        m.d.comb += [
            self.busy.eq(busy),
            self.ub_lo.eq(src), self.ub_hi.eq(src + n),
            self.acc_lo.eq(dst), self.acc_hi.eq(dst + n),
            self.ub_rd_en.eq(ahead.read),
            self.ub_rd_addr.eq(src + ahead.issued),
            self.act.valid.eq(ahead.staged),
            self.act.payload.data.eq(self.ub_rd_data),
            self.act.payload.first.eq(new & (sent == 0)),
            self.tag_valid.eq(go),
            self.tag.addr.eq(dst + sent),
            self.tag.accumulate.eq(acc),
        ]
        with m.If(go):
            m.d.sync += sent.eq(sent + 1)
            with m.If(sent + 1 == n):
                m.d.comb += self.done.eq(1)
                m.d.sync += busy.eq(0)
        with m.If(self.start & ~busy):
            m.d.sync += [src.eq(self.src), dst.eq(self.dst), n.eq(self.n),
                         acc.eq(self.accumulate), new.eq(self.new_tile),
                         sent.eq(0), busy.eq(1), *ahead.restart()]
        return m
