"""A small sequential requantizer: TFLite's int8 arithmetic on ``lanes`` lanes at a time, with
shift registers instead of barrel shifters, a bit-serial multiplier and its parameters read a
byte at a time from the parameter store (for FPGAs whose DSP blocks and logic go to the array:
``Config.act_mult == "serial"``)."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.quant_params import WORD_ORDER

__all__ = ["SerialRequant", "serial_requant_cycles"]

#: Cycles of a chunk besides its shifts: start, acc + bias (4, a byte a cycle), the shift (1),
#: the multiplier's bytes (4), the end of the left shift (1), the multiply (32), the end of the
#: right shift (1), zero point, lower and upper bound (3).
_BASE = 1 + 4 + 1 + 4 + 1 + 32 + 1 + 3
#: The parameter words of a chunk (``hdl.quant_params.WORD_ORDER``), read in that order.
_WORDS = len(WORD_ORDER)


def serial_requant_cycles(left: int, right: int) -> int:
    """Cycles from ``start`` to ``done`` of a chunk whose largest left shift is ``left`` and
    largest right shift ``right`` (over its lanes); a ``start`` is taken again in the ``done``
    cycle, so this is also a chunk's period."""
    return _BASE + left + right


class SerialRequant(wiring.Component):
    """Requantize ``lanes`` accumulators, one chunk at a time, reading the chunk's parameters
    from the parameter store (``hdl.quant_params.QuantWordStore``) a word at a time:

        x = (acc + bias) mod 2**32     (a byte a cycle, as the bias bytes come)
        x = (x << max(e, 0)) mod 2**32   (one bit a cycle)
        h = (x * q + 2**30) >> 31, 2**31 saturating to 2**31 - 1     (bit-serial multiply)
        y = h >> s, rounded half away from zero, s = max(-e, 0)      (one bit a cycle)
        out = min(max(y + zp, lo), hi)   (a step a cycle, as zp, lo and hi come)

    Parameters: ``lanes``; ``depth``: the store's words (the width of ``base`` / ``rd_addr``).

    Ports:
      start     ``In(1)``: taken when ``busy`` is low; ``base`` (the address of the chunk's first
                parameter word: the chunk's words are ``base .. base + 11``, in
                ``WORD_ORDER``) is read in that cycle.
      acc_index, acc_byte  the accumulators (``lanes`` x 32 bits, two's complement), a byte
                a cycle, like a read port: ``acc_index`` (0..3, low first) names the byte that
                ``acc_byte`` (that byte of each lane, from a register of the parent's) must
                hold in the next cycle: 0 in the ``start`` cycle, then 1, 2, 3; the bytes are
                taken in the four cycles after ``start``, ``acc_done`` pulses in the last of
                them.
      rd_en, rd_addr  ``Out``: the store's read port (one word a cycle, ``rd_en`` only when a
                word is needed), ``rd_data`` ``In(lanes bytes)``: its word, the cycle after.
      busy      ``Out(1)``: from the cycle after ``start`` until the cycle before ``done``.
      done      ``Out(1)``: one cycle; ``q`` (``lanes`` x int8, registers) holds the results
                from then until the next chunk's results are formed (more than 40 cycles after
                its ``start``).
    Timing: ``serial_requant_cycles(left, right)`` cycles from ``start`` to ``done``, ``left`` /
    ``right`` the largest left / right shift over the lanes.

    Cost per lane: the bias adder and the clamp are 8 and 11 bits wide; the shifts are shift
    registers; the multiply's one 34-bit adder and its product register also do the high
    multiply (its rounding constant preloaded) and the right shift (in place), and the rounding
    is the carry into the zero point's adder.
    """

    def __init__(self, lanes: int, depth: int):
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"lanes must be a positive integer, not {lanes!r}")
        if not isinstance(depth, int) or depth < _WORDS:
            raise ValueError(f"depth must be an integer >= {_WORDS}, not {depth!r}")
        self.lanes, self.depth = lanes, depth
        super().__init__({
            "start": In(1),
            "base": In(range(depth)),
            "acc_byte": In(data.ArrayLayout(8, lanes)),
            "acc_index": Out(range(4)),
            "acc_done": Out(1),
            "rd_en": Out(1),
            "rd_addr": Out(range(depth)),
            "rd_data": In(data.ArrayLayout(8, lanes)),
            "busy": Out(1),
            "done": Out(1),
            "q": Out(data.ArrayLayout(signed(8), lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.lanes
        byte = [self.rd_data[j] for j in range(n)]
        xs = [Signal(32, name=f"x_{j}") for j in range(n)]
        cs = [Signal(name=f"c_{j}") for j in range(n)]                   # the bias add's carry
        es = [Signal(signed(6), name=f"e_{j}") for j in range(n)]
        # The product {hi, lo} (q in lo before), then h = {hi, lo[31]} (its bits 31 and up),
        # shifted right in place.
        his = [Signal(signed(33), name=f"hi_{j}") for j in range(n)]
        los = [Signal(32, name=f"lo_{j}") for j in range(n)]
        sats = [Signal(name=f"sat_{j}") for j in range(n)]               # h is 2**31
        qmins = [Signal(name=f"qmin_{j}") for j in range(n)]             # q is INT32_MIN
        rnd = [Signal(name=f"round_{j}") for j in range(n)]              # last bit shifted out
        sticky = [Signal(name=f"sticky_{j}") for j in range(n)]          # any bit before it
        vs = [Signal(signed(11), name=f"v_{j}") for j in range(n)]       # y + zp, clamped
        count = Signal(range(33))
        paddr = Signal(range(self.depth))
        lefts = [Mux(e[5], 0, e[:5]) for e in es]
        rights = [Mux(e[5], -e, 0) for e in es]

        def read():
            """Read the next parameter word (it is on ``rd_data`` in the next cycle)."""
            m.d.comb += [self.rd_en.eq(1), self.rd_addr.eq(paddr)]
            m.d.sync += paddr.eq(paddr + 1)

        def begin():
            with m.If(self.start):
                m.d.comb += [self.rd_en.eq(1), self.rd_addr.eq(self.base)]
                m.d.sync += [paddr.eq(self.base + 1), count.eq(0)]
                m.next = "BIAS"

        # One adder per lane for the multiply and the right shift: {hi, lo} moves right by one
        # a cycle, hi + x (or - x: the inverted x and a carry in) when lo's low bit says so,
        # else hi alone. The addend and the carry in are registers, formed the cycle before
        # from the bit of lo that comes down next (no path from lo through the 33 multiplexers
        # into the carry chain); zero outside the multiply.
        final = Signal()                  # the multiply's last step comes (a register)
        # LEFT / RIGHT: some lane still shifts in this cycle (a register, set the cycle before)
        more = Signal()
        totals, addends, subs = [], [], []
        for j in range(n):
            addend = Signal(33, name=f"addend_{j}")
            sub = Signal(name=f"sub_{j}")
            m.d.sync += [addend.eq(0), sub.eq(0)]
            total = Signal(signed(34), name=f"mul_sum_{j}")
            m.d.comb += total.eq(his[j] + addend.as_signed() + sub)
            totals.append(total)
            addends.append(addend)
            subs.append(sub)

        def next_addend(j, bit, minus):
            """Set the next step's addend: x (sign-extended to 33 bits) if ``bit``, negated
            (inverted, and the carry in) if ``minus`` too."""
            x = Cat(xs[j], xs[j][31])
            neg = minus & bit
            m.d.sync += [addends[j].eq(Mux(bit, x ^ neg.replicate(33), 0)), subs[j].eq(neg)]

        def step(j):
            m.d.sync += [his[j].eq(totals[j] >> 1), los[j].eq(Cat(los[j][1:], totals[j][0]))]

        m.d.comb += self.q.eq(Cat(v[:8] for v in vs))
        with m.FSM():
            with m.State("IDLE"):
                begin()
            with m.State("BIAS"):
                # Byte ``count`` of acc + bias (little endian) shifts in at the top of x.
                m.d.comb += [self.busy.eq(1), self.acc_index.eq(count[:2] + 1)]
                for j in range(n):
                    s = Signal(9, name=f"bias_sum_{j}")
                    m.d.comb += s.eq(self.acc_byte[j] + byte[j] + Mux(count == 0, 0, cs[j]))
                    m.d.sync += [xs[j].eq(Cat(xs[j][8:], s[:8])), cs[j].eq(s[8])]
                read()
                m.d.sync += count.eq(count + 1)
                with m.If(count == 3):
                    m.d.comb += self.acc_done.eq(1)
                    m.next = "SHIFT"
            with m.State("SHIFT"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [e.eq(b[:6]) for e, b in zip(es, byte, strict=True)]
                read()
                m.d.sync += count.eq(0)
                m.next = "MULT_LOAD"
            with m.State("MULT_LOAD"):
                # q, a byte a cycle, low first, into the top of lo; hi starts at 2**30, so that
                # the product is x * q + 2**30 (the high multiply's rounding constant).
                m.d.comb += self.busy.eq(1)
                for j in range(n):
                    m.d.sync += [los[j].eq(Cat(los[j][8:], byte[j])), his[j].eq(1 << 30),
                                 qmins[j].eq((qmins[j] | (count == 0))
                                             & (byte[j] == Mux(count == 3, 0x80, 0)))]
                with m.If(count != 3):
                    read()
                m.d.sync += count.eq(count + 1)
                with m.If(count == 3):
                    m.d.sync += [count.eq(0), more.eq(Cat(*(v != 0 for v in lefts)).any())]
                    m.next = "LEFT"
            with m.State("LEFT"):
                m.d.comb += self.busy.eq(1)
                for j in range(n):
                    with m.If(count < lefts[j]):
                        m.d.sync += xs[j].eq(xs[j] << 1)
                    # The first step's addend (the last LEFT cycle's x is final: no lane
                    # shifts in it).
                    next_addend(j, los[j][0], 0)
                m.d.sync += [count.eq(count + 1),
                             more.eq(Cat(*(count + 1 < v for v in lefts)).any())]
                with m.If(~more):
                    # h = (x * q + 2**30) >> 31 is 2**31 only for INT32_MIN * INT32_MIN
                    # (``sat``: it saturates to 2**31 - 1, which differs from it after the
                    # rounding shift only in the rounding bit of a shift by 32).
                    for j in range(n):
                        m.d.sync += [sats[j].eq(qmins[j] & (xs[j] == 1 << 31)), rnd[j].eq(0),
                                     sticky[j].eq(0)]
                    m.d.sync += count.eq(0)
                    m.next = "MULT"
            with m.State("MULT"):
                # Shift-and-add, one bit of q a cycle from its low end (the sign bit, last,
                # subtracts x); lo's used bit drops out. Then h = (x * q + 2**30) >> 31 is
                # {hi, lo[31]}.
                m.d.comb += self.busy.eq(1)
                for j in range(n):
                    step(j)
                    # The next step's: lo's next bit, subtracted in the last step (count 31).
                    next_addend(j, ~final & los[j][1], count == 30)
                m.d.sync += [count.eq(count + 1), final.eq(count == 30)]
                with m.If(final):
                    m.d.sync += [count.eq(0), more.eq(Cat(*(v != 0 for v in rights)).any())]
                    m.next = "RIGHT"
            with m.State("RIGHT"):
                # h >> s, a bit a cycle (the bit out of h is lo[31]).
                m.d.comb += self.busy.eq(1)
                for j in range(n):
                    with m.If(count < rights[j]):
                        step(j)
                        m.d.sync += [rnd[j].eq(los[j][31]), sticky[j].eq(sticky[j] | rnd[j])]
                m.d.sync += [count.eq(count + 1),
                             more.eq(Cat(*(count + 1 < v for v in rights)).any())]
                with m.If(~more):
                    read()                                  # the zero point
                    m.next = "ZP"
            with m.State("ZP"):
                # y + zp in 11 bits, y = (h >> s) rounded half away from zero: up when the
                # dropped part is over a half, or exactly a half of a value >= 0 (the sign
                # survives the shift); the rounding bit goes in as the adder's carry. A y
                # outside the 10-bit window saturates by its sign (rounding cannot bring one
                # inside that would not clamp to the same bound).
                m.d.comb += self.busy.eq(1)
                for j in range(n):
                    y = Cat(los[j][31], his[j])
                    top = y[9:]
                    outside = ~(top.all() | ~top.any())
                    up = rnd[j] & (sticky[j] | ~y[-1]) & ~sats[j]
                    m.d.sync += vs[j].eq(Mux(outside, Mux(y[-1], -1024, 1023),
                                             y[:10].as_signed() + byte[0].as_signed() + up))
                read()                                      # the lower bound
                m.next = "LOW"
            with m.State("LOW"):
                m.d.comb += self.busy.eq(1)
                lo = byte[0].as_signed()
                for j in range(n):
                    m.d.sync += vs[j].eq(Mux(vs[j] < lo, lo, vs[j]))
                read()                                      # the upper bound
                m.next = "HIGH_BOUND"
            with m.State("HIGH_BOUND"):
                m.d.comb += self.busy.eq(1)
                hi = byte[0].as_signed()
                for j in range(n):
                    m.d.sync += vs[j].eq(Mux(vs[j] > hi, hi, vs[j]))
                m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                m.next = "IDLE"
                begin()
        return m
