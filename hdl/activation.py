"""The activation unit: TFLite's int8 requantization of accumulator rows, per output lane."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import Config
from .quant_params import (
    QuantParamStore,
    chunks,
    lane_params_layout,
    quant_write_layout,
)
from .serial_mult import SerialMultiplier, serial_latency

__all__ = ["ActivationUnit", "activation_timing", "acc_row_layout", "q_row_layout",
           "act_in_layout"]

#: Registers of the parallel datapath from a chunk's issue to the output register: the lanes
#: and their parameters (read), acc + bias, the left shift, the partial products, the product,
#: the high multiply, the rounding shift.
_PARALLEL_STAGES = 7
#: The serial datapath: two registers before the multiplier (lanes and parameters, acc +
#: bias; the left shift feeds the multiplier's operand register), the multiplier (its product
#: register), then the high multiply and the rounding shift.
_SERIAL_FRONT = 2
_SERIAL_BACK = 2


def activation_timing(config: Config) -> tuple[int, int]:
    """``(cycles_per_row, latency)`` of the ``ActivationUnit`` of ``config`` (without building
    one): rows every ``cycles_per_row`` cycles; ``latency`` cycles from a row's ``i`` transfer
    into an empty unit to its ``o.valid`` (no stalls; a row that waits in the input register
    behind another takes longer)."""
    n = chunks(config)
    if config.act_mult == "serial":
        # the front stages, the multiplier, its product taken, and a cycle for the next issue
        per_chunk = _SERIAL_FRONT + serial_latency(32) + 2
        per_row = n * per_chunk
        # from an empty unit: the chunks, then the two stages after the product and the
        # output register
        return per_row, per_row + _SERIAL_BACK + 1
    return n, n + _PARALLEL_STAGES + 1


def acc_row_layout(config: Config) -> data.ArrayLayout:
    """One accumulator row: C lanes of ``acc_width``."""
    return data.ArrayLayout(signed(config.acc_width), config.cols)


def act_in_layout(config: Config) -> data.StructLayout:
    """One row into the activation unit: the accumulator row and the parameter set to apply."""
    return data.StructLayout({"row": acc_row_layout(config), "qset": range(config.quant_sets)})


def q_row_layout(config: Config) -> data.ArrayLayout:
    """One requantized row: C int8 lanes."""
    return data.ArrayLayout(signed(8), config.cols)


class ActivationUnit(wiring.Component):
    """Requantize accumulator rows to int8 the way TFLite Micro's int8 kernels do (bit-exact to
    ``sim.requant.requantize``), ``config.act_lanes`` lanes per chunk, pipelined.

    Per lane ``c``, with set ``qset``'s parameters (``hdl.quant_params``): bias ``b[c]``,
    multiplier ``q[c]``, shift ``e[c]`` (-32..31), zero point ``zp``, bounds ``lo``, ``hi``:

        x = (acc[c] + b[c]) mod 2**32               (acc taken mod 2**32, as int32)
        x = (x * 2**max(e, 0)) mod 2**32
        h = (x * q[c] + 2**30) >> 31                  (= gemmlowp's rounding doubling high
                                                       multiply; 2**31 saturates to 2**31 - 1)
        s = max(-e, 0);  y = (h + (2**(s-1) - (h < 0) if s else 0)) >> s   (rounds half away)
        out = min(max(y + zp, lo), hi)

    Ports:
      qw  ``In(stream)`` of ``hdl.quant_params.quant_write_layout``: READ_QUANT beats into the
          parameter store (independent of the rows; the controller keeps a set that a row in
          flight uses from being written).
      i   ``In(stream)`` of ``act_in_layout``: an accumulator row and its parameter set.
          ``i.ready`` depends combinationally on ``o.ready`` (never on ``i.valid``).
      o   ``Out(stream)`` of ``q_row_layout``: one int8 row per input row, in order, from
          registers (once ``o.valid`` is high it and the payload stay until the transfer).

    Timing (``activation_timing``), N = ``ceil(C / act_lanes)`` chunks a row: a chunk issues
    from the input register each cycle (parallel multipliers) or every ``3 + 35`` cycles
    (``act_mult == "serial"``: bit-serial 32 x 32 multipliers, no DSP block); a row every N
    chunks. ``o.valid & ~o.ready`` freezes the whole pipeline (one global enable); no row is
    lost or duplicated.

    Cost per lane: a 32-bit adder, two 32-bit barrel shifters (left before the multiply,
    rounding right after), a 32 x 32 multiplier (as two registered partial products: DSP
    blocks, or bit-serial), a 33-bit rounding adder and a 10-bit clamp.
    """

    def __init__(self, config: Config):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        super().__init__({
            "qw": In(stream.Signature(quant_write_layout(config))),
            "i": In(stream.Signature(act_in_layout(config))),
            "o": Out(stream.Signature(q_row_layout(config))),
        })

    @property
    def chunks(self) -> int:
        return chunks(self.config)

    @property
    def cycles_per_row(self) -> int:
        return activation_timing(self.config)[0]

    @property
    def latency(self) -> int:
        return activation_timing(self.config)[1]

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        lanes, aw, n = cfg.act_lanes, cfg.acc_width, self.chunks
        serial = cfg.act_mult == "serial"
        m.submodules.params = params = QuantParamStore(cfg)
        wiring.connect(m, wiring.flipped(self.qw), params.w)

        # Global pipeline enable: everything advances unless the output row is held.
        go = Signal()
        m.d.comb += go.eq(~self.o.valid | self.o.ready)

        # Input register: the row, shifted down by `lanes` lanes as each chunk issues, so the
        # chunk issuing is always lanes 0..lanes-1 (no wide multiplexer), and its set.
        held = Signal()
        held_row = Signal(n * lanes * aw)
        qset = Signal.like(self.i.payload.qset)
        chunk = Signal(range(n))
        last = (chunk == n - 1) if n > 1 else Const(1)
        v = [Signal(name=f"v{k}") for k in range(_PARALLEL_STAGES + 1)]   # v[k]: stage k
        if serial:
            mults = [SerialMultiplier(32, 32) for _ in range(lanes)]
            for j, mu in enumerate(mults):
                m.submodules[f"mult_{j}"] = mu
            busy, done = mults[0].busy, mults[0].done
            pending = Signal()          # products in the multipliers not yet taken
            # One chunk at a time from the input register to the multipliers: the parameter
            # read's data then stays until the multipliers take it (no copies of them).
            front_empty = ~v[1] & ~v[2]
            issue = held & front_empty & ~busy & ~done & ~pending
            with m.If(done):
                m.d.sync += pending.eq(1)
            with m.Elif(go):
                m.d.sync += pending.eq(0)
            m.d.comb += self.i.ready.eq(~held | (last & issue & go))
        else:
            issue = held & go
            m.d.comb += self.i.ready.eq(go & (~held | last))
        issue_go = issue & go
        load = self.i.valid & self.i.ready
        with m.If(issue_go):
            if n > 1:   # the top chunk keeps stale lanes: they are never issued
                m.d.sync += [held_row[:-lanes * aw].eq(held_row[lanes * aw:]),
                             chunk.eq(Mux(last, 0, chunk + 1))]
        with m.If(load):
            m.d.sync += [held.eq(1), held_row.eq(self.i.payload.row.as_value()),
                         qset.eq(self.i.payload.qset), chunk.eq(0)]
        with m.Elif(issue_go & last):
            m.d.sync += held.eq(0)
        m.d.comb += [params.rd_en.eq(issue_go), params.rd_set.eq(qset),
                     params.rd_chunk.eq(chunk)]

        # Stage valid bits. Stage 1: the chunk's lanes (and its parameters, read). Parallel:
        # 2 acc + bias, 3 left shift, 4 partial products, 5 product, 6 high multiply, 7
        # rounding shift. Serial: 2 as parallel (held until the multipliers start, fed the
        # left-shifted value), the multiplier, then 5 = its product (a product not yet taken),
        # 6, 7.
        with m.If(go):
            m.d.sync += [v[1].eq(issue), v[6].eq(v[5]), v[7].eq(v[6])]
            if serial:
                m.d.sync += v[2].eq(v[1] | (v[2] & (busy | done | pending)))
            else:
                m.d.sync += [v[2].eq(v[1]), v[3].eq(v[2]), v[4].eq(v[3]), v[5].eq(v[4])]
        if serial:
            start = v[2] & ~busy & ~done & ~pending
            m.d.comb += v[5].eq(pending)
            with m.If(start):           # the chunk left stage 2 into the multipliers
                m.d.sync += v[2].eq(0)

        # The set's layer parameters (zero point, bounds): the set number travels beside the
        # chunk (qs[k]: stage k's), read from the store at stage 6 for stage 7.
        qs = {k: Signal.like(qset, name=f"qs{k}") for k in (1, 2, 3, 4, 5, 6)}
        with m.If(issue_go):
            m.d.sync += qs[1].eq(qset)
        with m.If(go):
            m.d.sync += qs[6].eq(qs[5])
            if not serial:
                m.d.sync += [qs[2].eq(qs[1]), qs[3].eq(qs[2]), qs[4].eq(qs[3]),
                             qs[5].eq(qs[4])]
        if serial:
            with m.If(go & ~v[2]):
                m.d.sync += qs[2].eq(qs[1])
            with m.If(start):
                m.d.sync += qs[5].eq(qs[2])
        m.d.comb += [params.layer_rd_en.eq(go), params.layer_rd_set.eq(qs[6])]
        layer = params.layer

        q_lanes = []
        for j in range(lanes):
            acc = Signal(signed(32), name=f"acc_{j}")
            with m.If(issue_go):
                m.d.sync += acc.eq(held_row[j * aw:(j + 1) * aw].as_signed())
            p = Signal(lane_params_layout(), name=f"p_{j}")
            m.d.comb += p.eq(params.lanes[j])
            # Stage 2: x = acc + bias (mod 2**32).
            x = Signal(signed(32), name=f"x_{j}")
            with m.If(go & ~v[2] if serial else go):     # serial: stage 2 waits for the mult
                m.d.sync += x.eq(acc + p.bias)
            prod = Signal(signed(64), name=f"prod_{j}")
            e5 = Signal(signed(6), name=f"e5_{j}")
            if serial:
                # The left shift by max(e, 0) (mod 2**32) feeds the multiplier's operand
                # register; the parameters are the read's, still held.
                mu = mults[j]
                m.d.comb += [mu.start.eq(start), mu.a.eq(Mux(p.shift[5], x, x << p.shift[:5])),
                             mu.b.eq(p.mult), prod.eq(mu.p)]
                with m.If(start):
                    m.d.sync += e5.eq(p.shift)
            else:
                # The multiplier and the shift go along; stage 3: the left shift by max(e, 0),
                # mod 2**32.
                q2, e2 = Signal(signed(32), name=f"q2_{j}"), Signal(signed(6), name=f"e2_{j}")
                with m.If(go):
                    m.d.sync += [q2.eq(p.mult), e2.eq(p.shift)]
                xs = Signal(signed(32), name=f"xs_{j}")
                q3, e3 = Signal(signed(32), name=f"q3_{j}"), Signal(signed(6), name=f"e3_{j}")
                with m.If(go):
                    m.d.sync += [xs.eq(Mux(e2[5], x, x << e2[:5])), q3.eq(q2), e3.eq(e2)]
                # Two registered partial products (DSP blocks with output registers), then
                # their sum: xs * q.
                pp_lo = Signal(signed(49), name=f"pp_lo_{j}")
                pp_hi = Signal(signed(48), name=f"pp_hi_{j}")
                e4 = Signal(signed(6), name=f"e4_{j}")
                with m.If(go):
                    m.d.sync += [pp_lo.eq(xs * q3[:16]), pp_hi.eq(xs * q3[16:].as_signed()),
                                 e4.eq(e3), prod.eq(pp_lo + (pp_hi << 16)), e5.eq(e4)]
            q_lanes.append(_round_and_clamp(m, go, prod, e5, layer, j))

        # Output register: chunks shift in at the top; after N chunks the row is complete.
        out_row = Signal(n * lanes * 8)
        out_valid = Signal()
        filled = Signal(range(n))
        with m.If(go & v[7]):
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
            self.o.payload.eq(out_row[:cfg.cols * 8]),
        ]
        return m


#: Bits of y kept before the zero point is added: every y whose y + zp can land in -128..127
#: fits; a y outside saturates by its sign.
_WIN = 10


def _round_and_clamp(m, go, prod, e, layer, j):
    """Stages 6 and 7 of one lane and the clamp in front of the output register: the high
    multiply ``h = (prod + 2**30) >> 31`` (saturated), the rounding right shift by
    ``max(-e, 0)``, ``+ zp`` and the clamp. Returns the int8 result (combinational from the
    stage-7 registers)."""
    # Stage 6: h = prod[31:] + prod[30] (prod + 2**30 carries into bit 31 iff bit 30 is set);
    # only INT32_MIN * INT32_MIN reaches 2**31, which saturates.
    h_full = Signal(signed(34), name=f"h_full_{j}")
    m.d.comb += h_full.eq(prod[31:].as_signed() + prod[30])
    h = Signal(signed(32), name=f"h_{j}")
    s = Signal(range(33), name=f"s_{j}")
    with m.If(go):
        m.d.sync += [h.eq(Mux(h_full > (1 << 31) - 1, (1 << 31) - 1, h_full)),
                     s.eq(Mux(e[5], -e, 0))]
    # Stage 7: t = h + rnd, rnd = 2**(s-1) (h >= 0) or 2**(s-1) - 1 (h < 0), 0 when s == 0;
    # y = t >> s, kept as a _WIN-bit window plus "outside" and its sign.
    onehot = Signal(33, name=f"onehot_{j}")           # 2**(s-1)
    ones = Signal(33, name=f"ones_{j}")               # 2**(s-1) - 1
    m.d.comb += [onehot.eq(Mux(s == 0, 0, Const(1, 33) << (s - 1)[:6])),
                 ones.eq(Mux(s == 0, 0, onehot - 1))]
    t = Signal(signed(34), name=f"t_{j}")
    m.d.comb += t.eq(h + Mux(h[31], ones, onehot))
    y = Signal(signed(34), name=f"y_{j}")
    m.d.comb += y.eq(t >> s)
    y_win = Signal(signed(_WIN), name=f"y_win_{j}")
    y_out = Signal(name=f"y_out_{j}")
    y_neg = Signal(name=f"y_neg_{j}")
    top = y[_WIN - 1:]
    with m.If(go):
        m.d.sync += [y_win.eq(y[:_WIN]), y_out.eq(~(top.all() | ~top.any())),
                     y_neg.eq(y[-1])]
    # y + zp and the clamp (max with lo first, then min with hi, as TFLite).
    zp, lo, hi = layer.zp, layer.lo, layer.hi
    v = Signal(signed(_WIN + 1), name=f"v_{j}")
    m.d.comb += v.eq(y_win + zp)
    below = Mux(y_out, y_neg, v < lo)
    above = Mux(y_out, ~y_neg, v > hi)
    q = Signal(signed(8), name=f"q_{j}")
    clamped_lo = Mux(below, lo, v[:8])
    m.d.comb += q.eq(Mux(above | (below & (lo > hi)), hi, clamped_lo))
    return q
