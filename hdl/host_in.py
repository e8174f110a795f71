"""The host-in engine: READ_HOST, READ_WEIGHTS and READ_QUANT data, and discarding dropped
data."""

import enum

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tpugen.hdl.array import weight_layout
from tpugen.hdl.config import Config
from tpugen.hdl.isa import QUANT_BEATS
from tpugen.hdl.layouts import host_in_layout, ub_bits
from tpugen.hdl.quant_params import quant_write_layout
from tpugen.hdl.unified_buffer import ub_row_layout

__all__ = ["HostInEngine", "HostInJob", "host_in_count_bits"]


def host_in_count_bits(config: Config) -> int:
    """Bits of a host-in job's beat count: READ_HOST up to ``ub_rows``, READ_WEIGHTS up to
    ``weight_fifo_depth * R``, READ_QUANT up to ``quant_sets * QUANT_BEATS``, STORE_WEIGHTS
    and LOAD_WEIGHTS up to ``weight_tiles * R``."""
    return max(config.ub_rows, max(config.weight_fifo_depth, config.weight_tiles) * config.rows,
               config.quant_sets * QUANT_BEATS).bit_length()


def host_in_addr_bits(config: Config) -> int:
    """Bits of a host-in job's first row: a UB row, a parameter set or a weight-memory tile."""
    return max(ub_bits(config), config.weight_tiles.bit_length())


class HostInJob(enum.IntEnum):
    READ_HOST = 0
    READ_WEIGHTS = 1
    DISCARD = 2
    READ_QUANT = 3
    STORE_WEIGHTS = 4
    LOAD_WEIGHTS = 5


