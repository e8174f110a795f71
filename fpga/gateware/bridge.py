"""The core bridge: PROGRAM and CONTROL frames from the link endpoint to the core's ports.

``Bridge`` sits between ``fpga.link.LinkEndpoint`` (its ``req`` / ``rsp`` byte streams) and
``hdl.core.Core`` (``cmd``, ``host_in``, ``host_out``, ``status``, the clear pulses and a core
reset). The payload formats and their sizes are in ``fpga.protocol`` (records, RESULT header,
CONTROL bits); ``fpga.records``, ``fpga.plan`` and ``fpga.board_link`` are the host side.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

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
    RESULT_BUSY,
    RESULT_COUNTERS_OFFSET,
    RESULT_ERROR,
    RESULT_HEADER_SIZE,
    RESULT_OVERFLOW,
    RESULT_WAITING,
    BridgeError,
    ErrorCode,
    FrameType,
    acc_bytes,
    default_max_reply,
    operand_bytes,
    packs_int4,
    reply_capacity,
    result_beat_size,
)
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.isa import INSTR_LAYOUT
from tpugen.hdl.layouts import STATUS_LAYOUT, host_in_layout, host_lanes, host_out_layout

__all__ = ["Bridge", "check_max_reply", "STUCK_CYCLES"]

#: Cycles a record may wait in a state in which the core can never take it before the bridge
#: gives up on it (``BridgeError.NOT_TAKEN``).
STUCK_CYCLES = 16


def check_max_reply(config: Config, max_reply) -> int:
    """Validate a bridge's ``max_reply`` for ``config``: it must hold the RESULT header and one
    host-out beat (and fit the 16-bit length field)."""
    if not isinstance(max_reply, int) or isinstance(max_reply, bool):
        raise TypeError(f"max_reply must be an integer, not {max_reply!r}")
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
      max_payload  the link's request buffer (``LinkEndpoint.max_payload``, default 65535):
                 sizes the payload offsets the bridge keeps.

    Ports:
      req        ``In(stream(REQUEST_LAYOUT))``: the request's payload bytes (``type`` on every
                 beat), from ``LinkEndpoint.req``.
      rsp        ``Out(stream(REPLY_LAYOUT))``: the one reply, to ``LinkEndpoint.rsp``.
      cmd, host_in     ``Out`` streams to the core's ``cmd`` and ``host_in``.
      host_out   ``In`` stream from the core's ``host_out``; ready only while a PROGRAM frame is
                 being handled (between frames beats wait in the core).
      status     ``In(STATUS_LAYOUT)``: the core's status (busy, error, cause, and the host-in
                 stall counter's bit 0).
      snap_hold, snap_next, snap_chunk, snap_busy  the core's counter snapshot
                 (``hdl.core.Core`` with ``snapshot_port=True``): the reply header's counters
                 (``snap_hold`` while the header goes out).
      clear_error, clear_counters, core_rst  ``Out(1)``: one-clock pulses for the core
                 (``core_rst`` is a synchronous reset of the core alone).
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
    costs nothing against the UART). NOT_TAKEN is decided on the record offered; it is
    withdrawn in the clock the limit is reached, so the core cannot take a record the bridge
    gives up on. The wait ends a clock after its condition holds (from registers); the reply
    starts on the clock after that and goes out as the link takes it: its header a byte per two
    clocks at most (each byte a register, loaded the clock after the one before goes), its body
    a byte per clock; the counters come from the core's counter snapshot, as they were at that
    clock (held from the next), read out a byte at a time.
    Between frames the bridge takes no host-out beat and offers nothing.
    """

    def __init__(self, config: Config, *, max_reply: int | None = None,
                 max_payload: int = MAX_LENGTH):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        if max_reply is None:
            max_reply = default_max_reply(config, DEFAULT_MAX_PAYLOAD)
        check_max_reply(config, max_reply)
        if not isinstance(max_payload, int) or isinstance(max_payload, bool):
            raise TypeError(f"max_payload must be an integer, not {max_payload!r}")
        if not 1 <= max_payload <= MAX_LENGTH:
            raise ValueError(f"max_payload must be in 1..{MAX_LENGTH}, not {max_payload!r}")
        self.config = config
        self.max_payload = max_payload
        self.max_reply = max_reply
        self.capacity = reply_capacity(config, max_reply)
        super().__init__({
            "req": In(stream.Signature(REQUEST_LAYOUT)),
            "rsp": Out(stream.Signature(REPLY_LAYOUT)),
            "cmd": Out(stream.Signature(INSTR_LAYOUT)),
            "host_in": Out(stream.Signature(host_in_layout(config))),
            "host_out": In(stream.Signature(host_out_layout(config))),
            "status": In(STATUS_LAYOUT),
            "snap_hold": Out(1),
            "snap_next": Out(1),
            "snap_chunk": In(16),
            "snap_busy": In(1),
            "clear_error": Out(1),
            "clear_counters": Out(1),
            "core_rst": Out(1),
            "active": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        C, W = cfg.cols, cfg.acc_width
        OA = acc_bytes(cfg)
        OB = operand_bytes(cfg)
        lanes = host_lanes(cfg)
        beat_in = lanes * OB                   # payload bytes of a beat record
        packs = packs_int4(cfg)                # int4: packed beat records too
        beat_packed = (lanes + 1) // 2         # their payload bytes
        beat_out = result_beat_size(cfg)       # bytes of a RESULT beat
        cap = self.capacity
        depth = cap * beat_out

        # Written while beats are collected, read while the reply's body goes out: never both
        # (no read-during-write logic, ``no_rw_check``).
        m.submodules.buffer = mem = Memory(shape=8, depth=depth, init=[],
                                           attrs={"no_rw_check": 1})
        wr = mem.write_port()
        rd = mem.read_port(domain="sync")

        req, rsp, st = self.req, self.rsp, self.status
        byte = req.payload.data
        took = req.valid & req.ready

        # --- per-frame state (counters sized to what they hold) -----------------------------
        ftype = Signal(8)
        offset = Signal(range(self.max_payload + 1))   # payload offset of the byte offered
        # The current record's first byte; after an error, the offset the ERROR reply names.
        rec_start = Signal.like(offset)
        is_word = Signal()
        rec_left = Signal(range(max(REC_WORD_SIZE - 1, beat_in) + 1))
        last_flag = Signal()
        packed = Signal()              # the beat in ``sh`` came in a packed record
        all_read = Signal()            # the frame's last byte has been taken
        err_code = Signal(8)
        ctrl = Signal(3)               # the CTRL_* bits
        ctrl_bad = Signal()            # not one byte, or unknown bits

        beats = Signal(range(cap + 1))  # beats in the buffer
        dropped = Signal(16)
        overflow = Signal()
        wptr = Signal(range(depth + 1))

        collecting = Signal()
        c_idle = Signal()
        idle_q, waiting_q = Signal(), Signal()     # WAIT's conditions, a clock late
        m.d.sync += [idle_q.eq(0), waiting_q.eq(0)]   # (outside WAIT)

        with m.If(took):
            m.d.sync += offset.eq(offset + 1)
            with m.If(req.payload.last):
                m.d.sync += all_read.eq(1)
        read_done = all_read | (took & req.payload.last)

        # --- the record register ------------------------------------------------------------
        # Bytes shift in at the top and move down a byte per step, so a record's last byte is
        # at the top: an instruction word is the top 64 bits, a beat the top ``8 * beat_in``.
        # It is also the one-entry register stage to the core (below).
        SW = max(64, 8 * beat_in)
        sh = Signal(SW)
        shift = Signal()               # move a byte down (``byte`` comes in at the top)
        with m.If(shift):
            m.d.sync += sh.eq(Cat(sh[8:], byte))

        # --- the reply header's counters: the core's counter snapshot --------------------------
        # Kept from the clock the reply is made (the counters change while the reply goes out:
        # ``snap_hold`` from the next clock on), then read a 16-bit chunk at a time
        # (``hdl.counter_snapshot``: the counters in ``Counter`` order, four chunks each, low
        # first: the header's little-endian 64-bit counters). The core's READ_COUNTERS uses the
        # same snapshot; the bridge makes a reply only while no READ_COUNTERS holds it
        # (``snap_busy``) and none can start (see WAIT).
        assert 8 * (RESULT_HEADER_SIZE - RESULT_COUNTERS_OFFSET) == 64 * len(isa.Counter)
        assert isa.COUNTER_CHUNKS == 4

        # --- the one-entry register stage to the core ----------------------------------------
        # ``full``: the record in ``sh`` is offered (``cmd`` if a word, else ``host_in``). The
        # core's ``ready`` only clears ``full`` at the clock edge; the bridge reads the next
        # record once ``full`` is low.
        full = Signal()
        m.d.comb += self.cmd.payload.eq(sh[SW - 64:])
        beat_bits = sh[SW - 8 * beat_in:]
        byte_lanes = Cat(beat_bits.word_select(k, 8 * OB) for k in range(lanes))
        if packs:
            # A packed record's bytes are the top ones: lane k is nibble k, sign-extended.
            nibbles = sh[SW - 8 * beat_packed:]
            wide = [Signal(signed(8), name=f"nibble_{k}") for k in range(lanes)]
            m.d.comb += [w.eq(nibbles.word_select(k, 4).as_signed())
                         for k, w in enumerate(wide)]
            byte_lanes = Mux(packed, Cat(*wide), byte_lanes)
        m.d.comb += [
            self.host_in.payload.data.eq(byte_lanes),
            self.host_in.payload.last.eq(last_flag),
        ]

        # --- the core's host-in engine waiting for data, seen through its stall counter -------
        # The counter grows by at most one per clock, so bit 0 toggling means it grew: the
        # engine waited for host-in data in the previous clock.
        stall_q = Signal()
        stalled = Signal()
        m.d.sync += stall_q.eq(st.host_in_stall[0])
        m.d.comb += stalled.eq(st.host_in_stall[0] ^ stall_q)
        # The record offered is given up on (NOT_TAKEN) when it has waited STUCK_CYCLES in a
        # state in which the core can never take it: a word while the host-in engine waits for
        # data, a beat while the core is idle. In the clock the count reaches the limit it is
        # withdrawn, so the core cannot take it in the clock the bridge gives up (``taken`` is
        # registered: the core's ready reaches no bridge logic).
        taken = Signal()               # the record was taken in the previous clock
        watch_stall = Signal()
        stall_run = Signal(range(STUCK_CYCLES + 1))
        idle_run = Signal(range(STUCK_CYCLES + 1))
        # ``*_lim``: the count is at the limit (registers beside the counts: the record's
        # ``valid`` comes from registers through two gates).
        stall_lim, idle_lim = Signal(), Signal()
        stall_counts = watch_stall & stalled & ~taken
        with m.If(stall_counts):
            with m.If(stall_run != STUCK_CYCLES):
                m.d.sync += stall_run.eq(stall_run + 1)
        with m.Else():
            m.d.sync += stall_run.eq(0)
        m.d.sync += stall_lim.eq(stall_counts & (stall_run >= STUCK_CYCLES - 1))
        idle_counts = full & ~is_word & ~st.busy & ~taken
        with m.If(idle_counts):
            with m.If(idle_run != STUCK_CYCLES):
                m.d.sync += idle_run.eq(idle_run + 1)
        with m.Else():
            m.d.sync += idle_run.eq(0)
        m.d.sync += idle_lim.eq(idle_counts & (idle_run >= STUCK_CYCLES - 1))
        at_limit = Mux(is_word, stall_lim, idle_lim)
        offer = full & ~at_limit
        m.d.comb += [
            self.cmd.valid.eq(offer & is_word),
            self.host_in.valid.eq(offer & ~is_word),
            watch_stall.eq(full & is_word),
        ]
        take = Mux(is_word, self.cmd.valid & self.cmd.ready,
                   self.host_in.valid & self.host_in.ready)
        m.d.sync += taken.eq(take)
        with m.If(take | self.core_rst):
            m.d.sync += full.eq(0)
        stuck = full & at_limit & ~taken

        # --- reply bytes -----------------------------------------------------------------------
        snap_flags = Signal(4)
        snap_cause = Signal(4)
        high = Signal()                # the counter byte offered is its chunk's high byte
        is_err = Signal()              # the reply is ERROR
        rtype = Signal(8)
        hidx = Signal(range(RESULT_HEADER_SIZE))    # header byte offered
        hbyte, hlast_q, hvalid = Signal(8), Signal(), Signal()   # it, its last flag, valid
        snap_next_q = Signal()
        m.d.sync += snap_next_q.eq(0)
        m.d.comb += self.snap_next.eq(snap_next_q)
        rptr = Signal(range(max(depth, 2)))         # buffer byte offered (after the header)
        # The body's byte offered is the block RAM's read data at ``rptr`` (a register: no
        # path from the link's ``ready`` into the read address), its last flag ``rlast_q`` a
        # register; after each byte goes, a clock for the new address (``bwait``), then it is
        # offered (``bvalid``). ``wend`` = wptr - 1, a register (steady from the header on).
        bvalid, bwait, rlast_q = Signal(), Signal(), Signal()
        wend = Signal(range(depth + 1))
        m.d.comb += rd.addr.eq(rptr)
        m.d.sync += wend.eq(wptr - 1)
        small = Array([Cat(snap_flags, Const(0, 4)), Cat(snap_cause, Const(0, 4)),
                       beats[:8], beats[8:16] if len(beats) > 8 else Const(0, 8),
                       dropped[:8], dropped[8:]])
        assert len(small) == RESULT_COUNTERS_OFFSET
        small_err = Array([err_code, ftype, rec_start[:8],
                           rec_start[8:16] if len(rec_start) > 8 else Const(0, 8)])
        counter_byte = Mux(high, self.snap_chunk[8:], self.snap_chunk[:8])
        head_byte = Mux(is_err, small_err[hidx[:2]], Mux(hidx < RESULT_COUNTERS_OFFSET,
                                                            small[hidx[:3]], counter_byte))

        def fail(code, end, at=None):
            """Give up on the frame at the record that starts at ``rec_start`` (or ``at``):
            reply ERROR ``code``; read and ignore the rest of it unless ``end``."""
            m.d.sync += err_code.eq(code)
            if at is not None:
                m.d.sync += rec_start.eq(at)
            with m.If(end):
                m.next = "WAIT"
            with m.Else():
                m.next = "SKIP"

        def check_stuck():
            """The record offered can never be taken: drop it."""
            with m.If(stuck):
                m.d.sync += full.eq(0)
                fail(BridgeError.NOT_TAKEN, read_done)

        # In the HEADER state, as a register: ``snap_hold`` (the enable of the core's whole
        # counter snapshot) comes straight from it, not through the state decoding.
        in_header = Signal()
        m.d.comb += self.snap_hold.eq(in_header)

        def snapshot(flags_extra):
            # The counter snapshot follows the counters until the header holds it: it keeps
            # this clock's.
            m.d.sync += [
                in_header.eq(1),
                snap_flags.eq(Cat(overflow, flags_extra, st.busy, st.error)),
                snap_cause.eq(st.cause),
                hidx.eq(0),
                hvalid.eq(0),
                high.eq(0),
                rptr.eq(0),
                is_err.eq(err_code != 0),
                reply_length.eq(Mux(err_code != 0, 4, RESULT_HEADER_SIZE + wptr)),
                rtype.eq(Mux(err_code != 0, FrameType.ERROR,
                             Mux(ftype == FrameType.CONTROL, FrameType.CONTROL_REPLY,
                                 FrameType.RESULT))),
            ]
            m.next = "HEADER"

        assert (RESULT_OVERFLOW, RESULT_WAITING, RESULT_BUSY, RESULT_ERROR) == (1, 2, 4, 8)

        # The reply's length (the link sends it before the payload): ERROR 4 bytes, else the
        # header and the buffered beats (a register, set with the snapshot: wptr holds then).
        reply_length = Signal(16)

        with m.FSM(name="bridge"):
            with m.State("IDLE"):
                m.d.sync += [offset.eq(0), beats.eq(0), dropped.eq(0), overflow.eq(0),
                             wptr.eq(0), err_code.eq(0), rec_start.eq(0), ctrl.eq(0),
                             ctrl_bad.eq(0), all_read.eq(0)]
                with m.If(req.valid):
                    m.d.sync += ftype.eq(req.payload.type)
                    with m.If(req.payload.type == FrameType.PROGRAM):
                        m.next = "RECORD"
                    with m.Elif(req.payload.type == FrameType.CONTROL):
                        m.next = "CTRL_READ"
                    with m.Else():
                        m.d.sync += err_code.eq(ErrorCode.UNKNOWN_TYPE)
                        m.next = "SKIP"

            with m.State("RECORD"):
                # The record byte of the next record, once the previous one has been taken.
                m.d.comb += [self.active.eq(1), collecting.eq(1), req.ready.eq(~full)]
                with m.If(took):
                    m.d.sync += rec_start.eq(offset)
                    with m.If(req.payload.empty):
                        m.next = "WAIT"
                    with m.Elif(byte == REC_WORD):
                        m.d.sync += [is_word.eq(1), rec_left.eq(REC_WORD_SIZE - 1)]
                        m.next = "COLLECT"
                    with m.Elif((byte == REC_BEAT) | (byte == REC_LAST)):
                        m.d.sync += [is_word.eq(0), rec_left.eq(beat_in),
                                     last_flag.eq(byte == REC_LAST), packed.eq(0)]
                        m.next = "COLLECT"
                    if packs:
                        with m.Elif((byte == REC_PBEAT) | (byte == REC_PLAST)):
                            m.d.sync += [is_word.eq(0), rec_left.eq(beat_packed),
                                         last_flag.eq(byte == REC_PLAST), packed.eq(1)]
                            m.next = "COLLECT"
                    with m.Else():
                        fail(BridgeError.BAD_RECORD, req.payload.last)
                    known = (byte == REC_WORD) | (byte == REC_BEAT) | (byte == REC_LAST)
                    if packs:
                        known |= (byte == REC_PBEAT) | (byte == REC_PLAST)
                    with m.If(known & req.payload.last):
                        m.d.sync += err_code.eq(BridgeError.TRUNCATED_RECORD)
                        m.next = "WAIT"
                check_stuck()

            with m.State("COLLECT"):
                # (``full`` is low here: RECORD took this record's first byte.)
                m.d.comb += [self.active.eq(1), collecting.eq(1), req.ready.eq(1),
                             shift.eq(took)]
                with m.If(took):
                    m.d.sync += rec_left.eq(rec_left - 1)
                    with m.If(rec_left == 1):
                        m.d.sync += full.eq(1)
                        with m.If(req.payload.last):
                            m.next = "WAIT"
                        with m.Else():
                            m.next = "RECORD"
                    with m.Elif(req.payload.last):
                        m.d.sync += err_code.eq(BridgeError.TRUNCATED_RECORD)
                        m.next = "WAIT"

            with m.State("SKIP"):
                m.d.comb += [self.active.eq(1), collecting.eq(1), req.ready.eq(1)]
                with m.If(took & req.payload.last):
                    m.next = "WAIT"

            with m.State("WAIT"):
                m.d.comb += self.active.eq(1)
                # The record still offered goes first; then the core is idle, or its host-in
                # engine waits for data the frame did not bring. Both are seen a clock late
                # (``idle_q``, ``waiting_q``: registers, no path from the core's status into
                # the reply logic), and hold: nothing is offered to the core meanwhile, and the
                # collector must still be idle (a beat it started in that clock goes first).
                drained = ~full
                m.d.comb += watch_stall.eq(drained | is_word)
                idle = ~st.busy & ~self.host_out.valid & c_idle & drained
                waiting = (stall_run >= 2) & c_idle & drained & ~self.snap_busy
                m.d.sync += [idle_q.eq(idle), waiting_q.eq(waiting)]
                with m.If((idle_q | waiting_q) & c_idle):
                    snapshot(~idle_q)
                with m.Else():
                    m.d.comb += collecting.eq(1)
                check_stuck()

            with m.State("CTRL_READ"):
                m.d.comb += [self.active.eq(1), req.ready.eq(1)]
                with m.If(took):
                    with m.If(req.payload.empty | (offset != 0) |
                              ((byte & ~(CTRL_RESET | CTRL_CLEAR_ERROR | CTRL_CLEAR_COUNTERS))
                               != 0)):
                        m.d.sync += ctrl_bad.eq(1)
                    with m.Else():
                        m.d.sync += ctrl.eq(byte[:3])
                    with m.If(req.payload.last):
                        m.next = "CTRL_RESET"
            with m.State("CTRL_RESET"):
                m.d.comb += self.active.eq(1)
                with m.If(ctrl_bad):
                    m.d.sync += err_code.eq(BridgeError.BAD_CONTROL)
                    m.next = "CTRL_SNAP"
                with m.Else():
                    m.d.comb += self.core_rst.eq((ctrl & CTRL_RESET) != 0)
                    m.next = "CTRL_CLEAR"
            with m.State("CTRL_CLEAR"):
                m.d.comb += [self.active.eq(1),
                             self.clear_error.eq((ctrl & CTRL_CLEAR_ERROR) != 0),
                             self.clear_counters.eq((ctrl & CTRL_CLEAR_COUNTERS) != 0)]
                m.next = "CTRL_SNAP"
            with m.State("CTRL_SNAP"):
                m.d.comb += self.active.eq(1)
                snapshot(Const(0, 1))

            with m.State("HEADER"):
                # ERROR: 4 bytes; RESULT / CONTROL_REPLY: the header, then the beats.
                # The byte offered is a register (``hbyte``, ``hlast_q``: no path from the
                # header's multiplexers into the link), loaded in the clock after the one
                # before goes (``hvalid``; a clock per byte is nothing beside the UART's).
                hlast = Mux(is_err, hidx == 3, (hidx == RESULT_HEADER_SIZE - 1) & (wptr == 0))
                m.d.comb += [
                    self.active.eq(1),
                    rsp.valid.eq(hvalid),
                    rsp.payload.data.eq(hbyte),
                    rsp.payload.type.eq(rtype),
                    rsp.payload.length.eq(reply_length),
                    rsp.payload.last.eq(hlast_q),
                    # Driven here (not left at its default) so that Yosys does not emit a
                    # constant-only ``always @*``, which Icarus never evaluates (X).
                    rsp.payload.empty.eq(0),
                ]
                with m.If(hvalid & rsp.ready):
                    m.d.sync += [hidx.eq(hidx + 1), hvalid.eq(0)]
                    with m.If(hidx >= RESULT_COUNTERS_OFFSET):
                        # The snapshot moves on in the next clock (a register: no path from
                        # the link's ``ready`` into its enables); the next byte waits for it.
                        m.d.sync += [high.eq(~high), snap_next_q.eq(high)]
                    with m.If(hlast_q):
                        m.d.sync += in_header.eq(0)
                        m.next = "IDLE"
                    with m.Elif(hidx == RESULT_HEADER_SIZE - 1):
                        # rptr has been 0 since the snapshot: its byte is on the read port.
                        m.d.sync += [bvalid.eq(1), bwait.eq(0), rlast_q.eq(wend == 0),
                                     in_header.eq(0)]
                        m.next = "BODY"
                with m.Elif(~snap_next_q):
                    m.d.sync += [hbyte.eq(head_byte), hlast_q.eq(hlast), hvalid.eq(1)]
            with m.State("BODY"):
                m.d.comb += [
                    self.active.eq(1),
                    rsp.valid.eq(bvalid),
                    rsp.payload.data.eq(rd.data),
                    rsp.payload.type.eq(rtype),
                    rsp.payload.length.eq(reply_length),
                    rsp.payload.last.eq(rlast_q),
                    rsp.payload.empty.eq(0),
                ]
                with m.If(bvalid & rsp.ready):
                    m.d.sync += [rptr.eq(rptr + 1), bvalid.eq(0), bwait.eq(1)]
                    with m.If(rlast_q):
                        m.next = "IDLE"
                with m.Elif(bwait):
                    m.d.sync += [bvalid.eq(1), bwait.eq(0), rlast_q.eq(rptr == wend)]

        # --- host-out beats into the buffer, one byte per clock ----------------------------
        # The beat stays offered until its last byte is taken (the stream rules), and the
        # core's host-out payload is a register (``hdl.host_out``). Its bytes go through a
        # shift register loaded from that payload: each buffer byte comes from the register's
        # low byte, and every bit from its neighbour, not from a wide byte multiplexer (on a
        # 16x16 array, 520 payload bits into the 8 data pins of one block RAM: a hot spot the
        # ECP5 router could not clear).
        beat = self.host_out.payload
        flat = beat.data.as_value()
        out_bytes = []
        for k in range(C):
            raw = flat[k * W:(k + 1) * W]
            ext = Cat(raw, raw[-1].replicate(8 * OA - W)) if 8 * OA > W else raw
            out_bytes += [ext[8 * j:8 * (j + 1)] for j in range(OA)]
        out_bytes.append(beat.last)
        assert len(out_bytes) >= 2     # a lane's bytes and the last flag
        shifter = Signal(8 * len(out_bytes))
        bidx = Signal(range(len(out_bytes)))
        blast = Signal()               # the byte being written is the beat's last
        m.d.comb += [wr.addr.eq(wptr), wr.data.eq(shifter[:8])]
        with m.FSM(name="collect"):
            with m.State("IDLE"):
                m.d.comb += c_idle.eq(1)
                with m.If(collecting & self.host_out.valid):
                    with m.If(beats == cap):
                        m.next = "DROP"
                    with m.Else():
                        m.d.sync += [shifter.eq(Cat(*out_bytes)), bidx.eq(0), blast.eq(0)]
                        m.next = "BYTES"
            with m.State("DROP"):
                # host_out.ready comes from the FSM's registers only (in BYTES too): no path
                # from the core's host_out.valid back into its read-ahead logic.
                m.d.comb += self.host_out.ready.eq(1)
                m.d.sync += overflow.eq(1)
                with m.If(dropped != 0xFFFF):
                    m.d.sync += dropped.eq(dropped + 1)
                m.next = "IDLE"
            with m.State("BYTES"):
                m.d.comb += wr.en.eq(1)
                m.d.sync += [wptr.eq(wptr + 1), bidx.eq(bidx + 1),
                             shifter.eq(shifter[8:]), blast.eq(bidx == len(out_bytes) - 2)]
                with m.If(blast):
                    m.d.comb += self.host_out.ready.eq(1)
                    m.d.sync += beats.eq(beats + 1)
                    m.next = "IDLE"
        return m
