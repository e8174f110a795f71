"""The activation unit: requantizes accumulator rows to int8 with rounding, zero point and ReLU."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import Config
from .isa import QUANT_LAYOUT

__all__ = ["ActivationUnit", "acc_row_layout", "q_row_layout"]

#: Pipeline stages after the input register: product, rounding add, shift, output register.
_STAGES = 4


def acc_row_layout(config: Config) -> data.ArrayLayout:
    """One accumulator row: C lanes of ``acc_width``."""
    return data.ArrayLayout(signed(config.acc_width), config.cols)


def q_row_layout(config: Config) -> data.ArrayLayout:
    """One requantized row: C int8 lanes."""
    return data.ArrayLayout(signed(8), config.cols)


class ActivationUnit(wiring.Component):
    """Requantize accumulator rows to int8, ``config.act_lanes`` lanes per cycle, pipelined.

    Per lane, with ``mult``, ``shift``, ``zp``, ``relu`` from ``params`` (bit-exact to
    ``sim.requant.requantize``):

        t = (acc * mult + r) mod 2**64, as 64-bit two's complement;
            r = 1 << (shift - 1) if shift >= 1 else 0    (round half toward +infinity)
        y = t >> shift                                    (arithmetic)
        q = clamp(y + zp, lo, 127), exact;  lo = zp if relu else -128

    Ports:
      params  ``In(QUANT_LAYOUT)``, a plain input (not a stream): ``mult`` (signed 32),
              ``shift`` (0..63), ``zp`` (signed 8), ``relu`` (1). The user holds it stable from
              a row's ``i`` transfer until that row's ``o`` transfer (the stages read it at
              different times); change it only while the unit is empty.
      i       ``In(stream)`` of ``acc_row_layout``: one accumulator row per transfer.
              ``i.ready`` depends combinationally on ``o.ready`` (never on ``i.valid``).
      o       ``Out(stream)`` of ``q_row_layout``: one int8 row per input row, in order.
              ``o.valid`` and ``o.payload`` come straight from registers; once ``o.valid`` is
              high, it and the payload stay until the transfer.

    Timing, with ``N = ceil(C / act_lanes)`` (``cycles_per_row``):
      latency     ``N + 4`` cycles from a row's ``i`` transfer to its ``o.valid`` when ``o`` does
                  not stall (``latency``): an input register (the row is issued ``act_lanes``
                  lanes per cycle from it), then product, ``+ r``, ``>> shift`` registers, then
                  ``+ zp``/clamp into the output register.
      throughput  one row per ``N`` cycles; one row per cycle when ``act_lanes == C``.
      stalls      ``o.valid & ~o.ready`` freezes the whole pipeline (one global enable);
                  no row is lost or duplicated. Bubbles inside do not collapse during a stall.

    Cost: ``act_lanes`` multipliers of ``acc_width`` x 32 bits (low 64 bits kept), with
    registered inputs and outputs (DSP-friendly), 64-bit adders and barrel shifters.
    """

    def __init__(self, config: Config):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        super().__init__({
            "params": In(QUANT_LAYOUT),
            "i": In(stream.Signature(acc_row_layout(config))),
            "o": Out(stream.Signature(q_row_layout(config))),
        })

    @property
    def cycles_per_row(self) -> int:
        """Cycles between rows at full throughput: ``ceil(C / act_lanes)``."""
        return -(-self.config.cols // self.config.act_lanes)

    @property
    def latency(self) -> int:
        """Cycles from a row's ``i`` transfer to its ``o.valid`` without stalls."""
        return self.cycles_per_row + _STAGES

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        c, lanes, aw = cfg.cols, cfg.act_lanes, cfg.acc_width
        n = self.cycles_per_row
        p = self.params

        # Global pipeline enable: everything advances unless the output row is held.
        go = Signal()
        m.d.comb += go.eq(~self.o.valid | self.o.ready)

        # Input register: the row, shifted down by `lanes` lanes each time a chunk issues, so
        # the chunk entering the multipliers is always lanes 0..lanes-1 (no wide multiplexer).
        held = Signal()
        held_row = Signal(n * lanes * aw)
        chunk = Signal(range(n))
        last = (chunk == n - 1) if n > 1 else Const(1)
        issue = held & go
        m.d.comb += self.i.ready.eq(go & (~held | last))
        load = self.i.valid & self.i.ready
        with m.If(issue):
            m.d.sync += held_row.eq(held_row[lanes * aw:])
            if n > 1:
                m.d.sync += chunk.eq(Mux(last, 0, chunk + 1))
        with m.If(load):
            m.d.sync += [held.eq(1), held_row.eq(self.i.payload.as_value()), chunk.eq(0)]
        with m.Elif(issue & last):
            m.d.sync += held.eq(0)

        # Stage valid bits (stages 1..3); all advance together under `go`.
        v = [Signal(name=f"v{s}") for s in range(1, 4)]
        with m.If(go):
            m.d.sync += [v[0].eq(issue), v[1].eq(v[0]), v[2].eq(v[1])]

        rnd = Signal(64)
        m.d.comb += rnd.eq((Const(1, 65) << p.shift)[1:])   # 1 << (shift - 1), 0 for shift 0
        lo = Signal(signed(9))
        m.d.comb += lo.eq(Mux(p.relu, p.zp, -128))

        q_lanes = []
        for j in range(lanes):
            acc = held_row[j * aw:(j + 1) * aw].as_signed()
            prod = Signal(signed(64), name=f"prod_{j}")
            t = Signal(signed(64), name=f"t_{j}")
            y = Signal(signed(64), name=f"y_{j}")
            with m.If(go):
                m.d.sync += [
                    prod.eq(acc * p.mult),          # sign-extended or truncated to 64
                    t.eq((prod + rnd)[:64]),
                    y.eq(t >> p.shift),
                ]
            s = Signal(signed(66), name=f"s_{j}")
            q = Signal(signed(8), name=f"q_{j}")
            m.d.comb += s.eq(y + p.zp)
            with m.If(s > 127):
                m.d.comb += q.eq(127)
            with m.Elif(s < lo):
                m.d.comb += q.eq(lo)
            with m.Else():
                m.d.comb += q.eq(s)
            q_lanes.append(q)

        # Output register: chunks shift in at the top; after N chunks the row is complete.
        out_row = Signal(n * lanes * 8)
        out_valid = Signal()
        filled = Signal(range(n))
        with m.If(go & v[2]):
            m.d.sync += out_row.eq(Cat(out_row[lanes * 8:], *q_lanes) if n > 1 else Cat(*q_lanes))
            if n > 1:
                m.d.sync += [filled.eq(Mux(filled == n - 1, 0, filled + 1)),
                             out_valid.eq(filled == n - 1)]
            else:
                m.d.sync += out_valid.eq(1)
        with m.Elif(go):
            m.d.sync += out_valid.eq(0)
        m.d.comb += [
            self.o.valid.eq(out_valid),
            self.o.payload.eq(out_row[:c * 8]),
        ]
        return m

