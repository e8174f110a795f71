"""8N1 UART receiver and transmitter with fractional baud generation.

Bit timing comes from an exact fractional phase accumulator: with ``clk_freq / baud = N / D``
(a reduced fraction), a bit is ``2N`` phase units and every clock adds ``2D``; a bit boundary
(transmitter) or a sample point (receiver) falls on the clock in which the phase passes the next
multiple of ``2N``. The average bit rate is therefore exact (to ``limit_denominator`` of a
non-integral float ratio), and the only timing error left is that boundaries and sample points
land on clock edges:

  transmitter  boundary k (k = 1..10, k = 10 being the end of the stop bit) comes
               ``t_k = ceil(k*P - 1/2)`` clocks after the start bit began, ``P = clk_freq / baud``
               (the phase starts at half a clock, so boundaries are rounded to the nearest clock).
  receiver     after the first clock at which the (synchronized) line is seen low, bit k
               (0 = start, 1..8 data LSB first, 9 = stop) is sampled ``n_k = ceil((k + 1/2)*P - 1)``
               clocks later: the nearest clock to the middle of the bit given that the edge
               came, on average, half a clock before it was seen.

``baud_timing`` computes these exactly and the worst-case timing error: the largest deviation,
in clocks, of a transmitted boundary from ``k*P`` or of a sample point from the bit middle
``(k + 1/2)*P - 1/2``, divided by the 9.5 bit-times from the start edge to the middle of the stop
bit. That is the rate error which would move the stop bit's sample point (the one a rate error
moves the most) by as much, so it is directly comparable with a baud-rate error and is what
``MAX_TIMING_ERROR`` (1.5%) bounds. The error is at most half a clock spread over 9.5 bits, so
any ratio of about 3.5 clocks per bit or more passes: 3 Mbaud from 12 MHz (4 clocks per bit,
1.32%), 24 MHz or 48 MHz; 3 Mbaud from 10 MHz (3.33 clocks per bit) fails with 1.58%.
The receiver's own uncertainty of up to one clock about when the start edge came is inherent to
sampling an asynchronous line and is not counted (it is the same for every baud scheme).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["MAX_TIMING_ERROR", "MIN_CLOCKS_PER_BIT", "BaudTiming", "baud_timing",
           "UARTReceiver", "UARTTransmitter"]

#: The largest worst-case timing error (as an equivalent rate error) a UART accepts.
MAX_TIMING_ERROR = 0.015
#: Fewer clocks per bit leave the receiver no clock between the start edge and its sample.
MIN_CLOCKS_PER_BIT = 3
#: Bound on the accumulator's denominator for non-integral (float) clock/baud ratios.
_MAX_DENOMINATOR = 1 << 16


def _check_rate(name: str, value) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number (Hz), not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number (Hz), not {value!r}")
    return Fraction(value)


@dataclass(frozen=True)
class BaudTiming:
    """The exact timing of the UARTs for one ``clk_freq`` and ``baud`` (see the module doc).

    ``modulus`` and ``step`` are the accumulator's phase units per bit and per clock;
    ``tx_phase`` and ``rx_phase`` its start values. ``tx_boundaries[k - 1]`` is ``t_k``
    (k = 1..10), ``rx_samples[k]`` is ``n_k`` (k = 0..9). ``error`` is the worst-case timing
    error as an equivalent rate error (0.0132 means 1.32%).
    """

    clk_freq: Fraction
    baud: Fraction
    clocks_per_bit: Fraction
    modulus: int
    step: int
    tx_phase: int
    rx_phase: int
    tx_boundaries: tuple
    rx_samples: tuple
    error: float

    @property
    def phase_width(self) -> int:
        """Bits of the accumulator (it holds up to ``modulus + step - 1``)."""
        return (self.modulus + self.step - 1).bit_length()


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def baud_timing(clk_freq, baud, *, max_error: float = MAX_TIMING_ERROR) -> BaudTiming:
    """Validate ``clk_freq`` and ``baud`` and compute the UART timing for them.

    Raises ``TypeError``/``ValueError`` naming the bad argument, and ``ValueError`` naming both
    and the error in % when the worst-case timing error exceeds ``max_error``.
    """
    clk = _check_rate("clk_freq", clk_freq)
    rate = _check_rate("baud", baud)
    if isinstance(max_error, bool) or not isinstance(max_error, Real) or not max_error > 0:
        raise ValueError(f"max_error must be a positive number, not {max_error!r}")
    p = clk / rate
    if p < MIN_CLOCKS_PER_BIT:
        raise ValueError(
            f"clk_freq {float(clk_freq):.10g} Hz is only {float(p):.3g} clocks per bit at baud "
            f"{float(baud):.10g}; the UART needs at least {MIN_CLOCKS_PER_BIT}")
    real = p.limit_denominator(_MAX_DENOMINATOR)
    modulus, step = 2 * real.numerator, 2 * real.denominator
    tx_phase = real.denominator                       # half a clock
    rx_phase = real.numerator + 2 * real.denominator  # half a bit plus one clock
    tx = tuple(_ceil_div(k * modulus - tx_phase, step) for k in range(1, 11))
    rx = tuple(_ceil_div((k + 1) * modulus - rx_phase, step) for k in range(10))
    half = Fraction(1, 2)
    worst = max([abs(t - k * p) for k, t in enumerate(tx, start=1)]
                + [abs(n - ((k + half) * p - half)) for k, n in enumerate(rx)])
    error = float(worst / (Fraction(19, 2) * p))
    if error > max_error:
        raise ValueError(
            f"clk_freq {float(clk_freq):.10g} Hz cannot make baud {float(baud):.10g}: "
            f"{float(p):.4g} clocks per bit give a worst-case timing error of {100 * error:.3f}% "
            f"(the limit is {100 * max_error:g}%)")
    return BaudTiming(clk, rate, p, modulus, step, tx_phase, rx_phase, tx, rx, error)


class _Phase:
    """The fractional accumulator: ``tick`` is high in the clock a boundary/sample falls on."""

    def __init__(self, m: Module, timing: BaudTiming, name: str):
        self.timing = timing
        self.acc = Signal(timing.phase_width, name=f"{name}_phase")
        self.nxt = Signal(timing.phase_width, name=f"{name}_phase_next")
        self.tick = Signal(name=f"{name}_tick")
        m.d.comb += [
            self.nxt.eq(self.acc + timing.step),
            self.tick.eq(self.nxt >= timing.modulus),
        ]

    def advance(self, m: Module):
        m.d.sync += self.acc.eq(Mux(self.tick, self.nxt - self.timing.modulus, self.nxt))

    def start(self, m: Module, phase: int):
        m.d.sync += self.acc.eq(phase)


class UARTReceiver(wiring.Component):
    """8N1 UART receiver.

    Ports:
      rx             ``In(1)``, idle high: the line, asynchronous (synchronized by two flops).
      o              ``Out(stream(8))``: received bytes, one register deep. A byte that
                     completes while the previous one is still waiting is dropped (``overrun``).
      framing_error  ``Out(1)``: a one-cycle pulse (registered, the clock after the stop bit's
                     sample) when a stop bit was 0; the byte is dropped and the receiver waits
                     for the line to go high (so a break is one error).
      overrun        ``Out(1)``: a one-cycle pulse (registered) when a byte was dropped because
                     ``o`` was still full.
      error          ``Out(1)``: sticky, set by either pulse, cleared by ``clear``.
      clear          ``In(1)``: clears ``error``.

    Timing: the start edge is seen 2-3 clocks after it happens (synchronizer); the start bit is
    checked at its middle (a glitch shorter than half a bit is ignored), the data and stop bits at
    theirs; ``o.valid`` rises the clock after the stop bit's sample, about 9.5 bit-times plus 3
    clocks after the start edge, so bytes may follow each other with no gap.
    """

    def __init__(self, clk_freq, baud):
        self.timing = baud_timing(clk_freq, baud)
        super().__init__({
            "rx": In(1, init=1),
            "o": Out(stream.Signature(8)),
            "framing_error": Out(1),
            "overrun": Out(1),
            "error": Out(1),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, line, init=1)

        phase = _Phase(m, self.timing, "rx")
        bit = Signal(range(10))
        shreg = Signal(8)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.sync += [self.framing_error.eq(0), self.overrun.eq(0)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    phase.start(m, self.timing.rx_phase)
                    m.d.sync += bit.eq(0)
                    m.next = "BUSY"
            with m.State("BUSY"):
                phase.advance(m)
                with m.If(phase.tick):
                    m.d.sync += bit.eq(bit + 1)
                    with m.If(bit == 0):
                        with m.If(line):  # not a start bit after all: a glitch
                            m.next = "IDLE"
                    with m.Elif(bit == 9):
                        with m.If(line):
                            with m.If(self.o.valid & ~self.o.ready):
                                m.d.sync += self.overrun.eq(1)
                            with m.Else():
                                m.d.sync += [self.o.payload.eq(shreg), self.o.valid.eq(1)]
                            m.next = "IDLE"
                        with m.Else():
                            m.d.sync += self.framing_error.eq(1)
                            m.next = "BREAK"
                    with m.Else():
                        m.d.sync += shreg.eq(Cat(shreg[1:], line))
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"

        with m.If(self.framing_error | self.overrun):
            m.d.sync += self.error.eq(1)
        with m.Elif(self.clear):
            m.d.sync += self.error.eq(0)
        return m


class UARTTransmitter(wiring.Component):
    """8N1 UART transmitter.

    Ports:
      i    ``In(stream(8))``: bytes to send. ``ready`` is high while the one-byte holding register
           is empty, so a byte is taken while the previous one is still shifting out and bytes
           leave back to back (no idle time between a stop bit and the next start bit).
      tx   ``Out(1)``, idle high: the line, registered.
      busy ``Out(1)``: a byte is being sent or waiting.

    Timing: a byte transferred in clock c starts its start bit at c + 2 when the line was idle;
    boundaries then follow at ``BaudTiming.tx_boundaries``.
    """

    def __init__(self, clk_freq, baud):
        self.timing = baud_timing(clk_freq, baud)
        super().__init__({
            "i": In(stream.Signature(8)),
            "tx": Out(1, init=1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        hold = Signal(8)
        full = Signal()
        sending = Signal()
        bit = Signal(range(10))
        shreg = Signal(9)
        phase = _Phase(m, self.timing, "tx")

        m.d.comb += [
            self.i.ready.eq(~full),
            self.busy.eq(full | sending),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [hold.eq(self.i.payload), full.eq(1)]

        end = sending & phase.tick & (bit == 9)
        with m.If(full & (~sending | end)):
            phase.start(m, self.timing.tx_phase)
            m.d.sync += [
                self.tx.eq(0),
                shreg.eq(Cat(hold, 1)),
                bit.eq(0),
                sending.eq(1),
                full.eq(0),
            ]
        with m.Elif(sending):
            phase.advance(m)
            with m.If(phase.tick):
                with m.If(bit == 9):
                    m.d.sync += sending.eq(0)
                with m.Else():
                    m.d.sync += [
                        self.tx.eq(shreg[0]),
                        shreg.eq(shreg[1:]),
                        bit.eq(bit + 1),
                    ]
        return m
