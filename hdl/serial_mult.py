"""A bit-serial signed multiplier: one adder, one bit of the multiplier per cycle."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SerialMultiplier", "serial_latency"]


def serial_latency(b_width: int) -> int:
    """Cycles from ``start`` to ``done`` of a ``SerialMultiplier`` with ``b_width``."""
    return b_width + 1


class SerialMultiplier(wiring.Component):
    """``p = a * b`` for signed ``a`` (``a_width`` bits) and ``b`` (``b_width`` bits), exact
    (``a_width + b_width`` bits), by shift-and-add: ``b_width + 1`` cycles, one ``a_width + 2``-bit
    adder and the product register, no multiplier (for FPGAs whose DSP blocks are taken).

    Ports:
      start   ``In(1)``: when high and ``busy`` is low, ``a`` and ``b`` are taken.
      a, b    ``In(signed)``: the operands, read in the ``start`` cycle only.
      busy    ``Out(1)``: high from the cycle after ``start`` until ``done``.
      done    ``Out(1)``: a one-cycle pulse; ``p`` holds the product from then until the next
              ``start``.
      p       ``Out(signed(a_width + b_width))``.

    Timing: ``start`` in cycle 0, ``done`` and ``p`` in cycle ``b_width + 1`` (``latency``); a
    new ``start`` is taken in the ``done`` cycle, so a product every ``b_width + 1`` cycles.
    """

    def __init__(self, a_width: int, b_width: int):
        for name, v in (("a_width", a_width), ("b_width", b_width)):
            if not isinstance(v, int) or v < 2:
                raise ValueError(f"{name} must be an integer >= 2, not {v!r}")
        self.a_width, self.b_width = a_width, b_width
        super().__init__({
            "start": In(1),
            "a": In(signed(a_width)),
            "b": In(signed(b_width)),
            "busy": Out(1),
            "done": Out(1),
            "p": Out(signed(a_width + b_width)),
        })

    @property
    def latency(self) -> int:
        """Cycles from ``start`` to ``done``."""
        return serial_latency(self.b_width)

    def elaborate(self, platform):
        m = Module()
        aw, bw = self.a_width, self.b_width
        a = Signal(signed(aw))
        hi = Signal(signed(aw + 1))      # the running sum of partial products, high part
        lo = Signal(bw)                  # multiplier bits not yet used, then the product's low
        count = Signal(range(bw + 1))
        last = count == bw - 1
        m.d.comb += self.p.eq(Cat(lo, hi[:aw]).as_signed())

        # Bit i of b weighs 2**i, the sign bit -2**(bw - 1): add a, or subtract it at the end.
        addend = Signal(signed(aw + 1))
        m.d.comb += addend.eq(0)
        with m.If(lo[0]):
            m.d.comb += addend.eq(Mux(last, -a, a))
        total = Signal(signed(aw + 2))
        m.d.comb += total.eq(hi + addend)

        m.d.sync += self.done.eq(0)
        with m.If(self.busy):
            # Shift {total, lo} right by one (arithmetic); the used bit of b drops out.
            m.d.sync += [hi.eq(total >> 1), lo.eq(Cat(lo[1:], total[0])), count.eq(count + 1)]
            with m.If(last):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        with m.Elif(self.start):
            m.d.sync += [a.eq(self.a), hi.eq(0), lo.eq(self.b), count.eq(0), self.busy.eq(1)]
        return m
