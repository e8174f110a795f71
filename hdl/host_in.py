"""The host-in engine: READ_HOST, READ_WEIGHTS and READ_QUANT data, and discarding dropped
data."""

import enum

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .array import weight_layout
from .config import Config
from .isa import QUANT_BEATS
from .layouts import host_in_layout, ub_bits
from .quant_params import quant_write_layout
from .unified_buffer import ub_row_layout

__all__ = ["HostInEngine", "HostInJob", "host_in_count_bits"]


def host_in_count_bits(config: Config) -> int:
    """Bits of a host-in job's beat count: READ_HOST up to ``ub_rows``, READ_WEIGHTS up to
    ``weight_fifo_depth * R``, READ_QUANT up to ``quant_sets * QUANT_BEATS``."""
    return max(config.ub_rows, config.weight_fifo_depth * config.rows,
               config.quant_sets * QUANT_BEATS).bit_length()


class HostInJob(enum.IntEnum):
    READ_HOST = 0
    READ_WEIGHTS = 1
    DISCARD = 2
    READ_QUANT = 3


class HostInEngine(wiring.Component):
    """Moves one instruction's host-in beats to the unified buffer, the weight FIFO or the
    requantization parameter sets.

    Job (``start`` pulse while ``busy`` is low; the job registers follow the fields in every
    idle cycle, so they hold the start cycle's):
      kind    ``HostInJob``.
      dst     READ_HOST: first unified-buffer row; READ_QUANT: first parameter set.
      dst_end READ_HOST: ``dst + count`` (precomputed by the caller; the range in the buffer).
      count   beats expected (READ_HOST: rows; READ_WEIGHTS: tiles * R; READ_QUANT: sets *
              ``QUANT_BEATS``).
    The job starts the cycle after ``start`` (the first beat can be taken then).
    Behaviour: READ_HOST writes beat b's lanes 0..R-1 to row ``dst + b`` (one beat per cycle
    while ``ub_grant`` is high: the write port is shared, and a beat waits while it is low).
    READ_WEIGHTS passes beat b's lanes 0..C-1 to ``w_out`` (back-pressure from the weight FIFO
    stalls ``host_in``). READ_QUANT passes beat b's lanes 0..C-1 to ``quant_w`` as beat
    ``b mod QUANT_BEATS`` of set ``dst + b div QUANT_BEATS`` (``writes_quant`` while it runs).
    DISCARD takes beats up to and including one with ``last``.
    Framing (``framing_error`` pulses): a ``last`` before beat ``count - 1`` ends the job, that
    beat is dropped, and READ_WEIGHTS pads the missing beats with zeros (so the FIFO stays
    tile-aligned); no ``last`` on beat ``count - 1`` discards beats up to the next ``last``.
    ``done`` pulses when a READ_HOST / READ_WEIGHTS / READ_QUANT job ends (not for DISCARD).
    ``stall``: the job waits for ``host_in.valid``. ``ub_lo`` / ``ub_hi`` (registers) are a
    READ_HOST's row range while ``writes_ub``.
    """

    def __init__(self, config: Config):
        self.config = config
        super().__init__({
            "start": In(1),
            "kind": In(2),
            "dst": In(ub_bits(config)),
            "dst_end": In(ub_bits(config)),
            "count": In(host_in_count_bits(config)),
            "busy": Out(1),
            "writes_ub": Out(1),
            "writes_quant": Out(1),
            "ub_lo": Out(ub_bits(config)),
            "ub_hi": Out(ub_bits(config)),
            "done": Out(1),
            "framing_error": Out(1),
            "stall": Out(1),
            "host_in": In(stream.Signature(host_in_layout(config))),
            "w_out": Out(stream.Signature(weight_layout(config))),
            "quant_w": Out(stream.Signature(quant_write_layout(config))),
            "ub_grant": In(1),
            "ub_we": Out(1),
            "ub_addr": Out(ub_bits(config)),
            "ub_data": Out(ub_row_layout(config)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        qset = Signal(range(cfg.quant_sets))         # READ_QUANT: the set and beat written
        qbeat = Signal(range(QUANT_BEATS))
        dst, dst_end = Signal.like(self.dst), Signal.like(self.dst_end)
        b = Signal.like(self.count)
        left = Signal.like(self.count)     # beats still expected
        last_beat = Signal()               # left == 1 (a register)
        beat = self.host_in.payload
        m.d.comb += [
            self.ub_lo.eq(dst),
            self.ub_hi.eq(dst_end),
            self.ub_addr.eq(dst + b),
            self.ub_data.eq(Cat(beat.data[k][:cfg.operand_width] for k in range(cfg.rows))),
            self.w_out.payload.eq(Cat(beat.data[k][:cfg.operand_width] for k in range(cfg.cols))),
            self.quant_w.payload.set.eq(qset),
            self.quant_w.payload.beat.eq(qbeat),
            self.quant_w.payload.data.eq(Cat(beat.data[k][:8] for k in range(cfg.cols))),
        ]
        go = self.host_in.valid & self.host_in.ready

        # The state, one-hot in registers (``busy`` is "not idle"), so that the status flags
        # the controller's issue decision reads (``busy``, ``writes_ub``, ``writes_quant``) are
        # flip-flops: HOST, WEIGHTS, QUANT (the job's data), PAD (zeros for missing weight
        # beats), DISCARD (beats up to a ``last``).
        busy, host, weights, quant, pad, discard = (
            Signal(name=n) for n in ("busy", "host", "weights", "quant", "pad", "discard"))
        m.d.comb += [self.busy.eq(busy), self.writes_ub.eq(host), self.writes_quant.eq(quant)]

        def leave(state, to_discard=False):
            """Leave ``state`` for IDLE (or DISCARD)."""
            m.d.sync += state.eq(0)
            if to_discard:
                m.d.sync += discard.eq(1)
            else:
                m.d.sync += busy.eq(0)

        def count_beat():
            m.d.sync += [b.eq(b + 1), left.eq(left - 1), last_beat.eq(left == 2)]

        def end_of_data(state):
            """The job's last beat went: IDLE if it had ``last``, else discard up to one."""
            m.d.comb += self.done.eq(1)
            with m.If(beat.last):
                leave(state)
            with m.Else():
                m.d.comb += self.framing_error.eq(1)
                leave(state, to_discard=True)

        with m.If(~busy):   # job fields follow the inputs: the start cycle's stay
            m.d.sync += [dst.eq(self.dst), dst_end.eq(self.dst_end),
                         b.eq(0), left.eq(self.count),
                         last_beat.eq(self.count == 1), qset.eq(self.dst), qbeat.eq(0)]
            with m.If(self.start):
                m.d.sync += [busy.eq(1), host.eq(self.kind == HostInJob.READ_HOST),
                             weights.eq(self.kind == HostInJob.READ_WEIGHTS),
                             quant.eq(self.kind == HostInJob.READ_QUANT),
                             discard.eq(self.kind == HostInJob.DISCARD)]
        with m.If(host):
            m.d.comb += [self.host_in.ready.eq(self.ub_grant),
                         self.stall.eq(~self.host_in.valid)]
            with m.If(go):
                count_beat()
                with m.If(beat.last & ~last_beat):
                    m.d.comb += [self.framing_error.eq(1), self.done.eq(1)]
                    leave(host)
                with m.Else():
                    m.d.comb += self.ub_we.eq(1)
                    with m.If(last_beat):
                        end_of_data(host)
        with m.If(weights):
            early = beat.last & ~last_beat
            m.d.comb += [self.stall.eq(~self.host_in.valid),
                         self.host_in.ready.eq(self.w_out.ready | early),
                         self.w_out.valid.eq(self.host_in.valid & ~early)]
            with m.If(go):
                with m.If(early):
                    m.d.comb += self.framing_error.eq(1)
                    m.d.sync += [weights.eq(0), pad.eq(1)]
                with m.Else():
                    count_beat()
                    with m.If(last_beat):
                        end_of_data(weights)
        with m.If(quant):
            early = beat.last & ~last_beat
            m.d.comb += [self.stall.eq(~self.host_in.valid),
                         self.host_in.ready.eq(self.quant_w.ready | early),
                         self.quant_w.valid.eq(self.host_in.valid & ~early)]
            with m.If(go):
                with m.If(early):
                    m.d.comb += [self.framing_error.eq(1), self.done.eq(1)]
                    leave(quant)
                with m.Else():
                    count_beat()
                    m.d.sync += qbeat.eq(Mux(qbeat == QUANT_BEATS - 1, 0, qbeat + 1))
                    with m.If(qbeat == QUANT_BEATS - 1):
                        m.d.sync += qset.eq(qset + 1)
                    with m.If(last_beat):
                        end_of_data(quant)
        with m.If(pad):
            m.d.comb += [self.w_out.valid.eq(1), self.w_out.payload.eq(0)]
            with m.If(self.w_out.ready):
                count_beat()
                with m.If(last_beat):
                    m.d.comb += self.done.eq(1)
                    leave(pad)
        with m.If(discard):
            m.d.comb += [self.host_in.ready.eq(1), self.stall.eq(~self.host_in.valid)]
            with m.If(go & beat.last):
                leave(discard)
        return m
