"""The board's end of the host link: UART, frames, and the replies the link gives by itself."""

import math
from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tpugen.fpga.gateware.framing import (
    REPLY_LAYOUT,
    REQUEST_LAYOUT,
    FrameReceiver,
    FrameTransmitter,
)
from tpugen.fpga.gateware.uart import BaudTiming, UARTReceiver, UARTTransmitter, baud_timing
from tpugen.fpga.protocol import (
    DEFAULT_MAX_PAYLOAD,
    LINK_ID_SIZE,
    MAX_LENGTH,
    REPLY_BIT,
    FrameType,
    encode_link_id,
    reply_type,
)
from tpugen.hdl.checks import check_int

__all__ = ["LinkEndpoint", "LinkParameters", "link_parameters", "DEFAULT_TIMEOUT_SECONDS",
           "MIN_TIMEOUT_BITS"]

#: The idle timeout when none is given: long enough for gaps in a USB-UART's stream.
DEFAULT_TIMEOUT_SECONDS = 0.01
#: A byte is 10 bit-times, so a shorter timeout would fire between the bytes of a good frame.
MIN_TIMEOUT_BITS = 12


@dataclass(frozen=True)
class LinkParameters:
    """A ``LinkEndpoint``'s parameters, validated and with the defaults filled in
    (``link_parameters``): ``id_bytes`` is the whole ID reply payload, ``timeout_cycles`` the
    idle timeout in clocks."""

    timing: BaudTiming
    max_payload: int
    max_reply: int
    id_bytes: bytes
    timeout_bits: int
    timeout_cycles: int
    inside_types: tuple


def link_parameters(clk_freq, baud, *, max_payload=DEFAULT_MAX_PAYLOAD, max_reply=None,
                    id_payload=b"", timeout_bits=None,
                    inside_types=(FrameType.PROGRAM,)) -> LinkParameters:
    """Validate ``LinkEndpoint``'s parameters (see there) without building it; raises
    ``TypeError`` / ``ValueError`` naming the bad one."""
    timing = baud_timing(clk_freq, baud)
    max_payload = check_int("max_payload", max_payload, 1, MAX_LENGTH)
    if not isinstance(id_payload, bytes | bytearray | memoryview):
        raise TypeError(f"id_payload must be bytes, not {id_payload!r}")
    id_length = LINK_ID_SIZE + len(id_payload)
    if max_reply is None:
        max_reply = max(max_payload, id_length)
    max_reply = check_int("max_reply", max_reply, 2, MAX_LENGTH)
    if id_length > max_reply:
        raise ValueError(
            f"id_payload must fit max_reply with the {LINK_ID_SIZE}-byte link ID: "
            f"at most {max_reply - LINK_ID_SIZE} bytes, not {len(id_payload)}")
    id_bytes = encode_link_id(max_payload=max_payload, max_reply=max_reply,
                              clk_freq=round(clk_freq), baud=round(baud)) + bytes(id_payload)
    if timeout_bits is None:
        timeout_bits = max(MIN_TIMEOUT_BITS, math.ceil(DEFAULT_TIMEOUT_SECONDS * baud))
    timeout_bits = check_int("timeout_bits", timeout_bits, MIN_TIMEOUT_BITS)
    try:
        inside_types = tuple(inside_types)
    except TypeError:
        raise TypeError(
            f"inside_types must be an iterable of frame types, not {inside_types!r}") from None
    for t in inside_types:
        check_int("each of inside_types", t, 0, REPLY_BIT - 1)
        if t in (FrameType.PING, FrameType.ID):
            raise ValueError(f"inside_types must not contain PING or ID, not {t!r}")
    return LinkParameters(timing=timing, max_payload=max_payload, max_reply=max_reply,
                          id_bytes=id_bytes, timeout_bits=timeout_bits,
                          timeout_cycles=math.ceil(timeout_bits * timing.clocks_per_bit),
                          inside_types=tuple(sorted(set(int(t) for t in inside_types))))


