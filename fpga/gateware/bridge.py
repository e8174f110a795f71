"""The core bridge: PROGRAM and CONTROL frames from the link endpoint to the core's ports.

``Bridge`` sits between ``fpga.link.LinkEndpoint`` (its ``req`` / ``rsp`` byte streams) and
``hdl.core.Core`` (its whole bus, ``hdl.core.core_signature``, and a core reset). The payload
formats and their sizes are in ``fpga.protocol`` (records, RESULT header, CONTROL bits);
``fpga.records``, ``fpga.plan`` and ``fpga.board_link`` are the host side.

Its parts: the frame sequencer (here: the request parser of PROGRAM records, the wait for the
core, the CONTROL handler), ``bridge_stage.RecordStage`` (the record register, the one-entry
stage to the core), ``bridge_stage.StuckDetector`` (records the core can never take),
``bridge_collect.BeatCollector`` (host-out beats into the reply buffer) and
``bridge_reply.ReplyBuilder`` (the reply).
"""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tpugen.fpga.gateware.bridge_collect import BeatCollector
from tpugen.fpga.gateware.bridge_reply import ReplyBuilder
from tpugen.fpga.gateware.bridge_stage import STUCK_CYCLES, RecordStage, StuckDetector
from tpugen.fpga.gateware.framing import REPLY_LAYOUT, REQUEST_LAYOUT
from tpugen.fpga.protocol import (
    CTRL_CLEAR_COUNTERS,
    CTRL_CLEAR_ERROR,
    CTRL_RESET,
    DEFAULT_MAX_PAYLOAD,
    MAX_LENGTH,
    REC_BEAT,
    REC_LAST,
    REC_PBEAT,
    REC_PLAST,
    REC_WORD,
    REC_WORD_SIZE,
    RESULT_HEADER_SIZE,
    BridgeError,
    ErrorCode,
    FrameType,
    default_max_reply,
    reply_capacity,
    result_beat_size,
)
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.core import core_signature

__all__ = ["Bridge", "check_max_reply", "STUCK_CYCLES"]


def check_max_reply(config: Config, max_reply) -> int:
    """Validate a bridge's ``max_reply`` for ``config``: it must hold the RESULT header and one
    host-out beat (and fit the 16-bit length field)."""
    max_reply = check_int("max_reply", max_reply)
    least = RESULT_HEADER_SIZE + result_beat_size(config)
    if not least <= max_reply <= MAX_LENGTH:
        raise ValueError(f"max_reply must be in {least}..{MAX_LENGTH} (the RESULT header "
                         f"and one beat of C={config.cols} lanes), not {max_reply!r}")
    return max_reply


