# amaranth: UnusedElaboratable=no
"""The board link's receivers: the UART receiver (``fpga.gateware.uart.UARTReceiver``) and the
frame receiver (``fpga.gateware.framing.FrameReceiver``).

UART receiver, k-induction: whatever the line did before, once it has been high for ``bound``
cycles the receiver is idle (white-box: its FSM's state, a probe, ``observe``), and from there a
byte sent with the baud's exact timing comes out on ``o`` whole: the link is ready for a new
frame within a bounded number of cycles. The solver drives the line (any level, any cycle),
``o.ready`` and ``clear``; the harness's transmitter takes over the line at a moment the solver
picks (after ``bound`` high cycles) and sends ``AnyConst`` byte ``D``; the output stream must
give ``D`` exactly once before the stop bit has ended plus a few cycles. Invariants (white-box):
the FSM's state is one of its three, the bit counter and the baud phase stay in range, a start
bit is checked in the first cycle of BUSY, and the synchronizer's flip-flops follow the line.
Mutants: a bound shorter than the longest byte (the receiver may still be busy); the stop bit
sent low.

Frame receiver, bounded (``frame_harness``): after any noise and a quiet time the good frame is
reported whole, and a frame that differs from it in its payload or its CRC never comes out
with error 0. Ports only: the receiver's insides are not used. Mutants: a consumer that ignores
the frame's error; no quiet time.
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq, Initial
from amaranth.hdl import Array, Assert, Assume, Cat, Const, Cover, Mux, Signal

from tpugen.fpga.gateware.framing import FrameReceiver
from tpugen.fpga.gateware.uart import UARTReceiver
from tpugen.fpga.protocol import SYNC, FrameType, crc16
from tpugen.tb.formal.observe import Harness
from tpugen.tb.formal.stream_check import formal_module

__all__ = ["UART_MUTANTS", "FRAME_MUTANTS", "uart_bound", "uart_harness", "frame_harness"]

#: The UART receiver's FSM states IDLE, BUSY, BREAK as its state register encodes them.
_UART_STATES = (0, 1, 2)
#: The mutants ``uart_harness`` builds.
UART_MUTANTS = ("short_bound", "stop_low")
#: The mutants ``frame_harness`` builds: the frame's error ignored (a bad frame would reach
#: the core); no quiet time before the frame (the receiver may still be in a noise frame).
FRAME_MUTANTS = ("ignore_error", "no_quiet")


def uart_bound(rx: UARTReceiver) -> int:
    """Cycles of high line after which the receiver is idle: the stop bit's sample (the longest
    a byte keeps it busy), the synchronizer's two flip-flops and the cycle that leaves BUSY."""
    return rx.timing.rx_samples[-1] + 4


