"""Frame receiver and transmitter: the gateware half of the frame format of ``fpga.protocol``.

``FrameReceiver`` turns a byte stream into validated frames held in a buffer memory;
``FrameTransmitter`` sends a reply as a frame (header, payload, CRC) as its payload streams in.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory, ReadPort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from tpugen.fpga.gateware.crc import SerialCRC16
from tpugen.fpga.protocol import MAX_LENGTH, SYNC, ErrorCode, FrameType
from tpugen.hdl.checks import check_int

__all__ = ["FRAME_LAYOUT", "REQUEST_LAYOUT", "REPLY_LAYOUT", "FrameReceiver", "FrameTransmitter"]

#: What ``FrameReceiver.frame`` carries: a frame's type and length, and 0 or its ``ErrorCode``.
FRAME_LAYOUT = data.StructLayout({
    "type": 8,
    "length": 16,
    "error": 8,
})

#: One byte of a request frame's payload (the link endpoint's ``req`` stream). ``type`` and
#: ``length`` are the frame's, the same on all its beats; ``last`` marks the final beat; a frame
#: with no payload is one beat with ``empty`` and ``last`` set (and ``data`` 0).
REQUEST_LAYOUT = data.StructLayout({
    "data": 8,
    "type": 8,
    "length": 16,
    "last": 1,
    "empty": 1,
})

#: One byte of a reply frame's payload (``FrameTransmitter.i``, the link endpoint's ``rsp``).
#: ``type`` and ``length`` (the payload's bytes) are the reply's, the same on all its beats (the
#: frame's header is sent before its payload); a reply with no payload is one beat with
#: ``empty`` and ``last`` set (``length`` 0).
REPLY_LAYOUT = data.StructLayout({
    "data": 8,
    "type": 8,
    "length": 16,
    "last": 1,
    "empty": 1,
})


class FrameReceiver(wiring.Component):
    """Receive frames from a byte stream into a buffer and validate them.

    Parameters:
      max_payload  the largest payload accepted (1..65535 bytes), the buffer's depth.
      timeout      idle timeout, clock cycles (>= 1): a frame with no byte for this long after its
                   SYNC is cut short (``TIMEOUT``); after a bad frame the receiver discards bytes
                   until there has been none for this long, then reports it.
      types        the frame types accepted (others give ``UNKNOWN_TYPE``).

    Ports:
      i           ``In(stream(8))``: the bytes, always ready.
      line_error  ``In(1)``: a pulse for a byte lost to a UART framing error; inside a frame it
                  makes the frame bad (``FRAMING``).
      frame       ``Out(stream(FRAME_LAYOUT))``: a received frame (``error`` 0) or a bad one
                  (``error`` an ``ErrorCode``, ``type``/``length`` as far as received, else 0).
                  While ``valid``, a good frame's payload is in the buffer at addresses
                  0..length-1; the transfer (``ready``) releases the buffer and the receiver
                  goes on. Bytes arriving while a frame waits are discarded and make the next
                  report an ``OVERRUN`` error (after the line has been idle for ``timeout``).
      read        ``Out(ReadPort.Signature(8))``: the buffer's read port, synchronous (``data``
                  is the byte at the ``addr`` of the previous cycle).

    Timing: a good frame is reported eleven clocks after its last CRC byte arrives (the CRC is
    bit-serial, ``crc.SerialCRC16``); a bad one after its last byte plus ``timeout`` idle cycles
    (at once for ``TIMEOUT``). Bytes may come at most one every ten clocks (a UART's come at
    least 30 clocks apart); one that comes sooner after a frame's last byte is an overrun.
    """

    def __init__(self, max_payload: int, timeout: int, types):
        self.max_payload = check_int("max_payload", max_payload, 1, MAX_LENGTH)
        self.timeout = check_int("timeout", timeout, 1)
        try:
            types = tuple(types)
        except TypeError:
            raise TypeError(f"types must be an iterable of frame types, not {types!r}") from None
        for t in types:
            check_int("each of types", t, 0, 0xFF)
        self.types = tuple(sorted(set(int(t) for t in types)))
        super().__init__({
            "i": In(stream.Signature(8)),
            "line_error": In(1),
            "frame": Out(stream.Signature(FRAME_LAYOUT)),
            "read": Out(ReadPort.Signature(addr_width=ceil_log2(self.max_payload), shape=8)),
        })

    def elaborate(self, platform):
        m = Module()
        # Written while a frame comes in, read while it waits (``frame.valid``): a read in a
        # cycle of a write is never used (no read-during-write logic, ``no_rw_check``).
        m.submodules.buffer = mem = Memory(shape=8, depth=self.max_payload, init=[],
                                           attrs={"no_rw_check": 1})
        wr = mem.write_port()
        rd = mem.read_port(domain="sync")
        m.d.comb += [rd.addr.eq(self.read.addr), rd.en.eq(self.read.en),
                     self.read.data.eq(rd.data)]
        m.submodules.crc = crc = SerialCRC16()
        f = _RxFrame(self, crc, wr)
        m.d.comb += [
            self.i.ready.eq(1),
            self.frame.payload.type.eq(f.ftype),
            self.frame.payload.length.eq(f.length),
            self.frame.payload.error.eq(f.error),
            crc.data.eq(f.byte),
            wr.addr.eq(f.idx),
            wr.data.eq(f.byte),
        ]
        for t in self.types:
            with m.If(f.ftype == t):
                m.d.comb += f.known.eq(1)
        self._idle_timer(m, f)
        with m.FSM():
            self._header_states(m, f)
            self._payload_states(m, f)
            self._report_states(m, f)
        return m

    def _idle_timer(self, m, f):
        """``f.quiet``: no byte or line error for ``timeout`` clocks (a register, high from the
        ``timeout``-th quiet clock on)."""
        timer = Signal(range(self.timeout + 1))
        with m.If(f.got | self.line_error):
            m.d.sync += [timer.eq(0), f.quiet.eq(0)]
        with m.Elif(~f.quiet):
            m.d.sync += [timer.eq(timer + 1), f.quiet.eq(timer == self.timeout - 1)]

    def _mid_frame(self, m, f, on_byte):
        """A state inside a frame: line errors, bytes (``on_byte()``), the idle timeout."""
        with m.If(self.line_error):
            m.d.sync += f.error.eq(ErrorCode.FRAMING)
            m.next = "DRAIN"
        with m.Elif(f.got):
            m.d.comb += f.crc.valid.eq(1)
            on_byte()
        with m.Elif(f.quiet):
            m.d.sync += f.error.eq(ErrorCode.TIMEOUT)
            m.next = "DONE"

    def _header_states(self, m, f):
        """HUNT and SYNC (the two SYNC bytes), TYPE, LEN0 and LEN1 (the header)."""
        byte = f.byte
        with m.State("HUNT"):
            with m.If(f.got & (byte == SYNC[0])):
                m.next = "SYNC"
        with m.State("SYNC"):
            with m.If(f.got):
                with m.If(byte == SYNC[1]):
                    m.d.comb += f.crc.clear.eq(1)
                    m.d.sync += [f.ftype.eq(0), f.length.eq(0), f.error.eq(0), f.idx.eq(0)]
                    m.next = "TYPE"
                with m.Elif(byte != SYNC[0]):
                    m.next = "HUNT"
            with m.Elif(f.quiet):
                m.next = "HUNT"
        with m.State("TYPE"):
            def on_type():
                m.d.sync += f.ftype.eq(byte)
                m.next = "LEN0"
            self._mid_frame(m, f, on_type)
        with m.State("LEN0"):
            def on_len0():
                m.d.sync += f.length[:8].eq(byte)
                m.next = "LEN1"
            self._mid_frame(m, f, on_len0)
        with m.State("LEN1"):
            def on_len1():
                length = Cat(f.length[:8], byte)
                m.d.sync += [f.length[8:].eq(byte), f.last_idx.eq(length - 1)]
                with m.If(length > self.max_payload):
                    m.d.sync += f.error.eq(ErrorCode.TOO_LONG)
                    m.next = "DRAIN"
                with m.Elif(length == 0):
                    m.next = "CRC0"
                with m.Else():
                    m.next = "PAYLOAD"
            self._mid_frame(m, f, on_len1)

    def _payload_states(self, m, f):
        """PAYLOAD (into the buffer), CRC0 and CRC1."""
        with m.State("PAYLOAD"):
            def on_payload():
                m.d.comb += f.wr.en.eq(1)
                m.d.sync += f.idx.eq(f.idx + 1)
                # (``length`` <= max_payload here, so ``last_idx`` fits ``idx``'s width.)
                with m.If(f.idx == f.last_idx[:len(f.idx)]):
                    m.next = "CRC0"
            self._mid_frame(m, f, on_payload)
        with m.State("CRC0"):
            def on_crc0():
                m.next = "CRC1"
            self._mid_frame(m, f, on_crc0)
        with m.State("CRC1"):
            def on_crc1():
                m.next = "CHECK"
            self._mid_frame(m, f, on_crc1)

    def _report_states(self, m, f):
        """CHECK (the CRC and the type), DRAIN (a bad frame's rest, until quiet), DONE (the
        frame offered on ``frame``)."""
        intruder = f.got | self.line_error
        with m.State("CHECK"):
            # The CRC over type..CRC is 0 for a good frame, once the last byte is folded in.
            # (No byte can arrive in these cycles from a UART, whose bytes are 30 clocks
            # apart or more; one that does anyway is taken as an overrun.)
            with m.If(intruder):
                m.d.sync += f.overrun.eq(1)
            with m.If(f.crc.busy):
                pass
            with m.Elif(f.crc.crc != 0):
                m.d.sync += f.error.eq(ErrorCode.BAD_CRC)
                m.next = "DRAIN"
            with m.Elif(~f.known):
                m.d.sync += f.error.eq(ErrorCode.UNKNOWN_TYPE)
                m.next = "DRAIN"
            with m.Else():
                m.next = "DONE"
        with m.State("DRAIN"):
            with m.If(f.quiet):
                m.next = "DONE"
        with m.State("DONE"):
            m.d.comb += self.frame.valid.eq(1)
            with m.If(self.frame.ready):
                with m.If(f.overrun | intruder):
                    m.d.sync += [f.error.eq(ErrorCode.OVERRUN), f.ftype.eq(0), f.length.eq(0),
                                 f.overrun.eq(0)]
                    m.next = "DRAIN"
                with m.Else():
                    m.next = "HUNT"
            with m.Elif(intruder):
                m.d.sync += f.overrun.eq(1)


class _RxFrame:
    """A ``FrameReceiver``'s registers (one set per elaboration) and what its states use."""

    def __init__(self, rx: FrameReceiver, crc: SerialCRC16, wr):
        self.ftype = Signal(8)
        self.length = Signal(16)
        self.error = Signal(8)
        self.idx = Signal(range(rx.max_payload))    # write address
        self.overrun = Signal()
        self.quiet = Signal()                       # timer == timeout (a register)
        self.last_idx = Signal(16)                  # length - 1: the payload's last address
        self.known = Signal()                       # ``ftype`` is one of the types accepted
        self.byte = rx.i.payload
        self.got = rx.i.valid
        self.crc = crc
        self.wr = wr


