"""The core bridge: PROGRAM and CONTROL frames from the link endpoint to the core's ports.

``Bridge`` sits between ``fpga.link.LinkEndpoint`` (its ``req`` / ``rsp`` byte streams) and
``hdl.core.Core`` (``cmd``, ``host_in``, ``host_out``, ``status``, the clear pulses and a core
reset). The payload formats are in ``fpga.protocol`` (records, RESULT header, CONTROL bits);
``fpga.board`` is the host side.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.config import Config
from hdl.isa import INSTR_LAYOUT
from hdl.layouts import STATUS_LAYOUT, host_in_layout, host_lanes, host_out_layout

from .framing import REPLY_LAYOUT, REQUEST_LAYOUT
from .protocol import (
    CTRL_CLEAR_COUNTERS,
    CTRL_CLEAR_ERROR,
    CTRL_RESET,
    MAX_LENGTH,
    REC_BEAT,
    REC_LAST,
    REC_WORD,
    REC_WORD_SIZE,
    RESULT_BUSY,
    RESULT_ERROR,
    RESULT_HEADER_SIZE,
    RESULT_OVERFLOW,
    RESULT_WAITING,
    BridgeError,
    ErrorCode,
    FrameType,
)

__all__ = ["Bridge", "operand_bytes", "acc_bytes", "beat_record_size", "result_beat_size",
           "reply_capacity", "STUCK_CYCLES"]

#: Cycles a record may wait in a state in which the core can never take it before the bridge
#: gives up on it (``BridgeError.NOT_TAKEN``).
STUCK_CYCLES = 16


def operand_bytes(config: Config) -> int:
    """Bytes of one host-in lane in a beat record: ceil(operand_width / 8)."""
    return -(-config.operand_width // 8)


def acc_bytes(config: Config) -> int:
    """Bytes of one host-out lane in a RESULT beat: ceil(acc_width / 8)."""
    return -(-config.acc_width // 8)


def beat_record_size(config: Config) -> int:
    """Bytes of a REC_BEAT / REC_LAST record: 1 + max(R, C) lanes."""
    return 1 + host_lanes(config) * operand_bytes(config)


def result_beat_size(config: Config) -> int:
    """Bytes of one host-out beat in a RESULT payload: C lanes and the ``last`` byte."""
    return config.cols * acc_bytes(config) + 1


def reply_capacity(config: Config, max_reply: int) -> int:
    """Host-out beats a RESULT reply of at most ``max_reply`` bytes holds."""
    return (max_reply - RESULT_HEADER_SIZE) // result_beat_size(config)


class Bridge(wiring.Component):
    """Runs PROGRAM frames on the core and answers CONTROL frames (see ``fpga.protocol``).

    Parameters:
      config     the core's ``hdl.config.Config``.
      max_reply  the link's reply buffer (``LinkEndpoint.max_reply``): RESULT replies are at
                 most this long; it must hold the 46-byte header and at least one beat. The
                 bridge buffers up to ``reply_capacity(config, max_reply)`` beats itself (a
                 byte-wide memory), because the reply's header (beat count, counters) is only
                 known when the frame is done, and the link's reply buffer is written in order.

    Ports:
      req        ``In(stream(REQUEST_LAYOUT))``: the request's payload bytes (``type`` on every
                 beat), from ``LinkEndpoint.req``.
      rsp        ``Out(stream(REPLY_LAYOUT))``: the one reply, to ``LinkEndpoint.rsp``.
      cmd, host_in     ``Out`` streams to the core's ``cmd`` and ``host_in``.
      host_out   ``In`` stream from the core's ``host_out``; ready only while a PROGRAM frame is
                 being handled (between frames beats wait in the core).
      status     ``In(STATUS_LAYOUT)``: the core's status.
      clear_error, clear_counters, core_rst  ``Out(1)``: one-clock pulses for the core
                 (``core_rst`` is a synchronous reset of the core alone).
      active     ``Out(1)``: a frame is being handled (for an LED).

    PROGRAM: records are read at one byte per clock and each is pushed as soon as it is
    complete; host-out beats are taken at any time meanwhile (one byte per clock into the
    buffer: a beat takes ``result_beat_size`` clocks, so the core sees host-out back-pressure).
    After the last record the bridge waits until the core is idle (``status.busy`` low, no
    host-out beat offered), or until the host-in engine has been waiting for data for two
    clocks (the frame ended inside an instruction's data: RESULT_WAITING), then sends the
    header (a snapshot of the status) and the buffered beats. A malformed or untakeable record
    stops the frame (the rest of it is read and ignored), the bridge waits as above, dropping
    the beats, and replies ERROR.

    CONTROL: reset pulse (if asked), then the clear pulses, then the status reply.

    Timing: a record takes one clock per byte to read, then is offered until taken; the
    reply starts on the clock after the wait ends and goes out at one byte per clock (as the
    link takes it). Between frames the bridge takes no host-out beat and offers nothing.
    """

    def __init__(self, config: Config, *, max_reply: int = 1024):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        if not isinstance(max_reply, int) or isinstance(max_reply, bool):
            raise TypeError(f"max_reply must be an integer, not {max_reply!r}")
        least = RESULT_HEADER_SIZE + result_beat_size(config)
        if not least <= max_reply <= MAX_LENGTH:
            raise ValueError(f"max_reply must be in {least}..{MAX_LENGTH} (the RESULT header "
                             f"and one beat of C={config.cols} lanes), not {max_reply!r}")
        self.config = config
        self.max_reply = max_reply
        self.capacity = reply_capacity(config, max_reply)
        super().__init__({
            "req": In(stream.Signature(REQUEST_LAYOUT)),
            "rsp": Out(stream.Signature(REPLY_LAYOUT)),
            "cmd": Out(stream.Signature(INSTR_LAYOUT)),
            "host_in": Out(stream.Signature(host_in_layout(config))),
            "host_out": In(stream.Signature(host_out_layout(config))),
            "status": In(STATUS_LAYOUT),
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
        beat_in = host_lanes(cfg) * OB         # payload bytes of a beat record
        beat_out = result_beat_size(cfg)       # bytes of a RESULT beat
        cap = self.capacity
        depth = cap * beat_out

        m.submodules.buffer = mem = Memory(shape=8, depth=depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port(domain="sync")

        req, rsp, st = self.req, self.rsp, self.status
        byte = req.payload.data
        took = req.valid & req.ready

        # --- per-frame state -----------------------------------------------------------------
        ftype = Signal(8)
        offset = Signal(16)            # payload offset of the byte offered on req
        rec_start = Signal(16)         # payload offset of the current record
        is_word = Signal()
        rec_left = Signal(range(max(REC_WORD_SIZE - 1, beat_in) + 1))
        last_flag = Signal()
        frame_end = Signal()           # the record just read ended the frame
        word_reg = Signal(64)
        beat_reg = Signal(8 * beat_in)
        err_code = Signal(8)
        err_offset = Signal(16)
        ctrl = Signal(8)
        ctrl_bad = Signal()

        beats = Signal(16)             # beats in the buffer
        dropped = Signal(16)
        overflow = Signal()
        wptr = Signal(range(depth + 1))

        snap = Signal(STATUS_LAYOUT)
        snap_flags = Signal(8)
        ridx = Signal(16)              # reply byte offered
        rlen = Signal(16)              # reply length
        rtype = Signal(8)
        advance = Signal()

        collecting = Signal()
        c_idle = Signal()

        with m.If(took):
            m.d.sync += offset.eq(offset + 1)

        # --- the core's host-in engine waiting for data, seen through its stall counter -------
        # The counter grows by at most one per clock, so bit 0 toggling means it grew: the
        # engine waited for host-in data in the previous clock.
        stall_q = Signal()
        stalled = Signal()
        m.d.sync += stall_q.eq(st.host_in_stall[0])
        m.d.comb += stalled.eq(st.host_in_stall[0] ^ stall_q)
        watch_stall = Signal()
        stall_run = Signal(range(STUCK_CYCLES + 1))
        with m.If(watch_stall & stalled):
            with m.If(stall_run != STUCK_CYCLES):
                m.d.sync += stall_run.eq(stall_run + 1)
        with m.Else():
            m.d.sync += stall_run.eq(0)
        watch_idle = Signal()
        idle_run = Signal(range(STUCK_CYCLES + 1))
        with m.If(watch_idle & ~st.busy):
            with m.If(idle_run != STUCK_CYCLES):
                m.d.sync += idle_run.eq(idle_run + 1)
        with m.Else():
            m.d.sync += idle_run.eq(0)

        # --- reply bytes -----------------------------------------------------------------------
        header = Cat(snap_flags, snap.cause, Const(0, 4), beats, dropped, snap.cycles,
                     snap.array_busy, snap.host_in_stall, snap.host_out_stall, snap.retired)
        assert len(header) == 8 * RESULT_HEADER_SIZE
        error_bytes = Cat(err_code, ftype, err_offset)
        m.d.comb += rd.addr.eq(Mux(advance, ridx + 1, ridx) - RESULT_HEADER_SIZE)
        reply_byte = Mux(rtype == FrameType.ERROR, error_bytes.word_select(ridx[:2], 8),
                         Mux(ridx < RESULT_HEADER_SIZE,
                             header.word_select(ridx[:6], 8), rd.data))

        def fail(code, at, end):
            """Give up on the frame at record offset ``at`` (reply ERROR ``code``); read and
            ignore the rest of it unless ``end``."""
            m.d.sync += [err_code.eq(code), err_offset.eq(at)]
            with m.If(end):
                m.next = "WAIT"
            with m.Else():
                m.next = "SKIP"

        def snapshot(flags_extra):
            m.d.sync += [
                snap.eq(st),
                snap_flags.eq(Cat(overflow, flags_extra, st.busy, st.error)),
                ridx.eq(0),
                rtype.eq(Mux(err_code != 0, FrameType.ERROR,
                             Mux(ftype == FrameType.CONTROL, FrameType.CONTROL_REPLY,
                                 FrameType.RESULT))),
                rlen.eq(Mux(err_code != 0, 4, RESULT_HEADER_SIZE + beats * beat_out)),
            ]
            m.next = "REPLY"

        assert (RESULT_OVERFLOW, RESULT_WAITING, RESULT_BUSY, RESULT_ERROR) == (1, 2, 4, 8)

        with m.FSM(name="bridge"):
            with m.State("IDLE"):
                m.d.sync += [offset.eq(0), beats.eq(0), dropped.eq(0), overflow.eq(0),
                             wptr.eq(0), err_code.eq(0), err_offset.eq(0), ctrl.eq(0),
                             ctrl_bad.eq(0)]
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
                m.d.comb += [self.active.eq(1), collecting.eq(1), req.ready.eq(1)]
                with m.If(took):
                    m.d.sync += rec_start.eq(offset)
                    with m.If(req.payload.empty):
                        m.next = "WAIT"
                    with m.Elif(byte == REC_WORD):
                        m.d.sync += [is_word.eq(1), rec_left.eq(REC_WORD_SIZE - 1)]
                        m.next = "COLLECT"
                    with m.Elif((byte == REC_BEAT) | (byte == REC_LAST)):
                        m.d.sync += [is_word.eq(0), rec_left.eq(beat_in),
                                     last_flag.eq(byte == REC_LAST)]
                        m.next = "COLLECT"
                    with m.Else():
                        fail(BridgeError.BAD_RECORD, offset, req.payload.last)
                    with m.If(((byte == REC_WORD) | (byte == REC_BEAT) | (byte == REC_LAST))
                              & req.payload.last):
                        m.d.sync += [err_code.eq(BridgeError.TRUNCATED_RECORD),
                                     err_offset.eq(offset)]
                        m.next = "WAIT"

            with m.State("COLLECT"):
                m.d.comb += [self.active.eq(1), collecting.eq(1), req.ready.eq(1)]
                with m.If(took):
                    m.d.sync += [rec_left.eq(rec_left - 1),
                                 word_reg.eq(Cat(word_reg[8:], byte)),
                                 beat_reg.eq(Cat(beat_reg[8:], byte))]
                    with m.If(rec_left == 1):
                        m.d.sync += frame_end.eq(req.payload.last)
                        m.next = "PUSH"
                    with m.Elif(req.payload.last):
                        m.d.sync += [err_code.eq(BridgeError.TRUNCATED_RECORD),
                                     err_offset.eq(rec_start)]
                        m.next = "WAIT"

            with m.State("PUSH"):
                m.d.comb += [self.active.eq(1), collecting.eq(1)]
                # A word is never offered while the host-in engine waits for data, and a beat
                # never while the core is idle, unless the records are attached wrongly.
                stuck = Mux(is_word, stall_run == STUCK_CYCLES, idle_run == STUCK_CYCLES)
                with m.If(is_word):
                    m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.eq(word_reg),
                                 watch_stall.eq(1)]
                with m.Else():
                    lanes = Cat(beat_reg.word_select(k, 8 * OB)[:cfg.operand_width]
                                for k in range(host_lanes(cfg)))
                    m.d.comb += [self.host_in.valid.eq(1),
                                 self.host_in.payload.data.eq(lanes),
                                 self.host_in.payload.last.eq(last_flag),
                                 watch_idle.eq(1)]
                with m.If(Mux(is_word, self.cmd.ready, self.host_in.ready)):
                    with m.If(frame_end):
                        m.next = "WAIT"
                    with m.Else():
                        m.next = "RECORD"
                with m.Elif(stuck):
                    fail(BridgeError.NOT_TAKEN, rec_start, frame_end)

            with m.State("SKIP"):
                m.d.comb += [self.active.eq(1), collecting.eq(1), req.ready.eq(1)]
                with m.If(took & req.payload.last):
                    m.next = "WAIT"

            with m.State("WAIT"):
                m.d.comb += [self.active.eq(1), watch_stall.eq(1)]
                idle = ~st.busy & ~self.host_out.valid & c_idle
                waiting = (stall_run >= 2) & c_idle
                with m.If(idle | waiting):
                    snapshot(~idle)
                with m.Else():
                    m.d.comb += collecting.eq(1)

            with m.State("CTRL_READ"):
                m.d.comb += [self.active.eq(1), req.ready.eq(1)]
                with m.If(took):
                    with m.If(req.payload.empty | (offset != 0)):
                        m.d.sync += ctrl_bad.eq(1)
                    with m.Else():
                        m.d.sync += ctrl.eq(byte)
                    with m.If(req.payload.last):
                        m.next = "CTRL_RESET"
            with m.State("CTRL_RESET"):
                m.d.comb += self.active.eq(1)
                known = CTRL_RESET | CTRL_CLEAR_ERROR | CTRL_CLEAR_COUNTERS
                with m.If(ctrl_bad | ((ctrl & ~known) != 0)):
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

            with m.State("REPLY"):
                m.d.comb += [
                    self.active.eq(1),
                    rsp.valid.eq(1),
                    rsp.payload.data.eq(reply_byte),
                    rsp.payload.type.eq(rtype),
                    rsp.payload.last.eq(ridx == rlen - 1),
                    # Driven here (not left at its default) so that Yosys does not emit a
                    # constant-only ``always @*``, which Icarus never evaluates (X).
                    rsp.payload.empty.eq(0),
                    advance.eq(rsp.ready),
                ]
                with m.If(rsp.ready):
                    m.d.sync += ridx.eq(ridx + 1)
                    with m.If(ridx == rlen - 1):
                        m.next = "IDLE"

        # --- host-out beats into the buffer, one byte per clock ----------------------------
        lane_idx = Signal(range(C + 1))
        byte_idx = Signal(range(max(OA, 2)))
        flat = self.host_out.payload.data.as_value()
        raw = flat.word_select(lane_idx, W)
        ext = Cat(raw, raw[-1].replicate(8 * OA - W)) if 8 * OA > W else raw
        out_byte = Mux(lane_idx == C, self.host_out.payload.last, ext.word_select(byte_idx, 8))
        m.d.comb += [wr.addr.eq(wptr), wr.data.eq(out_byte)]
        with m.FSM(name="collect"):
            with m.State("IDLE"):
                m.d.comb += c_idle.eq(1)
                with m.If(collecting & self.host_out.valid):
                    with m.If(beats == cap):
                        m.d.comb += self.host_out.ready.eq(1)
                        m.d.sync += overflow.eq(1)
                        with m.If(dropped != 0xFFFF):
                            m.d.sync += dropped.eq(dropped + 1)
                    with m.Else():
                        m.d.sync += [lane_idx.eq(0), byte_idx.eq(0)]
                        m.next = "BYTES"
            with m.State("BYTES"):
                m.d.comb += wr.en.eq(1)
                m.d.sync += wptr.eq(wptr + 1)
                with m.If(lane_idx == C):
                    m.d.comb += self.host_out.ready.eq(1)
                    m.d.sync += beats.eq(beats + 1)
                    m.next = "IDLE"
                with m.Elif(byte_idx == OA - 1):
                    m.d.sync += [lane_idx.eq(lane_idx + 1), byte_idx.eq(0)]
                with m.Else():
                    m.d.sync += byte_idx.eq(byte_idx + 1)
        return m