class HostInEngine(wiring.Component):
    """Moves one instruction's host-in beats to the unified buffer, the weight FIFO, the
    requantization parameter sets or the weight memory, and weight-memory tiles to the weight
    FIFO.

    Job (``start`` pulse while ``busy`` is low; the job registers follow the fields in every
    idle cycle, so they hold the start cycle's):
      kind    ``HostInJob``.
      dst     READ_HOST: first unified-buffer row; READ_QUANT: first parameter set;
              STORE_WEIGHTS / LOAD_WEIGHTS: first weight-memory tile.
      dst_end READ_HOST: ``dst + count`` (precomputed by the caller; the range in the buffer).
      count   beats expected (READ_HOST: rows; READ_WEIGHTS, STORE_WEIGHTS: tiles * R;
              READ_QUANT: sets * ``QUANT_BEATS``); LOAD_WEIGHTS: tile rows to move (tiles * R).
    The job starts the cycle after ``start`` (the first beat can be taken then).
    Behaviour: READ_HOST writes beat b's lanes 0..R-1 to row ``dst + b`` (one beat per cycle
    while ``ub_grant`` is high: the write port is shared, and a beat waits while it is low).
    READ_WEIGHTS passes beat b's lanes 0..C-1 to ``w_out`` (back-pressure from the weight FIFO
    stalls ``host_in``). READ_QUANT passes beat b's lanes 0..C-1 to ``quant_w`` as beat
    ``b mod QUANT_BEATS`` of set ``dst + b div QUANT_BEATS`` (``writes_quant`` while it runs).
    STORE_WEIGHTS writes beat b's lanes 0..C-1 to weight-memory row ``dst * R + b`` (one beat a
    cycle; an early ``last`` leaves the rows after it unchanged, as READ_HOST does).
    LOAD_WEIGHTS reads weight-memory rows ``dst * R ..`` and passes them to ``w_out`` from a
    register: the first is offered three cycles after ``start``, each next one the cycle after
    the one before went (one a cycle while ``w_out.ready`` stays high); no host-in data.
    DISCARD takes beats up to and including one with ``last``.
    Framing (``framing_error`` pulses): a ``last`` before beat ``count - 1`` ends the job, that
    beat is dropped, and READ_WEIGHTS pads the missing beats with zeros (so the FIFO stays
    tile-aligned); no ``last`` on beat ``count - 1`` discards beats up to the next ``last``.
    ``done`` pulses when a job ends (not for DISCARD).
    ``stall``: the job waits for ``host_in.valid``. ``ub_lo`` / ``ub_hi`` (registers) are a
    READ_HOST's row range while ``writes_ub``.
    """

    def __init__(self, config: Config):
        self.config = config
        super().__init__({
            "start": In(1),
            "kind": In(3),
            "dst": In(host_in_addr_bits(config)),
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
        R = cfg.rows
        qset = Signal(range(cfg.quant_sets))         # READ_QUANT: the set and beat written
        qbeat = Signal(range(QUANT_BEATS))
        dst, dst_end = Signal.like(self.dst), Signal.like(self.dst_end)
        # The row of the next beat: READ_HOST dst + beats; STORE / LOAD_WEIGHTS dst * R + rows.
        addr = Signal(max(ub_bits(cfg), (cfg.weight_tiles * R).bit_length()))
        left = Signal.like(self.count)     # beats still expected (LOAD_WEIGHTS: rows to read)
        last_beat = Signal()               # left == 1 (a register)
        beat = self.host_in.payload
        go = self.host_in.valid & self.host_in.ready

        # The state, one-hot in registers (``busy`` is "not idle"), so that the status flags
        # the controller's issue decision reads (``busy``, ``writes_ub``, ``writes_quant``) are
        # flip-flops: HOST, WEIGHTS, QUANT, STORE (the job's data), PAD (zeros for missing
        # weight beats), DISCARD (beats up to a ``last``), LOAD (weight-memory rows out).
        busy, host, weights, quant, store, pad, discard, load = (
            Signal(name=n) for n in ("busy", "host", "weights", "quant", "store", "pad",
                                     "discard", "load"))
        data = host | weights | quant | store        # a state that takes the job's beats
        early = beat.last & ~last_beat               # a ``last`` before the job's last beat
        tile_row = Cat(beat.data[k][:cfg.operand_width] for k in range(cfg.cols))
        m.d.comb += [
            self.busy.eq(busy), self.writes_ub.eq(host), self.writes_quant.eq(quant),
            self.ub_lo.eq(dst), self.ub_hi.eq(dst_end),
            self.ub_addr.eq(addr),
            self.ub_data.eq(Cat(beat.data[k][:cfg.operand_width] for k in range(cfg.rows))),
            self.w_out.payload.eq(tile_row),
            self.quant_w.payload.set.eq(qset),
            self.quant_w.payload.beat.eq(qbeat),
            self.quant_w.payload.data.eq(Cat(beat.data[k][:8] for k in range(cfg.cols))),
            self.stall.eq((data | discard) & ~self.host_in.valid),
            self.host_in.ready.eq(host & self.ub_grant | weights & (self.w_out.ready | early)
                                  | quant & (self.quant_w.ready | early) | discard | store),
            self.w_out.valid.eq(weights & self.host_in.valid & ~early | pad),
            self.quant_w.valid.eq(quant & self.host_in.valid & ~early),
            self.ub_we.eq(host & go & ~early),
        ]
        with m.If(pad):
            m.d.comb += self.w_out.payload.eq(0)
        load_done = self._weight_memory(m, store & go & ~early, addr, tile_row, load, left)

        # A beat of the job: the job's data (not an early ``last``), or a pad beat. The job's
        # last beat went (IDLE if it had ``last``, else DISCARD up to one; a pad's last beat
        # ends the job), or an early ``last`` ended it (READ_WEIGHTS: PAD). (Written out in
        # terms of ``go``, so that each is a gate or two after the transfer.)
        pad_go = pad & self.w_out.ready
        counted = go & data & (last_beat | ~beat.last) | pad_go
        leaving = go & data & (last_beat | beat.last) | pad_go & last_beat
        to_pad = go & weights & beat.last & ~last_beat
        to_discard = go & data & last_beat & ~beat.last
        m.d.comb += [
            self.done.eq(go & (data & last_beat | (host | quant | store) & beat.last)
                         | pad_go & last_beat | load_done),
            self.framing_error.eq(go & data & (last_beat ^ beat.last)),
        ]
        with m.If(counted):
            m.d.sync += [addr.eq(addr + 1), left.eq(left - 1), last_beat.eq(left == 2)]
        with m.If(counted & quant):
            m.d.sync += qbeat.eq(Mux(qbeat == QUANT_BEATS - 1, 0, qbeat + 1))
            with m.If(qbeat == QUANT_BEATS - 1):
                m.d.sync += qset.eq(qset + 1)
        with m.If(leaving):
            m.d.sync += [host.eq(0), weights.eq(0), quant.eq(0), store.eq(0), pad.eq(0)]
            with m.If(to_pad):
                m.d.sync += pad.eq(1)
            with m.Elif(to_discard):
                m.d.sync += discard.eq(1)
            with m.Else():
                m.d.sync += busy.eq(0)
        with m.If(discard & go & beat.last):
            m.d.sync += [discard.eq(0), busy.eq(0)]
        with m.If(load_done):
            m.d.sync += [load.eq(0), busy.eq(0)]
        with m.If(~busy):   # job fields follow the inputs: the start cycle's stay
            # (without a weight memory, STORE / LOAD_WEIGHTS are always dropped: no such jobs)
            wmem = cfg.weight_tiles > 0
            tile = self.kind >= HostInJob.STORE_WEIGHTS
            m.d.sync += [addr.eq(Mux(tile, self.dst * R, self.dst) if wmem else self.dst),
                         dst.eq(self.dst), dst_end.eq(self.dst_end), left.eq(self.count),
                         last_beat.eq(self.count == 1), qset.eq(self.dst), qbeat.eq(0)]
            with m.If(self.start):
                m.d.sync += [busy.eq(1), host.eq(self.kind == HostInJob.READ_HOST),
                             weights.eq(self.kind == HostInJob.READ_WEIGHTS),
                             quant.eq(self.kind == HostInJob.READ_QUANT),
                             discard.eq(self.kind == HostInJob.DISCARD)]
                if wmem:
                    m.d.sync += [store.eq(self.kind == HostInJob.STORE_WEIGHTS),
                                 load.eq(self.kind == HostInJob.LOAD_WEIGHTS)]
        return m

    def _weight_memory(self, m, write, addr, row, load, left):
        """The weight memory (``weight_tiles * R`` rows of C operands, none when 0): STORE
        writes ``row`` at ``addr`` when ``write``; LOAD reads a row a cycle while ``w_out`` can
        take them. A row goes through two registers, so that no logic follows the block RAM's
        read: the read port's own (``on_port``: it holds a row to pass on) and ``fetched``
        (``offered``: the row on ``w_out``); both move on together while ``w_out`` can take a
        row (a stalled row waits in ``fetched``, the port's enable low). Returns ``done``:
        LOAD's last row went."""
        cfg = self.config
        done = Signal()
        if cfg.weight_tiles == 0:
            return done
        m.submodules.wmem = wmem = Memory(shape=weight_layout(cfg).size,
                                          depth=cfg.weight_tiles * cfg.rows, init=[])
        wr = wmem.write_port()
        rd = wmem.read_port()
        on_port, offered = Signal(), Signal()
        fetched = Signal(weight_layout(cfg).size)
        more = Signal()                  # rows left to read (left != 0, a register)
        move = ~offered | self.w_out.ready
        read = load & more & move
        m.d.comb += [
            wr.en.eq(write), wr.addr.eq(addr), wr.data.eq(row),
            rd.en.eq(move), rd.addr.eq(addr),
            done.eq(load & ~more & ~on_port & offered & self.w_out.ready),
        ]
        with m.If(load & offered):
            m.d.comb += [self.w_out.valid.eq(1), self.w_out.payload.eq(fetched)]
        with m.If(move):
            m.d.sync += [fetched.eq(rd.data), offered.eq(on_port & load), on_port.eq(read)]
        with m.If(read):
            m.d.sync += [addr.eq(addr + 1), left.eq(left - 1), more.eq(left != 1)]
        with m.If(~load):
            m.d.sync += more.eq(self.count != 0)
        return done