class Bridge(wiring.Component):
    """Runs PROGRAM frames on the core and answers CONTROL frames (see ``fpga.protocol``).

    Parameters:
      config     the core's ``hdl.config.Config``.
      max_reply  the link's longest reply (``LinkEndpoint.max_reply``; default
                 ``protocol.default_max_reply`` for ``DEFAULT_MAX_PAYLOAD``): RESULT replies are
                 at most this long; it must hold the ``RESULT_HEADER_SIZE``-byte header and at
                 least one beat. The bridge buffers up to ``reply_capacity(config, max_reply)``
                 beats (a byte-wide memory), because the reply's header (beat count, counters)
                 is only known when the frame is done and goes out first; the reply carries its
                 ``length`` on every beat (the link sends it as it comes).
      narrow_beats  RESULT beats go narrow when every lane fits 8 bits (``BeatCollector``).
      max_payload  the link's request buffer (``LinkEndpoint.max_payload``, default 65535):
                 sizes the payload offsets the bridge keeps.

    Ports:
      req        ``In(stream(REQUEST_LAYOUT))``: the request's payload bytes (``type`` on every
                 beat), from ``LinkEndpoint.req``.
      rsp        ``Out(stream(REPLY_LAYOUT))``: the one reply, to ``LinkEndpoint.rsp``.
      core       ``In(hdl.core.core_signature(config, snapshot_port=True))``: the core's whole
                 bus, flipped (``wiring.connect(m, bridge.core, core)``):
                 ``cmd``, ``host_in``  streams to the core (``Out`` here);
                 ``host_out``  stream from the core; ready only while a PROGRAM frame is being
                 handled (between frames beats wait in the core);
                 ``status``  the core's status (busy, error, cause, and the host-in stall
                 counter's bit 0);
                 ``snap_hold``, ``snap_next``, ``snap_chunk``, ``snap_busy``  the core's counter
                 snapshot: the reply header's counters (``snap_hold`` while the header goes
                 out);
                 ``clear_error``, ``clear_counters``  one-clock pulses.
      core_rst   ``Out(1)``: a one-clock pulse, a synchronous reset of the core alone.
      active     ``Out(1)``: a frame is being handled (for an LED).

    PROGRAM: records are read at one byte per clock and each is pushed as soon as it is
    complete; host-out beats are taken at any time meanwhile (one byte per clock into the
    buffer: a beat takes ``result_beat_size`` clocks, so the core sees host-out back-pressure).
    After the last record the bridge waits until the core is idle (``status.busy`` low, no
    host-out beat offered), or until the host-in engine has been waiting for data for two
    clocks (the frame ended inside an instruction's data: RESULT_WAITING) and no READ_COUNTERS
    holds the counter snapshot (its beats are in this reply then), then sends the
    header (a snapshot of the status) and the buffered beats. A malformed or untakeable record
    stops the frame (the rest of it is read and ignored), the bridge waits as above, dropping
    the beats, and replies ERROR.

    CONTROL: reset pulse (if asked), then the clear pulses, then the status reply.

    Timing: a record takes one clock per byte to read; the register that collected it is then
    the one-entry register stage to the core: ``cmd`` / ``host_in`` are driven from registers
    (payload, ``valid`` from a ``full`` flag), and the core's ``ready`` only clears ``full`` at
    the clock edge, so no combinational path runs from the core's ``ready`` into the bridge.
    The next record is read once the core has taken the previous one (a record every
    ``size + 1`` clocks while the core keeps up; the frame is in the link's buffer, so this
    costs nothing against the UART). NOT_TAKEN is decided on the record offered after
    ``STUCK_CYCLES`` clocks; it is withdrawn in the clock the limit is reached, so the core
    cannot take a record the bridge gives up on. The wait ends a clock after its condition
    holds (from registers); the reply starts on the clock after that and goes out as the link
    takes it: its header a byte per two clocks at most (each byte a register, loaded the clock
    after the one before goes), its body a byte per two clocks (the buffer's read data, a clock
    for each new address); the counters come from the core's counter snapshot, as they were at
    that clock (held from the next), read out a byte at a time. The next frame's first beat is
    looked at in the clock after the reply's last byte went.
    Between frames the bridge takes no host-out beat and offers nothing.
    """

    def __init__(self, config: Config, *, max_reply: int | None = None,
                 max_payload: int = MAX_LENGTH, narrow_beats: bool = True):
        check_config(config)
        self.narrow_beats = bool(narrow_beats)
        if max_reply is None:
            max_reply = default_max_reply(config, DEFAULT_MAX_PAYLOAD)
        check_max_reply(config, max_reply)
        self.config = config
        self.max_payload = check_int("max_payload", max_payload, 1, MAX_LENGTH)
        self.max_reply = max_reply
        self.capacity = reply_capacity(config, max_reply)
        super().__init__({
            "req": In(stream.Signature(REQUEST_LAYOUT)),
            "rsp": Out(stream.Signature(REPLY_LAYOUT)),
            "core": In(core_signature(config, snapshot_port=True)),
            "core_rst": Out(1),
            "active": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, core = self.config, self.core
        m.submodules.stage = stage = RecordStage(cfg)
        m.submodules.stuck = stuck = StuckDetector()
        m.submodules.collector = collector = BeatCollector(cfg, self.capacity,
                                                           narrow=self.narrow_beats)
        m.submodules.reply = reply = ReplyBuilder(cfg, self.capacity, self.max_payload)
        # Written while beats are collected, read while the reply's body goes out: never both
        # (no read-during-write logic, ``no_rw_check``).
        m.submodules.buffer = mem = Memory(shape=8, depth=collector.depth, init=[],
                                           attrs={"no_rw_check": 1})
        wiring.connect(m, collector.wr, mem.write_port())
        wiring.connect(m, reply.rd, mem.read_port(domain="sync"))

        wiring.connect(m, stage.cmd, wiring.flipped(core.cmd))
        wiring.connect(m, stage.host_in, wiring.flipped(core.host_in))
        wiring.connect(m, wiring.flipped(core.host_out), collector.host_out)
        wiring.connect(m, reply.rsp, wiring.flipped(self.rsp))
        m.d.comb += [
            stage.withdraw.eq(stuck.at_limit),
            stage.flush.eq(self.core_rst),
            stuck.full.eq(stage.full),
            stuck.is_word.eq(stage.is_word),
            stuck.taken.eq(stage.taken),
            stuck.busy.eq(core.status.busy),
            stuck.stall_bit.eq(core.status.host_in_stall[0]),
            reply.status.eq(core.status),
            reply.beats.eq(collector.beats),
            reply.dropped.eq(collector.dropped),
            reply.overflow.eq(collector.overflow),
            reply.stored.eq(collector.wptr),
            core.snap_hold.eq(reply.snap_hold),
            core.snap_next.eq(reply.snap_next),
            reply.snap_chunk.eq(core.snap_chunk),
        ]
        _FrameSequencer(m, self, stage, stuck, collector, reply).build()
        return m


class _FrameSequencer:
    """The bridge's frame state machine (``bridge``), built into ``m``: IDLE looks at a
    request's first beat; RECORD / COLLECT / SKIP parse PROGRAM records into the
    ``RecordStage``; WAIT waits for the core; CTRL_* handle a CONTROL frame; REPLY waits for
    the ``ReplyBuilder``'s ``done``. It drives ``req.ready``, the ``Bridge``'s ``active``,
    ``core_rst`` and clear pulses, and the parts' control inputs."""

    def __init__(self, m, bridge, stage, stuck, collector, reply):
        self.m, self.bridge = m, bridge
        self.stage, self.stuck, self.collector, self.reply = stage, stuck, collector, reply
        self.req = req = bridge.req
        self.byte = req.payload.data
        self.took = req.valid & req.ready
        # --- per-frame state (counters sized to what they hold) ------------------------------
        self.ftype = Signal(8)
        self.offset = Signal(range(bridge.max_payload + 1))   # payload offset of the byte offered
        # The current record's first byte; after an error, the offset the ERROR reply names.
        self.rec_start = Signal.like(self.offset)
        self.rec_left = Signal(range(max(REC_WORD_SIZE - 1, stage.beat_in) + 1))
        self.all_read = Signal()            # the frame's last byte has been taken
        self.err_code = Signal(8)
        self.ctrl = Signal(3)               # the CTRL_* bits
        self.ctrl_bad = Signal()            # not one byte, or unknown bits
        self.idle_q, self.waiting_q = Signal(), Signal()     # WAIT's conditions, a clock late
        self.read_done = self.all_read | (self.took & req.payload.last)

    def build(self):
        m, req, stage = self.m, self.req, self.stage
        m.d.sync += [self.idle_q.eq(0), self.waiting_q.eq(0)]   # (outside WAIT)
        with m.If(self.took):
            m.d.sync += self.offset.eq(self.offset + 1)
            with m.If(req.payload.last):
                m.d.sync += self.all_read.eq(1)
        m.d.comb += [
            stage.byte.eq(self.byte),
            self.stuck.watch.eq(stage.full & stage.is_word),     # (WAIT: see there)
            self.reply.error.eq(self.err_code),
            self.reply.ftype.eq(self.ftype),
            self.reply.rec_start.eq(self.rec_start),
        ]
        with m.FSM(name="bridge"):
            self._idle()
            self._parse_records()
            self._wait()
            self._handle_control()
            with m.State("REPLY"):
                m.d.comb += self.bridge.active.eq(1)
                with m.If(self.reply.done):
                    m.next = "IDLE"

    def _fail(self, code, end):
        """Give up on the frame at the record that starts at ``rec_start``: reply ERROR
        ``code``; read and ignore the rest of it unless ``end``."""
        m = self.m
        m.d.sync += self.err_code.eq(code)
        with m.If(end):
            m.next = "WAIT"
        with m.Else():
            m.next = "SKIP"

    def _check_stuck(self):
        """The record offered can never be taken: drop it."""
        with self.m.If(self.stuck.stuck):
            self.m.d.comb += self.stage.drop.eq(1)
            self._fail(BridgeError.NOT_TAKEN, self.read_done)

    def _start_reply(self, waiting):
        """Make the reply in this clock (the ``ReplyBuilder`` snapshots the status)."""
        self.m.d.comb += [self.reply.start.eq(1), self.reply.waiting.eq(waiting)]
        self.m.next = "REPLY"

    def _idle(self):
        """IDLE: a new frame; its type picks the way (an unknown one is skipped: ERROR)."""
        m, req = self.m, self.req
        with m.State("IDLE"):
            m.d.comb += self.collector.clear.eq(1)
            m.d.sync += [self.offset.eq(0), self.err_code.eq(0), self.rec_start.eq(0),
                         self.ctrl.eq(0), self.ctrl_bad.eq(0), self.all_read.eq(0)]
            with m.If(req.valid):
                m.d.sync += self.ftype.eq(req.payload.type)
                with m.If(req.payload.type == FrameType.PROGRAM):
                    m.next = "RECORD"
                with m.Elif(req.payload.type == FrameType.CONTROL):
                    m.next = "CTRL_READ"
                with m.Else():
                    m.d.sync += self.err_code.eq(ErrorCode.UNKNOWN_TYPE)
                    m.next = "SKIP"

    def _record_kinds(self):
        """``(record byte, is a word, last, packed, bytes after the record byte)``."""
        beat_in, beat_packed = self.stage.beat_in, self.stage.beat_packed
        kinds = [(REC_WORD, 1, 0, 0, REC_WORD_SIZE - 1), (REC_BEAT, 0, 0, 0, beat_in),
                 (REC_LAST, 0, 1, 0, beat_in)]
        if self.stage.packs:
            kinds += [(REC_PBEAT, 0, 0, 1, beat_packed), (REC_PLAST, 0, 1, 1, beat_packed)]
        return kinds

    def _parse_records(self):
        """The request parser: RECORD (a record byte, once the stage is free), COLLECT (its
        bytes into the stage), SKIP (the rest of a frame given up on)."""
        m, req, stage, byte = self.m, self.req, self.stage, self.byte
        active = self.bridge.active
        kinds = self._record_kinds()
        with m.State("RECORD"):
            # The record byte of the next record, once the previous one has been taken.
            m.d.comb += [active.eq(1), self.collector.enable.eq(1), req.ready.eq(~stage.full)]
            with m.If(self.took):
                m.d.sync += self.rec_start.eq(self.offset)
                with m.If(req.payload.empty):
                    m.next = "WAIT"
                for code, word, last, packed, size in kinds:
                    with m.Elif(byte == code):
                        m.d.comb += [stage.start.eq(1), stage.start_word.eq(word),
                                     stage.start_last.eq(last), stage.start_packed.eq(packed)]
                        m.d.sync += self.rec_left.eq(size)
                        m.next = "COLLECT"
                with m.Else():
                    self._fail(BridgeError.BAD_RECORD, req.payload.last)
                known = 0
                for code, *_ in kinds:
                    known |= byte == code
                with m.If(known & req.payload.last):
                    m.d.sync += self.err_code.eq(BridgeError.TRUNCATED_RECORD)
                    m.next = "WAIT"
            self._check_stuck()

        with m.State("COLLECT"):
            # (The stage is free here: RECORD took this record's first byte.)
            m.d.comb += [active.eq(1), self.collector.enable.eq(1), req.ready.eq(1),
                         stage.shift.eq(self.took)]
            with m.If(self.took):
                m.d.sync += self.rec_left.eq(self.rec_left - 1)
                with m.If(self.rec_left == 1):
                    m.d.comb += stage.fill.eq(1)
                    with m.If(req.payload.last):
                        m.next = "WAIT"
                    with m.Else():
                        m.next = "RECORD"
                with m.Elif(req.payload.last):
                    m.d.sync += self.err_code.eq(BridgeError.TRUNCATED_RECORD)
                    m.next = "WAIT"

        with m.State("SKIP"):
            m.d.comb += [active.eq(1), self.collector.enable.eq(1), req.ready.eq(1)]
            with m.If(self.took & req.payload.last):
                m.next = "WAIT"

    def _wait(self):
        """WAIT: the record still offered goes first; then the core is idle, or its host-in
        engine waits for data the frame did not bring. Both are seen a clock late
        (``idle_q``, ``waiting_q``: registers, no path from the core's status into the reply
        logic), and hold: nothing is offered to the core meanwhile, and the collector must
        still be idle (a beat it started in that clock goes first)."""
        m, stage, collector = self.m, self.stage, self.collector
        st = self.bridge.core.status
        with m.State("WAIT"):
            m.d.comb += self.bridge.active.eq(1)
            drained = ~stage.full
            m.d.comb += self.stuck.watch.eq(drained | stage.is_word)
            idle = ~st.busy & ~self.bridge.core.host_out.valid & collector.idle & drained
            waiting = ((self.stuck.stall_run >= 2) & collector.idle & drained
                       & ~self.bridge.core.snap_busy)
            m.d.sync += [self.idle_q.eq(idle), self.waiting_q.eq(waiting)]
            with m.If((self.idle_q | self.waiting_q) & collector.idle):
                self._start_reply(~self.idle_q)
            with m.Else():
                m.d.comb += collector.enable.eq(1)
            self._check_stuck()

    def _handle_control(self):
        """The CONTROL handler: CTRL_READ (the one control byte), CTRL_RESET (the core reset
        pulse, or BAD_CONTROL), CTRL_CLEAR (the clear pulses), CTRL_SNAP (the reply)."""
        m, req, byte = self.m, self.req, self.byte
        active, core = self.bridge.active, self.bridge.core
        with m.State("CTRL_READ"):
            m.d.comb += [active.eq(1), req.ready.eq(1)]
            with m.If(self.took):
                with m.If(req.payload.empty | (self.offset != 0) |
                          ((byte & ~(CTRL_RESET | CTRL_CLEAR_ERROR | CTRL_CLEAR_COUNTERS))
                           != 0)):
                    m.d.sync += self.ctrl_bad.eq(1)
                with m.Else():
                    m.d.sync += self.ctrl.eq(byte[:3])
                with m.If(req.payload.last):
                    m.next = "CTRL_RESET"
        with m.State("CTRL_RESET"):
            m.d.comb += active.eq(1)
            with m.If(self.ctrl_bad):
                m.d.sync += self.err_code.eq(BridgeError.BAD_CONTROL)
                m.next = "CTRL_SNAP"
            with m.Else():
                m.d.comb += self.bridge.core_rst.eq((self.ctrl & CTRL_RESET) != 0)
                m.next = "CTRL_CLEAR"
        with m.State("CTRL_CLEAR"):
            m.d.comb += [active.eq(1),
                         core.clear_error.eq((self.ctrl & CTRL_CLEAR_ERROR) != 0),
                         core.clear_counters.eq((self.ctrl & CTRL_CLEAR_COUNTERS) != 0)]
            m.next = "CTRL_SNAP"
        with m.State("CTRL_SNAP"):
            m.d.comb += active.eq(1)
            self._start_reply(Const(0, 1))
