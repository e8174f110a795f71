"""A small sequential requantizer: TFLite's int8 arithmetic on ``lanes`` lanes at a time, with
shift registers instead of barrel shifters and a bit-serial multiplier (for FPGAs whose DSP
blocks and logic go to the array: ``Config.act_mult == "serial"``)."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .quant_params import lane_params_layout, layer_params_layout
from .serial_mult import SerialMultiplier, serial_latency

__all__ = ["SerialRequant", "serial_requant_cycles"]

#: Cycles of a chunk besides its shifts: x = acc + bias (1), the multiplier, the high multiply
#: (1), the rounding add (1), done (1).
_BASE = 1 + serial_latency(32) + 3


def serial_requant_cycles(left: int, right: int) -> int:
    """Cycles from ``start`` to ``done`` of a chunk whose largest left shift is ``left`` and
    largest right shift ``right`` (over its lanes)."""
    return _BASE + left + right


class SerialRequant(wiring.Component):
    """Requantize ``lanes`` accumulators with their parameters, one chunk at a time:

        x = (acc + bias) mod 2**32;  x = (x << max(e, 0)) mod 2**32   (one bit a cycle)
        h = (x * q + 2**30) >> 31, 2**31 saturating to 2**31 - 1     (bit-serial multiply)
        y = h >> s, rounded half away from zero, s = max(-e, 0)      (one bit a cycle)
        out = min(max(y + zp, lo), hi)

    Ports:
      start    ``In(1)``: taken when ``busy`` is low: ``acc`` (``lanes`` x signed 32), ``params``
               (per lane bias, multiplier, shift) are read in that cycle, and ``params`` must
               hold until ``done``; ``layer`` (zero point, bounds) is read in the ``done`` cycle.
      busy     ``Out(1)``: from the cycle after ``start`` to ``done``.
      done     ``Out(1)``: one cycle; ``q`` (``lanes`` x int8) holds the results from then until
               the next ``start``.
    Timing: ``serial_requant_cycles(left, right)`` cycles from ``start`` to ``done``, ``left`` /
    ``right`` the largest left / right shift over the lanes.
    """

    def __init__(self, lanes: int):
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"lanes must be a positive integer, not {lanes!r}")
        self.lanes = lanes
        super().__init__({
            "start": In(1),
            "acc": In(data.ArrayLayout(signed(32), lanes)),
            "params": In(data.ArrayLayout(lane_params_layout(), lanes)),
            "layer": In(layer_params_layout()),
            "busy": Out(1),
            "done": Out(1),
            "q": Out(data.ArrayLayout(signed(8), lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.lanes
        mults = [SerialMultiplier(32, 32) for _ in range(n)]
        for j, mu in enumerate(mults):
            m.submodules[f"mult_{j}"] = mu
        xs = [Signal(signed(32), name=f"x_{j}") for j in range(n)]
        hs = [Signal(signed(33), name=f"h_{j}") for j in range(n)]       # h, then y
        rnd = [Signal(name=f"round_{j}") for j in range(n)]              # last bit shifted out
        sticky = [Signal(name=f"sticky_{j}") for j in range(n)]          # any bit before it
        count = Signal(range(33))
        # One adder per lane for the high multiply's carry and the rounding: total = addend +
        # carry.
        addend = [Signal(signed(33), name=f"addend_{j}") for j in range(n)]
        carry = [Signal(name=f"carry_{j}") for j in range(n)]
        total = [Signal(signed(34), name=f"total_{j}") for j in range(n)]
        for j in range(n):
            m.d.comb += total[j].eq(addend[j] + carry[j])
        lefts = [Mux(p.shift[5], 0, p.shift[:5]) for p in self.params]
        rights = [Mux(p.shift[5], -p.shift, 0) for p in self.params]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    for j in range(n):
                        m.d.sync += xs[j].eq(self.acc[j] + self.params[j].bias)
                    m.d.sync += count.eq(0)
                    m.next = "LEFT"
            with m.State("LEFT"):
                m.d.comb += self.busy.eq(1)
                more = Cat(*(count < v for v in lefts)).any()
                for j in range(n):
                    with m.If(count < lefts[j]):
                        m.d.sync += xs[j].eq(xs[j] << 1)
                m.d.sync += count.eq(count + 1)
                with m.If(~more):
                    for j, mu in enumerate(mults):
                        m.d.comb += [mu.start.eq(1), mu.a.eq(xs[j]),
                                     mu.b.eq(self.params[j].mult)]
                    m.next = "MULT"
            with m.State("MULT"):
                m.d.comb += self.busy.eq(1)
                with m.If(mults[0].done):
                    m.next = "HIGH"
            with m.State("HIGH"):
                m.d.comb += self.busy.eq(1)
                for j, mu in enumerate(mults):
                    # h = (p + 2**30) >> 31 = p[31:] + p[30]; only INT32_MIN * INT32_MIN gives
                    # 2**31 (bit 31 set, sign clear): it saturates to 2**31 - 1.
                    m.d.comb += [addend[j].eq(mu.p[31:]), carry[j].eq(mu.p[30])]
                    sat = ~total[j][33] & total[j][31]
                    m.d.sync += [hs[j].eq(Mux(sat, (1 << 31) - 1, total[j])),
                                 rnd[j].eq(0), sticky[j].eq(0)]
                m.d.sync += count.eq(0)
                m.next = "RIGHT"
            with m.State("RIGHT"):
                m.d.comb += self.busy.eq(1)
                more = Cat(*(count < v for v in rights)).any()
                for j in range(n):
                    with m.If(count < rights[j]):
                        m.d.sync += [hs[j].eq(hs[j] >> 1), rnd[j].eq(hs[j][0]),
                                     sticky[j].eq(sticky[j] | rnd[j])]
                m.d.sync += count.eq(count + 1)
                with m.If(~more):
                    # Round half away from zero: up when the dropped part is over a half, or
                    # exactly a half of a value >= 0 (the sign survives the shift).
                    for j in range(n):
                        m.d.comb += [addend[j].eq(hs[j]),
                                     carry[j].eq(rnd[j] & (sticky[j] | ~hs[j][32]))]
                        m.d.sync += hs[j].eq(total[j])
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.busy.eq(1), self.done.eq(1)]
                m.next = "HOLD"
            with m.State("HOLD"):
                with m.If(self.start):
                    for j in range(n):
                        m.d.sync += xs[j].eq(self.acc[j] + self.params[j].bias)
                    m.d.sync += count.eq(0)
                    m.next = "LEFT"
                with m.Else():
                    m.next = "HOLD"

        # The clamp, from y (hs) and the layer parameters, combinational to q.
        zp, lo, hi = self.layer.zp, self.layer.lo, self.layer.hi
        for j in range(n):
            y = hs[j]
            top = y[9:]
            outside = ~(top.all() | ~top.any())
            neg = y[32]
            v = Signal(signed(11), name=f"v_{j}")
            m.d.comb += v.eq(y[:10].as_signed() + zp)
            below = Mux(outside, neg, v < lo)
            above = Mux(outside, ~neg, v > hi)
            m.d.comb += self.q[j].eq(Mux(above | (below & (lo > hi)), hi,
                                         Mux(below, lo, v[:8])))
        return m
