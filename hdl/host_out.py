"""The host-out engine: WRITE_HOST beats, the SYNC marker and the counters."""

import enum

from amaranth.hdl import Array, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .activation import acc_row_layout
from .config import Config
from .isa import COUNTER_BEATS, N_COUNTERS, SYNC_MAGIC, Counter
from .layouts import acc_bits, host_out_layout, ub_bits
from .read_ahead import ReadAhead
from .unified_buffer import ub_row_layout

__all__ = ["HostOutEngine", "HostOutJob"]


class HostOutJob(enum.IntEnum):
    FROM_UB = 0
    FROM_ACC = 1
    SYNC = 2
    COUNTERS = 3


class HostOutEngine(wiring.Component):
    """Produces one instruction's host-out beats (``last`` on the final one).

    Job (``start`` pulse while ``busy`` is low; the job registers, snapshot included, follow
    the inputs in every cycle ``busy`` is low): ``kind`` (``HostOutJob``), ``src``, ``n``,
    ``src_end = src + n`` (precomputed by the caller; the range in its buffer), ``part``.
    FROM_UB: beat lane j = unified-buffer lane ``part*C + j`` sign-extended (0 where that is
    >= R); FROM_ACC: the accumulator row as is; SYNC: one beat, lane 0 ``SYNC_MAGIC``, lane 1
    ``cause``, lane 2 the low 16 bits of the retired counter, both as they were when the job
    started; COUNTERS: ``COUNTER_BEATS`` beats, each counter (snapshot at the start) as
    ``COUNTER_CHUNKS`` 16-bit little-endian chunks in lane 0.
    Rows are read one ahead of the beat that waits on ``host_out`` (synchronous reads), so beats
    leave one per cycle while the host takes them: the first two cycles after ``start`` (SYNC
    and COUNTERS: one cycle after). ``done`` pulses with the final beat. ``lo`` / ``hi``
    (registers) are the job's row range while ``busy``.
    """

    def __init__(self, config: Config):
        self.config = config
        r, c = config.rows, config.cols
        aw = max(ub_bits(config), acc_bits(config))
        nw = max(aw, COUNTER_BEATS.bit_length())
        self._pw = max(1, ((r + c - 1) // c - 1).bit_length())
        super().__init__({
            "start": In(1),
            "kind": In(2),
            "src": In(aw),
            "src_end": In(aw),
            "n": In(nw),
            "part": In(self._pw),
            "busy": Out(1),
            "done": Out(1),
            "reads_ub": Out(1),
            "reads_acc": Out(1),
            "lo": Out(aw),
            "hi": Out(aw),
            "cause": In(4),
            "counters": In(64 * N_COUNTERS),
            "ub_rd_en": Out(1),
            "ub_rd_addr": Out(ub_bits(config)),
            "ub_rd_data": In(ub_row_layout(config)),
            "acc_rd_en": Out(1),
            "acc_rd_addr": Out(acc_bits(config)),
            "acc_rd_data": In(acc_row_layout(config)),
            "host_out": Out(stream.Signature(host_out_layout(config))),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        r, c = cfg.rows, cfg.cols
        kind, src, src_end = Signal(2), Signal.like(self.src), Signal.like(self.src_end)
        n, part = Signal.like(self.n), Signal.like(self.part)
        sent, busy = Signal.like(self.n), Signal()
        left, final = Signal.like(self.n), Signal()    # beats to send; left == 1 (a register)
        snapshot = Signal(64 * N_COUNTERS)
        cause = Signal(4)
        go = self.host_out.valid & self.host_out.ready
        from_mem = kind <= HostOutJob.FROM_ACC
        ahead = ReadAhead(m, active=busy & from_mem, count=n, go=go)
        read = ahead.read
        m.d.comb += [
            self.busy.eq(busy),
            self.reads_ub.eq(busy & (kind == HostOutJob.FROM_UB)),
            self.reads_acc.eq(busy & (kind == HostOutJob.FROM_ACC)),
            self.lo.eq(src), self.hi.eq(src_end),
            self.ub_rd_en.eq(read & (kind == HostOutJob.FROM_UB)),
            self.acc_rd_en.eq(read & (kind == HostOutJob.FROM_ACC)),
            self.ub_rd_addr.eq(src + ahead.issued),
            self.acc_rd_addr.eq(src + ahead.issued),
            self.host_out.valid.eq(Mux(from_mem, ahead.staged, busy)),
            self.host_out.payload.last.eq(final),
        ]

        data = self.host_out.payload.data
        with m.Switch(kind):
            with m.Case(HostOutJob.FROM_UB):
                ub = self.ub_rd_data
                with m.Switch(part):
                    for p in range((r + c - 1) // c):
                        with m.Case(p):
                            for j in range(c):
                                k = p * c + j
                                m.d.comb += data[j].eq(ub[k] if k < r else 0)
            with m.Case(HostOutJob.FROM_ACC):
                m.d.comb += data.eq(self.acc_rd_data)
            with m.Case(HostOutJob.SYNC):
                retired = snapshot[64 * Counter.RETIRED:64 * Counter.RETIRED + 16]
                words = [Const(SYNC_MAGIC, 16), cause, retired]
                for j, w in enumerate(words[:c]):
                    m.d.comb += data[j].eq(w)
            with m.Case(HostOutJob.COUNTERS):
                chunks = Array(snapshot[16 * k:16 * (k + 1)] for k in range(COUNTER_BEATS))
                m.d.comb += data[0].eq(chunks[sent[:(COUNTER_BEATS - 1).bit_length()]])

        with m.If(go):
            m.d.sync += [sent.eq(sent + 1), left.eq(left - 1), final.eq(left == 2)]
            with m.If(final):
                m.d.comb += self.done.eq(1)
                m.d.sync += busy.eq(0)
        with m.If(~busy):      # job fields follow the inputs while idle: the start cycle's stay
            count = Signal.like(self.n)
            with m.Switch(self.kind):
                with m.Case(HostOutJob.SYNC):
                    m.d.comb += count.eq(1)
                with m.Case(HostOutJob.COUNTERS):
                    m.d.comb += count.eq(COUNTER_BEATS)
                with m.Default():
                    m.d.comb += count.eq(self.n)
            m.d.sync += [kind.eq(self.kind), src.eq(self.src), src_end.eq(self.src_end),
                         n.eq(count), left.eq(count), final.eq(count == 1), part.eq(self.part),
                         sent.eq(0), busy.eq(self.start), *ahead.restart(),
                         snapshot.eq(self.counters), cause.eq(self.cause)]
        return m

