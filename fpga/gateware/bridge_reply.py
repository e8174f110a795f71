"""The bridge's reply builder: a frame's one reply (RESULT, CONTROL_REPLY or ERROR) as a byte
stream for the link (``ReplyBuilder``). ``fpga.gateware.bridge`` wires it up.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from tpugen.fpga.gateware.framing import REPLY_LAYOUT
from tpugen.fpga.protocol import (
    RESULT_BUSY,
    RESULT_COUNTERS_OFFSET,
    RESULT_ERROR,
    RESULT_HEADER_SIZE,
    RESULT_OVERFLOW,
    RESULT_WAITING,
    FrameType,
    result_beat_size,
)
from tpugen.hdl import isa
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.layouts import STATUS_LAYOUT

__all__ = ["ReplyBuilder"]


class ReplyBuilder(wiring.Component):
    """Sends a frame's reply: ERROR (4 bytes: code, frame type, the record's offset, 16-bit
    little-endian), or the RESULT / CONTROL_REPLY header (``protocol.RESULT_HEADER_FORMAT``)
    followed by the buffered RESULT beats (none for CONTROL_REPLY).

    Parameters: ``config``; ``capacity``, the beats the bridge's buffer holds (>= 1; its
    ``depth`` is ``capacity * result_beat_size(config)`` bytes); ``max_payload`` (1..65535),
    the link's request buffer (the width of ``rec_start``).

    Ports:
      start      ``In(1)``: make the reply now (only while no reply is going out): its kind,
                 length and flags are taken from the inputs in this clock. ``error`` non-zero:
                 ERROR ``error``; else CONTROL_REPLY if ``ftype`` is CONTROL, else RESULT.
      waiting    ``In(1)``: the RESULT_WAITING flag (with ``start``).
      error      ``In(8)``: 0 or the frame's ``ErrorCode`` / ``BridgeError``.
      ftype      ``In(8)``: the request's frame type.
      rec_start  ``In(range(max_payload + 1))``: ERROR: the offending record's offset.
      beats, dropped, overflow  ``In``: the ``BeatCollector``'s counts (the header's), and
                 ``stored``, its ``wptr``: the body's bytes. All must hold from ``start`` to
                 ``done``.
      status     ``In(STATUS_LAYOUT)``: the core's (busy, error, cause, with ``start``).
      snap_hold, snap_next  ``Out(1)``, ``snap_chunk`` ``In(16)``: the core's counter
                 snapshot (``hdl.counter_snapshot``), read for the header's counters.
      rd         ``In(ReadPort.Signature(addr_width=ceil_log2(depth), shape=8))``: to the
                 buffer's synchronous read port.
      rsp        ``Out(stream(REPLY_LAYOUT))``: the reply (``type`` and ``length`` on every
                 beat, ``empty`` 0), to the link.
      done       ``Out(1)``: the reply's last byte is taken in this clock.

    Timing: the reply starts in the clock after ``start``. The counter snapshot keeps the
    counters of the ``start`` clock (``snap_hold`` from the next clock, a register, until the
    header's last byte goes); it is read a 16-bit chunk at a time (the counters in ``Counter``
    order, four chunks each, low first: the header's little-endian 64-bit counters), moved on
    by ``snap_next`` (a register) after each chunk's high byte. The header's byte offered is a
    register, loaded in the clock after the one before goes (a byte per two clocks at most;
    per three after a counter chunk); the body's byte is the buffer's read data at ``rptr``
    (a register), offered in the clock after the read address moved: a byte per two clocks.
    No path runs from ``rsp.ready`` into the header's multiplexers or the read address.
    """

    def __init__(self, config: Config, capacity: int, max_payload: int):
        check_config(config)
        self.capacity = check_int("capacity", capacity, 1)
        self.max_payload = check_int("max_payload", max_payload, 1, 0xFFFF)
        self.depth = self.capacity * result_beat_size(config)
        super().__init__({
            "start": In(1),
            "waiting": In(1),
            "error": In(8),
            "ftype": In(8),
            "rec_start": In(range(self.max_payload + 1)),
            "beats": In(range(self.capacity + 1)),
            "dropped": In(16),
            "overflow": In(1),
            "stored": In(range(self.depth + 1)),
            "status": In(STATUS_LAYOUT),
            "snap_hold": Out(1),
            "snap_next": Out(1),
            "snap_chunk": In(16),
            "rd": In(ReadPort.Signature(addr_width=ceil_log2(self.depth), shape=8)),
            "rsp": Out(stream.Signature(REPLY_LAYOUT)),
            "done": Out(1),
        })

    def _head_byte(self, is_err, hidx, high, snap_flags, snap_cause):
        """The header byte at ``hidx`` (combinational): ERROR's 4 bytes, or the RESULT
        header's flags, cause, beats, dropped, then the counters from the snapshot."""
        beats, rec_start = self.beats, self.rec_start
        small = Array([Cat(snap_flags, Const(0, 4)), Cat(snap_cause, Const(0, 4)),
                       beats[:8], beats[8:16] if len(beats) > 8 else Const(0, 8),
                       self.dropped[:8], self.dropped[8:]])
        assert len(small) == RESULT_COUNTERS_OFFSET
        small_err = Array([self.error, self.ftype, rec_start[:8],
                           rec_start[8:16] if len(rec_start) > 8 else Const(0, 8)])
        counter_byte = Mux(high, self.snap_chunk[8:], self.snap_chunk[:8])
        return Mux(is_err, small_err[hidx[:2]], Mux(hidx < RESULT_COUNTERS_OFFSET,
                                                    small[hidx[:3]], counter_byte))

    def elaborate(self, platform):
        m = Module()
        assert 8 * (RESULT_HEADER_SIZE - RESULT_COUNTERS_OFFSET) == 64 * len(isa.Counter)
        assert isa.COUNTER_CHUNKS == 4
        assert (RESULT_OVERFLOW, RESULT_WAITING, RESULT_BUSY, RESULT_ERROR) == (1, 2, 4, 8)
        rsp, st, depth = self.rsp, self.status, self.depth
        snap_flags = Signal(4)
        snap_cause = Signal(4)
        high = Signal()                # the counter byte offered is its chunk's high byte
        is_err = Signal()              # the reply is ERROR
        rtype = Signal(8)
        # The reply's length (the link sends it before the payload): ERROR 4 bytes, else the
        # header and the buffered beats (a register, set at ``start``).
        reply_length = Signal(16)
        hidx = Signal(range(RESULT_HEADER_SIZE))    # header byte offered
        hbyte, hlast_q, hvalid = Signal(8), Signal(), Signal()   # it, its last flag, valid
        # In the header, as a register: ``snap_hold`` (the enable of the core's whole counter
        # snapshot) comes straight from it, not through the state decoding.
        in_header = Signal()
        m.d.comb += self.snap_hold.eq(in_header)
        snap_next_q = Signal()
        m.d.sync += snap_next_q.eq(0)
        m.d.comb += self.snap_next.eq(snap_next_q)
        rptr = Signal(range(max(depth, 2)))         # buffer byte offered (after the header)
        # The body's byte offered is the block RAM's read data at ``rptr``, its last flag
        # ``rlast_q`` a register; after each byte goes, a clock for the new address
        # (``bwait``), then it is offered (``bvalid``). ``wend`` = stored - 1, a register
        # (steady from the header on).
        bvalid, bwait, rlast_q = Signal(), Signal(), Signal()
        wend = Signal(range(depth + 1))
        m.d.comb += self.rd.addr.eq(rptr)
        m.d.sync += wend.eq(self.stored - 1)
        head_byte = self._head_byte(is_err, hidx, high, snap_flags, snap_cause)

        with m.FSM(name="reply"):
            with m.State("IDLE"):
                with m.If(self.start):
                    # The counter snapshot follows the counters until the header holds it:
                    # it keeps this clock's.
                    err = self.error != 0
                    m.d.sync += [
                        in_header.eq(1),
                        snap_flags.eq(Cat(self.overflow, self.waiting, st.busy, st.error)),
                        snap_cause.eq(st.cause),
                        hidx.eq(0),
                        hvalid.eq(0),
                        high.eq(0),
                        rptr.eq(0),
                        is_err.eq(err),
                        reply_length.eq(Mux(err, 4, RESULT_HEADER_SIZE + self.stored)),
                        rtype.eq(Mux(err, FrameType.ERROR,
                                     Mux(self.ftype == FrameType.CONTROL, FrameType.CONTROL_REPLY,
                                         FrameType.RESULT))),
                    ]
                    m.next = "HEADER"
            with m.State("HEADER"):
                # ERROR: 4 bytes; RESULT / CONTROL_REPLY: the header, then the beats.
                hlast = Mux(is_err, hidx == 3,
                            (hidx == RESULT_HEADER_SIZE - 1) & (self.stored == 0))
                m.d.comb += [
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
                        m.d.comb += self.done.eq(1)
                        m.d.sync += in_header.eq(0)
                        m.next = "IDLE"
                    with m.Elif(hidx == RESULT_HEADER_SIZE - 1):
                        # rptr has been 0 since ``start``: its byte is on the read port.
                        m.d.sync += [bvalid.eq(1), bwait.eq(0), rlast_q.eq(wend == 0),
                                     in_header.eq(0)]
                        m.next = "BODY"
                with m.Elif(~snap_next_q):
                    m.d.sync += [hbyte.eq(head_byte), hlast_q.eq(hlast), hvalid.eq(1)]
            with m.State("BODY"):
                m.d.comb += [
                    rsp.valid.eq(bvalid),
                    rsp.payload.data.eq(self.rd.data),
                    rsp.payload.type.eq(rtype),
                    rsp.payload.length.eq(reply_length),
                    rsp.payload.last.eq(rlast_q),
                    rsp.payload.empty.eq(0),
                ]
                with m.If(bvalid & rsp.ready):
                    m.d.sync += [rptr.eq(rptr + 1), bvalid.eq(0), bwait.eq(1)]
                    with m.If(rlast_q):
                        m.d.comb += self.done.eq(1)
                        m.next = "IDLE"
                with m.Elif(bwait):
                    m.d.sync += [bvalid.eq(1), bwait.eq(0), rlast_q.eq(rptr == wend)]
        return m
