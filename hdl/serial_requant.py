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
        dp = _Datapath(m, self)
        m.d.comb += self.q.eq(Cat(v[:8] for v in dp.vs))
        # The FSM: one state per step of a chunk, in order (each a ``_Datapath`` method).
        with m.FSM():
            for state, action in (("IDLE", dp.begin), ("BIAS", dp.bias), ("SHIFT", dp.shift),
                                  ("MULT_LOAD", dp.mult_load), ("LEFT", dp.left),
                                  ("MULT", dp.mult), ("RIGHT", dp.right), ("ZP", dp.zp),
                                  ("LOW", dp.low), ("HIGH_BOUND", dp.high_bound),
                                  ("DONE", dp.done)):
                with m.State(state):
                    action()
        return m


class _Datapath:
    """The registers of a ``SerialRequant`` and what each state of its FSM does with them (a
    method per state, adding its statements to ``m``)."""

    def __init__(self, m: Module, top: SerialRequant):
        self.m, self.top = m, top
        n = top.lanes
        self.byte = [top.rd_data[j] for j in range(n)]
        self.xs = [Signal(32, name=f"x_{j}") for j in range(n)]
        self.cs = [Signal(name=f"c_{j}") for j in range(n)]              # the bias add's carry
        self.es = [Signal(signed(6), name=f"e_{j}") for j in range(n)]
        # The product {hi, lo} (q in lo before), then h = {hi, lo[31]} (its bits 31 and up),
        # shifted right in place.
        self.his = [Signal(signed(33), name=f"hi_{j}") for j in range(n)]
        self.los = [Signal(32, name=f"lo_{j}") for j in range(n)]
        self.sats = [Signal(name=f"sat_{j}") for j in range(n)]          # h is 2**31
        self.qmins = [Signal(name=f"qmin_{j}") for j in range(n)]        # q is INT32_MIN
        self.rnd = [Signal(name=f"round_{j}") for j in range(n)]         # last bit shifted out
        self.sticky = [Signal(name=f"sticky_{j}") for j in range(n)]     # any bit before it
        self.vs = [Signal(signed(11), name=f"v_{j}") for j in range(n)]  # y + zp, clamped
        self.count = Signal(range(33), name="count")
        self.paddr = Signal(range(top.depth), name="paddr")
        self.lefts = [Mux(e[5], 0, e[:5]) for e in self.es]
        self.rights = [Mux(e[5], -e, 0) for e in self.es]

        # One adder per lane for the multiply and the right shift: {hi, lo} moves right by one
        # a cycle, hi + x (or - x: the inverted x and a carry in) when lo's low bit says so,
        # else hi alone. The addend and the carry in are registers, formed the cycle before
        # from the bit of lo that comes down next (no path from lo through the 33 multiplexers
        # into the carry chain); zero outside the multiply.
        self.final = Signal(name="final")   # the multiply's last step comes (a register)
        # LEFT / RIGHT: some lane still shifts in this cycle (a register, set the cycle before)
        self.more = Signal(name="more")
        self.totals, self.addends, self.subs = [], [], []
        for j in range(n):
            addend = Signal(33, name=f"addend_{j}")
            sub = Signal(name=f"sub_{j}")
            m.d.sync += [addend.eq(0), sub.eq(0)]
            total = Signal(signed(34), name=f"mul_sum_{j}")
            m.d.comb += total.eq(self.his[j] + addend.as_signed() + sub)
            self.totals.append(total)
            self.addends.append(addend)
            self.subs.append(sub)

    # --- shared steps -------------------------------------------------------------------------
    def read(self):
        """Read the next parameter word (it is on ``rd_data`` in the next cycle)."""
        top = self.top
        self.m.d.comb += [top.rd_en.eq(1), top.rd_addr.eq(self.paddr)]
        self.m.d.sync += self.paddr.eq(self.paddr + 1)

    def next_addend(self, j, bit, minus):
        """Set the next step's addend: x (sign-extended to 33 bits) if ``bit``, negated
        (inverted, and the carry in) if ``minus`` too."""
        x = Cat(self.xs[j], self.xs[j][31])
        neg = minus & bit
        self.m.d.sync += [self.addends[j].eq(Mux(bit, x ^ neg.replicate(33), 0)),
                          self.subs[j].eq(neg)]

    def step(self, j):
        """{hi, lo} of lane ``j`` one bit right, hi taking the adder's sum."""
        his, los, totals = self.his, self.los, self.totals
        self.m.d.sync += [his[j].eq(totals[j] >> 1), los[j].eq(Cat(los[j][1:], totals[j][0]))]

    def start_shifts(self, amounts):
        """Count the cycles of a shift by ``amounts`` (one per lane) from 0; ``more``: some
        lane shifts in the first."""
        self.m.d.sync += [self.count.eq(0), self.more.eq(Cat(*(v != 0 for v in amounts)).any())]

    def next_shift(self, amounts):
        """The next cycle of a shift by ``amounts``; ``more``: some lane still shifts in it."""
        count = self.count
        self.m.d.sync += [count.eq(count + 1),
                          self.more.eq(Cat(*(count + 1 < v for v in amounts)).any())]

    # --- the states ---------------------------------------------------------------------------
    def begin(self):
        """IDLE (and DONE): take ``start``, reading the chunk's first word."""
        m, top = self.m, self.top
        with m.If(top.start):
            m.d.comb += [top.rd_en.eq(1), top.rd_addr.eq(top.base)]
            m.d.sync += [self.paddr.eq(top.base + 1), self.count.eq(0)]
            m.next = "BIAS"

    def bias(self):
        """Byte ``count`` of acc + bias (little endian) shifts in at the top of x."""
        m, top, count = self.m, self.top, self.count
        m.d.comb += [top.busy.eq(1), top.acc_index.eq(count[:2] + 1)]
        for j in range(top.lanes):
            s = Signal(9, name=f"bias_sum_{j}")
            m.d.comb += s.eq(top.acc_byte[j] + self.byte[j] + Mux(count == 0, 0, self.cs[j]))
            m.d.sync += [self.xs[j].eq(Cat(self.xs[j][8:], s[:8])), self.cs[j].eq(s[8])]
        self.read()
        m.d.sync += count.eq(count + 1)
        with m.If(count == 3):
            m.d.comb += top.acc_done.eq(1)
            m.next = "SHIFT"

    def shift(self):
        """The lanes' shifts e."""
        m = self.m
        m.d.comb += self.top.busy.eq(1)
        m.d.sync += [e.eq(b[:6]) for e, b in zip(self.es, self.byte, strict=True)]
        self.read()
        m.d.sync += self.count.eq(0)
        m.next = "MULT_LOAD"

    def mult_load(self):
        """q, a byte a cycle, low first, into the top of lo; hi starts at 2**30, so that the
        product is x * q + 2**30 (the high multiply's rounding constant)."""
        m, count = self.m, self.count
        m.d.comb += self.top.busy.eq(1)
        for j in range(self.top.lanes):
            m.d.sync += [self.los[j].eq(Cat(self.los[j][8:], self.byte[j])),
                         self.his[j].eq(1 << 30),
                         self.qmins[j].eq((self.qmins[j] | (count == 0))
                                          & (self.byte[j] == Mux(count == 3, 0x80, 0)))]
        with m.If(count != 3):
            self.read()
        m.d.sync += count.eq(count + 1)
        with m.If(count == 3):
            self.start_shifts(self.lefts)
            m.next = "LEFT"

    def left(self):
        """x << max(e, 0), a bit a cycle."""
        m, count = self.m, self.count
        m.d.comb += self.top.busy.eq(1)
        for j in range(self.top.lanes):
            with m.If(count < self.lefts[j]):
                m.d.sync += self.xs[j].eq(self.xs[j] << 1)
            # The first step's addend (the last LEFT cycle's x is final: no lane shifts in it).
            self.next_addend(j, self.los[j][0], 0)
        self.next_shift(self.lefts)
        with m.If(~self.more):
            # h = (x * q + 2**30) >> 31 is 2**31 only for INT32_MIN * INT32_MIN (``sat``: it
            # saturates to 2**31 - 1, which differs from it after the rounding shift only in
            # the rounding bit of a shift by 32).
            for j in range(self.top.lanes):
                m.d.sync += [self.sats[j].eq(self.qmins[j] & (self.xs[j] == 1 << 31)),
                             self.rnd[j].eq(0), self.sticky[j].eq(0)]
            m.d.sync += count.eq(0)
            m.next = "MULT"

    def mult(self):
        """Shift-and-add, one bit of q a cycle from its low end (the sign bit, last, subtracts
        x); lo's used bit drops out. Then h = (x * q + 2**30) >> 31 is {hi, lo[31]}."""
        m, count = self.m, self.count
        m.d.comb += self.top.busy.eq(1)
        for j in range(self.top.lanes):
            self.step(j)
            # The next step's: lo's next bit, subtracted in the last step (count 31).
            self.next_addend(j, ~self.final & self.los[j][1], count == 30)
        m.d.sync += [count.eq(count + 1), self.final.eq(count == 30)]
        with m.If(self.final):
            self.start_shifts(self.rights)
            m.next = "RIGHT"

    def right(self):
        """h >> s, a bit a cycle (the bit out of h is lo[31])."""
        m = self.m
        m.d.comb += self.top.busy.eq(1)
        for j in range(self.top.lanes):
            with m.If(self.count < self.rights[j]):
                self.step(j)
                m.d.sync += [self.rnd[j].eq(self.los[j][31]),
                             self.sticky[j].eq(self.sticky[j] | self.rnd[j])]
        self.next_shift(self.rights)
        with m.If(~self.more):
            self.read()                                  # the zero point
            m.next = "ZP"

    def zp(self):
        """y + zp in 11 bits, y = (h >> s) rounded half away from zero: up when the dropped
        part is over a half, or exactly a half of a value >= 0 (the sign survives the shift);
        the rounding bit goes in as the adder's carry. A y outside the 10-bit window saturates
        by its sign (rounding cannot bring one inside that would not clamp to the same
        bound)."""
        m = self.m
        m.d.comb += self.top.busy.eq(1)
        for j in range(self.top.lanes):
            y = Cat(self.los[j][31], self.his[j])
            upper = y[9:]
            outside = ~(upper.all() | ~upper.any())
            up = self.rnd[j] & (self.sticky[j] | ~y[-1]) & ~self.sats[j]
            m.d.sync += self.vs[j].eq(Mux(outside, Mux(y[-1], -1024, 1023),
                                          y[:10].as_signed() + self.byte[0].as_signed() + up))
        self.read()                                      # the lower bound
        m.next = "LOW"

    def low(self):
        """The lower bound."""
        m = self.m
        m.d.comb += self.top.busy.eq(1)
        lo = self.byte[0].as_signed()
        for v in self.vs:
            m.d.sync += v.eq(Mux(v < lo, lo, v))
        self.read()                                      # the upper bound
        m.next = "HIGH_BOUND"

    def high_bound(self):
        """The upper bound."""
        m = self.m
        m.d.comb += self.top.busy.eq(1)
        hi = self.byte[0].as_signed()
        for v in self.vs:
            m.d.sync += v.eq(Mux(v > hi, hi, v))
        m.next = "DONE"

    def done(self):
        """``done``; a ``start`` is taken again in this cycle."""
        self.m.d.comb += self.top.done.eq(1)
        self.m.next = "IDLE"
        self.begin()
