"""The host-out engine: WRITE_HOST beats, the SYNC marker and the counters."""

import enum

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.activation import acc_row_layout
from tpugen.hdl.config import Config
from tpugen.hdl.isa import COUNTER_BEATS, SYNC_MAGIC
from tpugen.hdl.layouts import acc_bits, host_out_layout, ub_bits
from tpugen.hdl.read_ahead import ReadAhead
from tpugen.hdl.unified_buffer import ub_row_layout

__all__ = ["HostOutEngine", "HostOutJob"]


class HostOutJob(enum.IntEnum):
    FROM_UB = 0
    FROM_ACC = 1
    SYNC = 2
    COUNTERS = 3


class HostOutEngine(wiring.Component):
    """Produces one instruction's host-out beats (``last`` on the final one).

    Job (``start`` pulse while ``busy`` is low; the job registers follow the inputs in every
    cycle ``busy`` is low, so they hold the start cycle's): ``kind`` (``HostOutJob``), ``src``,
    ``n``, ``src_end = src + n`` (precomputed by the caller; the range in its buffer), ``part``;
    ``cause`` and ``retired`` (the low 16 bits of the retired counter) are taken in the start
    cycle.
    FROM_UB: beat lane j = unified-buffer lane ``part*C + j`` sign-extended (0 where that is
    >= R); FROM_ACC: the accumulator row as is; SYNC: one beat, lane 0 ``SYNC_MAGIC``, lane 1
    ``cause``, lane 2 the low 16 bits of the retired counter, both as they were in the start
    cycle; COUNTERS: ``COUNTER_BEATS`` beats, each counter (as it was in the start cycle) as
    ``COUNTER_CHUNKS`` 16-bit little-endian chunks in lane 0: from the counter snapshot
    (``hdl.counter_snapshot``), which ``counters_busy`` (a COUNTERS job runs: from the cycle
    after the start) holds, so that it keeps the start cycle's counters; the engine moves it on
    with each beat (``snap_next``), sending its ``snap_chunk``.

    The beat offered on ``host_out`` (payload and ``valid``) is a register: rows are read
    (synchronously, ``ub_rd_*`` / ``acc_rd_*``) two ahead of it and formatted into it as it
    frees (``ReadAhead`` with latency 2: the block RAMs' read data goes through the lane
    selection into that register and nowhere else), so beats leave one per cycle while the
    host takes them: the first three cycles after ``start``; SYNC and COUNTERS one cycle after
    (the register is loaded in the start cycle; a COUNTERS beat's lane 0 is the snapshot's
    chunk register, through one gate). ``done`` pulses with the final beat. ``lo`` / ``hi``
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
            "retired": In(16),
            "snap_next": Out(1),
            "snap_chunk": In(16),
            "counters_busy": Out(1),
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
        busy = Signal()
        # busy & kind == FROM_UB / FROM_ACC / COUNTERS, as registers (the controller's issue
        # decision reads them).
        reads_ub, reads_acc, counters = Signal(), Signal(), Signal()
        left, final = Signal.like(self.n), Signal()    # beats to send; left == 1 (a register)
        direct = Signal()              # a SYNC / COUNTERS beat is offered
        go = self.host_out.valid & self.host_out.ready
        from_mem = kind <= HostOutJob.FROM_ACC
        ahead = ReadAhead(m, active=busy & from_mem, count=n, go=go, latency=2)
        read = ahead.read
        beat = Signal.like(self.host_out.payload.data)     # the beat offered
        m.d.comb += [
            self.busy.eq(busy),
            self.reads_ub.eq(reads_ub),
            self.reads_acc.eq(reads_acc),
            self.lo.eq(src), self.hi.eq(src_end),
            self.ub_rd_en.eq(read & (kind == HostOutJob.FROM_UB)),
            self.acc_rd_en.eq(read & (kind == HostOutJob.FROM_ACC)),
            self.ub_rd_addr.eq(src + ahead.issued),
            self.acc_rd_addr.eq(src + ahead.issued),
            self.host_out.valid.eq(ahead.staged | direct),
            self.host_out.payload.data.eq(
                beat.as_value() | Mux(kind == HostOutJob.COUNTERS, self.snap_chunk, 0)),
            self.counters_busy.eq(counters),
            self.snap_next.eq(go & (kind == HostOutJob.COUNTERS)),
            self.host_out.payload.last.eq(final),
        ]

        # A row from memory, as a beat.
        row = Signal.like(beat)
        with m.If(kind == HostOutJob.FROM_UB):
            ub = self.ub_rd_data
            parts = (r + c - 1) // c
            if parts == 1:      # (decode refuses other parts: no select net across the row)
                for j in range(c):
                    m.d.comb += row[j].eq(ub[j] if j < r else 0)
            else:
                with m.Switch(part):
                    for p in range(parts):
                        with m.Case(p):
                            for j in range(c):
                                k = p * c + j
                                m.d.comb += row[j].eq(ub[k] if k < r else 0)
        with m.Else():
            m.d.comb += row.eq(self.acc_rd_data)

        sync = [Const(SYNC_MAGIC, 16), self.cause, self.retired]

        with m.If(go):
            m.d.sync += [left.eq(left - 1), final.eq(left == 2)]
            with m.If(final):
                m.d.comb += self.done.eq(1)
                m.d.sync += [busy.eq(0), direct.eq(0), reads_ub.eq(0), reads_acc.eq(0),
                             counters.eq(0)]
        with m.If(ahead.load):
            m.d.sync += beat.eq(row)
        with m.If(~busy):      # job fields follow the inputs while idle: the start cycle's stay
            count = Signal.like(self.n)
            with m.Switch(self.kind):
                with m.Case(HostOutJob.SYNC):
                    m.d.comb += count.eq(1)
                with m.Case(HostOutJob.COUNTERS):
                    m.d.comb += count.eq(COUNTER_BEATS)
                with m.Default():
                    m.d.comb += count.eq(self.n)
            # The SYNC beat, else 0 (a pure expression: no lane of a combinational signal is
            # left undriven, which simulators of the Verilog see as X).
            lane = cfg.acc_width
            sync_beat = Cat(*(Cat(w, Const(0, lane - len(w))) for w in sync[:c]))
            first = Mux(self.kind == HostOutJob.SYNC, sync_beat, 0)
            m.d.sync += [kind.eq(self.kind), src.eq(self.src), src_end.eq(self.src_end),
                         n.eq(count), left.eq(count), final.eq(count == 1), part.eq(self.part),
                         busy.eq(self.start), *ahead.restart(),
                         reads_ub.eq(self.start & (self.kind == HostOutJob.FROM_UB)),
                         reads_acc.eq(self.start & (self.kind == HostOutJob.FROM_ACC)),
                         counters.eq(self.start & (self.kind == HostOutJob.COUNTERS)),
                         direct.eq(self.start & (self.kind >= HostOutJob.SYNC)),
                         beat.eq(first)]
        return m