class FrameTransmitter(wiring.Component):
    """Send a reply as a frame (SYNC, type, length, payload, CRC) as its payload streams in.

    Parameters:
      max_payload  the longest reply payload (1..65535 bytes). A reply whose ``length`` is more
                   is sent as an ``ERROR`` frame with payload ``[REPLY_TOO_LONG, type]`` instead
                   (its beats are taken and dropped).

    Ports:
      i  ``In(stream(REPLY_LAYOUT))``: the reply's payload bytes (``type`` and ``length`` on
         every beat). The header goes out from the first beat's ``type`` and ``length``, then
         each beat is taken as its byte goes out (``i.ready`` only then: at the pace of ``o``),
         then the CRC. No buffer: the reply's source holds its bytes.
      o  ``Out(stream(8))``: the frame's bytes, as ``o.ready`` allows and the bit-serial CRC has
         folded in the byte before: one per ten clocks at most (the byte goes to the CRC the
         clock after it is sent, which folds it in over eight; a UART takes one per ten
         bit-times).
    """

    def __init__(self, max_payload: int):
        self.max_payload = check_int("max_payload", max_payload, 1, MAX_LENGTH)
        super().__init__({
            "i": In(stream.Signature(REPLY_LAYOUT)),
            "o": Out(stream.Signature(8)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = crc = SerialCRC16()
        beat = self.i.payload
        ftype = Signal(8)
        length = Signal(16)
        too_long = Signal()
        # A byte sent goes to the CRC a clock later, from registers (``fold_q``, ``fold_byte``:
        # no path from the UART's ready or the reply's source into the CRC's enables).
        fold_q = Signal()
        fold_byte = Signal(8)
        m.d.sync += fold_q.eq(0)
        m.d.comb += [crc.valid.eq(fold_q), crc.data.eq(fold_byte)]
        # The byte offered: one at a time, once the serial CRC has folded in the one before.
        can = ~crc.busy & ~fold_q
        sent = self.o.valid & self.o.ready
        out_type = Mux(too_long, FrameType.ERROR, ftype)
        out_len = Mux(too_long, 2, length)

        def folds(value):
            with m.If(sent):
                m.d.sync += [fold_q.eq(1), fold_byte.eq(value)]

        def byte_out(value, next_state, fold=True):
            m.d.comb += [self.o.valid.eq(can), self.o.payload.eq(value)]
            if fold:
                folds(value)
            with m.If(sent):
                m.next = next_state

        with m.FSM():
            with m.State("IDLE"):
                m.d.sync += [ftype.eq(beat.type), length.eq(beat.length),
                             too_long.eq(beat.length > self.max_payload)]
                with m.If(self.i.valid):
                    m.next = "SYNC0"
            with m.State("SYNC0"):
                byte_out(SYNC[0], "SYNC1", fold=False)
            with m.State("SYNC1"):
                m.d.comb += crc.clear.eq(1)
                byte_out(SYNC[1], "TYPE", fold=False)
            with m.State("TYPE"):
                byte_out(out_type, "LEN0")
            with m.State("LEN0"):
                byte_out(out_len[:8], "LEN1")
            with m.State("LEN1"):
                byte_out(out_len[8:], "PAYLOAD")
                with m.If(sent & (too_long | (length == 0))):
                    m.next = "DROP"
            with m.State("PAYLOAD"):
                m.d.comb += [self.o.valid.eq(can & self.i.valid), self.o.payload.eq(beat.data),
                             self.i.ready.eq(can & self.o.ready)]
                folds(beat.data)
                with m.If(sent & beat.last):
                    m.next = "CRC0"
            with m.State("DROP"):
                # The empty beat of a reply with no payload, or the beats of one too long.
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid & beat.last):
                    with m.If(too_long):
                        m.next = "ERR0"
                    with m.Else():
                        m.next = "CRC0"
            with m.State("ERR0"):
                byte_out(ErrorCode.REPLY_TOO_LONG, "ERR1")
            with m.State("ERR1"):
                byte_out(ftype, "CRC0")
            with m.State("CRC0"):
                # Folding the CRC's high byte in shifts its low byte up: CRC1 sends crc[8:] too.
                byte_out(crc.crc[8:], "CRC1")
            with m.State("CRC1"):
                byte_out(crc.crc[8:], "IDLE", fold=False)
        return m