def uart_harness(clocks_per_bit: int = 4, *, mutant: str | None = None, covers: bool = False):
    """The harness for a receiver at ``clocks_per_bit`` clocks a bit (an integer >= 4)."""
    if mutant is not None and mutant not in UART_MUTANTS:
        raise ValueError(f"mutant must be one of {UART_MUTANTS}, not {mutant!r}")
    rx = UARTReceiver(clocks_per_bit, 1)
    h = Harness()
    m, dut = h.m, h.observe(rx)
    # The receiver's registers (probes). Its FSM's states are numbered in the order its code
    # first names them (Amaranth's FSM): IDLE, BUSY, BREAK.
    state = dut.probe("fsm_state", 2)
    idle, busy_state, brk = _UART_STATES
    bit = dut.probe("bit", range(10))
    phase = dut.probe("rx_phase", rx.timing.phase_width)
    stage0, stage1 = dut.probe("sync_rx.stage0", 1), dut.probe("sync_rx.stage1", 1)
    bound = uart_bound(rx) - (6 if mutant == "short_bound" else 0)
    m.d.comb += [rx.clear.eq(AnySeq(1))]

    # The line: free, until the harness's transmitter sends D.
    frame_cycles = 10 * clocks_per_bit
    sending = Signal()
    t = Signal(range(frame_cycles + 8))         # cycles since the start bit began
    d = AnyConst(8)
    stop = Const(mutant != "stop_low", 1)
    bits = Cat(Const(0, 1), d, stop)            # start, data LSB first, stop
    bit_now = Signal()
    m.d.comb += bit_now.eq(bits.bit_select(t // clocks_per_bit, 1))
    line = Signal()
    m.d.comb += [line.eq(Mux(sending, (t >= frame_cycles) | bit_now, AnySeq(1))),
                 rx.rx.eq(line)]
    high = Signal(range(bound + 1))             # cycles of high line, saturating at ``bound``
    with m.If(~line):
        m.d.sync += high.eq(0)
    with m.Elif(high != bound):
        m.d.sync += high.eq(high + 1)
    with m.If(high == bound):
        m.d.comb += Assert(state == idle, "not idle after the bound")
    # Invariants: the bit counter (9 at most while busy) and the baud phase stay in range.
    busy = state == busy_state
    m.d.comb += [Assert(state <= brk, "an FSM state"),
                 Assert(bit <= Mux(busy, 9, 10)),
                 Assert(phase < rx.timing.modulus),
                 # A start bit is checked in BUSY's first cycle (the phase starts there).
                 Assert(~(busy & (bit == 0)) | (phase == rx.timing.rx_phase)),
                 Assert((high < 1) | stage0),      # the synchronizer
                 Assert((high < 2) | stage1)]

    go = AnySeq(1)
    end = frame_cycles + 4
    with m.If(~sending & (high == bound) & go):
        m.d.sync += [sending.eq(1), t.eq(0)]
    with m.Elif(sending & (t != end)):
        m.d.sync += t.eq(t + 1)
    with m.Elif(sending):
        m.d.sync += sending.eq(0)
    # While sending: o drains at once; D comes out once, and nothing else.
    valid_before = Signal()
    m.d.sync += valid_before.eq(rx.o.valid)
    got = Signal()
    rises = rx.o.valid & ~valid_before
    m.d.comb += rx.o.ready.eq(sending | AnySeq(1))
    with m.If(sending):
        with m.If(rises & (t >= 1)):
            m.d.comb += Assert(rx.o.payload == d, "the byte received is not the byte sent")
            m.d.sync += got.eq(1)
        with m.If(t == end):
            m.d.comb += Assert(got | (rises & (rx.o.payload == d)), "the byte was not received")
            m.d.sync += got.eq(0)
    with m.Else():
        m.d.sync += got.eq(0)
    m.d.comb += [Assert(~got | sending), Assert(t <= end)]
    if covers:
        m.d.comb += Cover(sending & (t == end) & got & (d == 0xA5))
    return h



#: The frame the frame harness sends: a PING with one payload byte, and its CRC (``binascii``,
#: through ``protocol.crc16``: not the gateware's ``lib.crc``).
GOOD_PAYLOAD = 0x5C
GOOD_CRC = crc16(bytes([FrameType.PING, 1, 0, GOOD_PAYLOAD]))


def frame_harness(timeout: int = 12, *, mutant: str | None = None, covers: bool = False):
    """The frame receiver's harness (see ``FRAME_MUTANTS``): bounded model checking.

    Noise first: any bytes (at most one every ten cycles, as the receiver requires), line errors
    and ``frame.ready``, for as long as the solver likes. Then ``quiet`` cycles without a byte
    with ``frame.ready`` high, then one PING frame with a one-byte payload ``P`` and CRC ``c``
    (``AnyConst``), a byte every ten cycles, where ``P`` is ``GOOD_PAYLOAD`` or ``c`` is
    ``GOOD_CRC`` (so a frame differing from the good one in its payload or in its CRC).
    Asserted: the good frame is reported with error 0, its type, length and payload in the
    buffer, within 11 cycles of its last byte (the link was ready for it); any other is never
    reported with error 0 (a bad-CRC frame never reaches the core)."""
    if mutant is not None and mutant not in FRAME_MUTANTS:
        raise ValueError(f"mutant must be one of {FRAME_MUTANTS}, not {mutant!r}")
    rx = FrameReceiver(1, timeout, [FrameType.PING])
    m = formal_module()
    m.submodules.dut = rx
    # Enough for any state: the last noise byte came ten cycles or more before the quiet time,
    # a frame cut short times out ``timeout`` cycles after it, and is then reported and taken.
    quiet = 1 if mutant == "no_quiet" else timeout + 4
    spacing = 10
    phase = Signal(2)                   # 0 noise, 1 quiet, 2 the frame
    t = Signal(range(quiet + 10 * spacing + 40))
    payload, crc = AnyConst(8), AnyConst(16)
    m.d.comb += Assume((payload == GOOD_PAYLOAD) | (crc == GOOD_CRC))
    good = (payload == GOOD_PAYLOAD) & (crc == GOOD_CRC)
    seq = [Const(SYNC[0], 8), Const(SYNC[1], 8), Const(FrameType.PING, 8), Const(1, 8),
           Const(0, 8), payload, crc[8:], crc[:8]]
    index = t // spacing
    sending = (phase == 2) & (t % spacing == 0) & (index < len(seq))
    byte = Array(seq)[index[:3]]

    gap = Signal(range(spacing + 1))    # cycles since the last byte, saturating
    noise_valid = AnySeq(1)
    with m.If(rx.i.valid):
        m.d.sync += gap.eq(1)
    with m.Elif(gap != spacing):
        m.d.sync += gap.eq(gap + 1)
    m.d.comb += Assume(~noise_valid | (gap == spacing) | Initial() | (phase != 0))
    m.d.comb += [
        rx.i.valid.eq(Mux(phase == 0, noise_valid, sending)),
        rx.i.payload.eq(Mux(phase == 0, AnySeq(8), byte)),
        rx.line_error.eq(Mux(phase == 0, AnySeq(1), 0)),
        rx.frame.ready.eq(Mux(phase == 0, AnySeq(1), 1)),
        rx.read.addr.eq(0), rx.read.en.eq(1),
    ]
    with m.If((phase == 0) & AnySeq(1) & (gap == spacing)):
        m.d.sync += [phase.eq(1), t.eq(0)]
    with m.Elif((phase == 1) & (t == quiet - 1)):
        m.d.sync += [phase.eq(2), t.eq(0)]
    with m.Elif(phase != 0):
        m.d.sync += t.eq(t + 1)

    error = Mux(mutant == "ignore_error", 0, rx.frame.payload.error)
    reported, valid_before = Signal(), Signal()
    m.d.sync += valid_before.eq(rx.frame.valid)
    with m.If((phase == 2) & rx.frame.valid & (error == 0)):
        m.d.comb += [
            Assert(good, "a frame with a bad CRC was reported good"),
            Assert(rx.frame.payload.type == FrameType.PING),
            Assert(rx.frame.payload.length == 1),
        ]
        with m.If(valid_before):
            m.d.comb += Assert(rx.read.data == payload, "the payload in the buffer")
        m.d.sync += reported.eq(1)
    last = (len(seq) - 1) * spacing
    with m.If((phase == 2) & (t == last + 12) & good):
        m.d.comb += Assert(reported, "a good frame was not reported")
    if covers:
        m.d.comb += Cover((phase == 2) & reported & (t == last + 12))
    return m