class LinkEndpoint(wiring.Component):
    """UART + frame receiver + frame transmitter + the link's own replies.

    Answers PING (echoes the payload in a PING_REPLY), ID (an ID_REPLY of ``encode_link_id``'s
    bytes followed by ``id_payload``) and every bad frame (an ERROR; see ``fpga.protocol``) by
    itself, and passes frames of ``inside_types`` to the inside, which must answer each with
    exactly one reply.

    Parameters:
      clk_freq, baud  the clock (Hz) and the UART bit rate (see ``fpga.uart.baud_timing``).
      max_payload     largest request payload (1..65535), the request buffer's depth.
      max_reply       largest reply payload (2..65535; by default ``max_payload`` or the ID
                      reply's length if that is more): longer ones are refused.
      id_payload      bytes, the board part of the ID reply (``protocol.board_id_from_config``).
      timeout_bits    idle timeout in bit-times (>= 12; default 10 ms worth): a frame with no
                      byte for this long is cut short; an ERROR reply waits for this much quiet.
      inside_types    request types passed to the inside (default PROGRAM); 0x00..0x7F, not
                      PING or ID.

    Ports:
      rx, tx      the UART lines (idle high); ``rx`` is synchronized inside.
      req         ``Out(stream(REQUEST_LAYOUT))``: one request frame's payload for the inside,
                  ``max(length, 1)`` beats (``data``; frame ``type`` and ``length`` on every
                  beat; ``last`` on the final one; a frame with no payload is one beat with
                  ``empty`` and ``last``).
      rsp         ``In(stream(REPLY_LAYOUT))``: the inside's one reply to it: payload bytes with
                  the reply ``type`` (e.g. RESULT, or ERROR with a code >= ``ErrorCode.INSIDE``)
                  and its ``length`` on every beat, ``last`` on the final beat (one ``empty`` +
                  ``last`` beat for no payload). It is sent as it comes (no buffer: each beat is
                  taken as its byte goes out on the UART), and may start before the request has
                  been consumed; one longer than ``max_reply`` becomes an ERROR (REPLY_TOO_LONG).
                  The request is over at the reply's ``last`` transfer: request beats not yet
                  taken are dropped, and ``rsp.ready`` stays low until the next request.
      good_frame  ``Out(1)``: a pulse for each good request frame (for an LED).
      bad_frame   ``Out(1)``: a pulse for each ERROR reply the link sends by itself.

    Timing: a request is handed about ten clocks after its last CRC byte (the CRC is checked
    bit-serially, see ``FrameReceiver``), a byte every three clocks (``req`` and the replies of
    the link's own come from a register: the buffers' read data goes into it, never through
    logic; ``req.valid`` is a register too); the reply's beats go through a one-beat register
    (``rsp.ready`` is high while it is empty: no path from the frame transmitter into the
    inside), so its frame starts a clock after the reply's first beat is offered and goes out at
    one byte per 10 bit-times, the reply's beats taken at that pace (the request buffer is held
    until the last one). The next request is received while the reply's CRC is being sent.
    """

    def __init__(self, clk_freq, baud, *, max_payload=DEFAULT_MAX_PAYLOAD, max_reply=None,
                 id_payload=b"", timeout_bits=None, inside_types=(FrameType.PROGRAM,)):
        p = link_parameters(clk_freq, baud, max_payload=max_payload, max_reply=max_reply,
                            id_payload=id_payload, timeout_bits=timeout_bits,
                            inside_types=inside_types)
        self.timing = p.timing
        self.clk_freq, self.baud = clk_freq, baud
        self.max_payload, self.max_reply = p.max_payload, p.max_reply
        self.id_bytes = p.id_bytes
        self.timeout_bits, self.timeout_cycles = p.timeout_bits, p.timeout_cycles
        self.inside_types = p.inside_types
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "req": Out(stream.Signature(REQUEST_LAYOUT)),
            "rsp": In(stream.Signature(REPLY_LAYOUT)),
            "good_frame": Out(1),
            "bad_frame": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = urx = UARTReceiver(self.clk_freq, self.baud)
        m.submodules.uart_tx = utx = UARTTransmitter(self.clk_freq, self.baud)
        m.submodules.frx = frx = FrameReceiver(
            self.max_payload, self.timeout_cycles,
            (FrameType.PING, FrameType.ID) + self.inside_types)
        m.submodules.ftx = ftx = FrameTransmitter(self.max_reply)
        # The ID reply's bytes in a block RAM (its read data goes into the ``byte`` register
        # only), not in logic.
        m.submodules.id_rom = rom = Memory(shape=8, depth=len(self.id_bytes),
                                           init=list(self.id_bytes),
                                           attrs={"ram_style": "block"})
        rom_rd = rom.read_port(domain="sync")
        m.d.comb += [
            urx.rx.eq(self.rx),
            self.tx.eq(utx.tx),
            frx.line_error.eq(urx.framing_error),
        ]
        wiring.connect(m, urx.o, frx.i)
        wiring.connect(m, ftx.o, utx.i)

        s = _LinkSource(max(self.max_payload, len(self.id_bytes), 2))
        m.d.comb += [
            frx.read.addr.eq(s.idx),
            rom_rd.addr.eq(s.idx),
        ]
        self._byte_register(m, s)
        with m.FSM():
            self._dispatch(m, s, frx)
            self._own_replies(m, s, frx, ftx, rom_rd)
            self._inside(m, s, frx, ftx)
            with m.State("ACK"):
                m.d.comb += frx.frame.ready.eq(1)
                m.d.sync += s.idx.eq(0)
                m.next = "IDLE"
        return m

    @staticmethod
    def _byte_register(m, s):
        """The byte offered comes from a register (``byte``), never straight from a block RAM
        (the request buffer's or the ID ROM's read data only goes into it): the buffers are
        read at ``idx`` and their data taken in the cycle after (``phase`` 1), then offered
        (``phase`` 2) until taken (``advance``); so one byte per three clocks (a UART byte is
        30 or more). ``last`` is a register too, set with the byte (``idx`` and ``final`` hold
        meanwhile)."""
        with m.If(s.advance):
            m.d.sync += [s.idx.eq(s.idx + 1), s.phase.eq(0)]
        with m.Elif(s.phase == 1):
            m.d.sync += [s.byte.eq(s.source), s.last.eq(s.empty | (s.idx == s.final)),
                         s.phase.eq(2)]
        with m.Elif(s.phase == 0):
            m.d.sync += s.phase.eq(1)

    def _dispatch(self, m, s, frx):
        """IDLE: a frame from the receiver picks the state that answers it (ERROR for a bad
        one, PING, ID, or INSIDE for the inside's types), which reads ``n`` source bytes."""
        info = frx.frame.payload

        def start(n):
            m.d.sync += [s.empty.eq(n == 0), s.total.eq(n), s.final.eq(n - 1), s.phase.eq(0)]

        with m.State("IDLE"):
            m.d.sync += [s.idx.eq(0), s.req_done.eq(0), s.req_valid.eq(0), s.rq_valid.eq(0),
                         s.rsp_done.eq(0)]
            with m.If(frx.frame.valid):
                with m.If(info.error != 0):
                    m.d.comb += self.bad_frame.eq(1)
                    start(2)
                    m.next = "ERROR"
                with m.Else():
                    m.d.comb += self.good_frame.eq(1)
                    with m.If(info.type == FrameType.PING):
                        start(info.length)
                        m.next = "PING"
                    with m.Elif(info.type == FrameType.ID):
                        start(len(self.id_bytes))
                        m.next = "ID"
                    with m.Else():
                        start(info.length)
                        m.next = "INSIDE"

    @staticmethod
    def _own_replies(m, s, frx, ftx, rom_rd):
        """ERROR (``[error, type]``), PING (the request's payload back) and ID (the ROM): the
        link's own replies, from the byte register to the frame transmitter."""
        info = frx.frame.payload
        offered = s.phase == 2

        def reply_from(rtype):
            m.d.comb += [
                ftx.i.valid.eq(offered),
                ftx.i.payload.data.eq(s.byte),
                ftx.i.payload.type.eq(rtype),
                ftx.i.payload.length.eq(s.total),
                ftx.i.payload.last.eq(s.last),
                ftx.i.payload.empty.eq(s.empty),
                s.advance.eq(offered & ftx.i.ready),
            ]
            with m.If(s.advance & s.last):
                m.next = "ACK"

        with m.State("ERROR"):
            m.d.comb += s.source.eq(Mux(s.idx == 0, info.error, info.type))
            reply_from(FrameType.ERROR)
        with m.State("PING"):
            m.d.comb += s.source.eq(frx.read.data)
            reply_from(reply_type(FrameType.PING))
        with m.State("ID"):
            m.d.comb += s.source.eq(rom_rd.data)
            reply_from(reply_type(FrameType.ID))

    def _inside(self, m, s, frx, ftx):
        """INSIDE: the request to ``req``, the inside's reply from ``rsp`` to the transmitter.
        Both ways through registers, so that no path runs between the inside's logic and the
        link's: ``req.valid`` is a register (``req_valid``, set with the byte it offers); the
        reply's beats go through a one-beat register (``rq``; ready while it is empty: a beat
        per two clocks at most, against the UART's one per ten bit-times)."""
        info = frx.frame.payload
        with m.State("INSIDE"):
            m.d.comb += s.source.eq(frx.read.data)
            m.d.comb += [
                self.req.valid.eq(s.req_valid),
                self.req.payload.data.eq(s.byte),
                self.req.payload.type.eq(info.type),
                self.req.payload.length.eq(info.length),
                self.req.payload.last.eq(s.last),
                self.req.payload.empty.eq(s.empty),
                s.advance.eq(self.req.valid & self.req.ready),
            ]
            with m.If(s.advance):
                m.d.sync += s.req_valid.eq(0)
                with m.If(s.last):
                    m.d.sync += s.req_done.eq(1)
            with m.Elif((s.phase == 1) & ~s.req_done & ~s.rsp_done):
                m.d.sync += s.req_valid.eq(1)
            m.d.comb += [
                ftx.i.payload.eq(s.rq),
                ftx.i.valid.eq(s.rq_valid),
                self.rsp.ready.eq(~s.rq_valid & ~s.rsp_done),
            ]
            with m.If(self.rsp.valid & self.rsp.ready):
                m.d.sync += [s.rq.eq(self.rsp.payload), s.rq_valid.eq(1),
                             s.rsp_done.eq(self.rsp.payload.last)]
                with m.If(self.rsp.payload.last):     # the request is over
                    m.d.sync += s.req_valid.eq(0)
            with m.If(ftx.i.valid & ftx.i.ready):
                m.d.sync += s.rq_valid.eq(0)
                with m.If(s.rq.last):
                    m.d.sync += s.req_valid.eq(0)
                    m.next = "ACK"


class _LinkSource:
    """A ``LinkEndpoint``'s registers (one set per elaboration): the source being read (the
    request buffer, the ID ROM or the error bytes) and the reply register of INSIDE. ``most``
    is the longest source."""

    def __init__(self, most: int):
        self.idx = Signal(range(most + 1))     # read address of the byte offered
        self.total = Signal(range(most + 1))   # bytes of the source (a register, set at the start)
        self.final = Signal.like(self.idx)     # total - 1: the address of the source's last byte
        self.empty = Signal()       # the source has no bytes (one empty beat is offered)
        self.last = Signal()        # the byte offered is the source's last (a register)
        self.advance = Signal()     # the byte offered is taken
        self.phase = Signal(range(3))
        self.byte = Signal(8)
        self.source = Signal(8)     # the byte at ``idx`` of the state's source
        self.req_done = Signal()
        self.req_valid = Signal()                          # INSIDE: a byte is offered on ``req``
        self.rq, self.rq_valid = Signal(REPLY_LAYOUT), Signal()   # INSIDE: the reply's beat, held
        self.rsp_done = Signal()                           # the reply's last beat came
