"""The activation unit: TFLite's int8 requantization of accumulator rows, per output lane."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import Config, check_config
from tpugen.hdl.dsp import check_dsp_family, mult18x18d
from tpugen.hdl.isa import QUANT_BEATS
from tpugen.hdl.quant_params import (
    QuantParamStore,
    QuantWordStore,
    chunks,
    layer_params_layout,
    quant_write_layout,
)
from tpugen.hdl.serial_requant import SerialRequant, serial_requant_cycles

__all__ = ["ActivationUnit", "activation_signature", "activation_timing", "acc_row_layout",
           "q_row_layout", "act_in_layout"]

#: Registers of the parallel datapath from a chunk's issue to the output register: the lanes
#: and their parameters (read), acc + bias, the left shift, the partial products, the product,
#: the high multiply, the rounding add, the right shift.
_PARALLEL_STAGES = 8


def activation_timing(config: Config, left: int = 0, right: int = 0) -> tuple[int, int]:
    """``(cycles_per_row, latency)`` of the ``ActivationUnit`` of ``config`` (without building
    one): rows every ``cycles_per_row`` cycles; ``latency`` cycles from a row being offered on
    ``i`` to an idle unit to its ``o.valid`` (no stalls; the parallel unit takes the row at
    once, the serial one when its last chunk's accumulators have been read; a row that waits
    behind another takes longer). With ``act_mult == "serial"`` a chunk's time depends on its
    shifts: ``left`` / ``right`` are the largest left / right shift (``max(e, 0)``,
    ``max(-e, 0)``) of the parameters in use; the parallel pipeline's does not."""
    if config.operand_type.is_float:
        return 1, 1     # hdl.float_activation.FloatActivationUnit
    n = chunks(config)
    if config.act_mult == "serial":
        # A row's first chunk starts in the cycle it is offered, the next one in the cycle the
        # results of the one before go to the output register; the row is valid the cycle
        # after its last's.
        per_row = n * serial_requant_cycles(left, right)
        return per_row, per_row + 1
    return n, n + _PARALLEL_STAGES + 1


def acc_row_layout(config: Config) -> data.ArrayLayout:
    """One accumulator row: C lanes of ``acc_width``."""
    return data.ArrayLayout(signed(config.acc_width), config.cols)


def act_in_layout(config: Config) -> data.StructLayout:
    """One row into the activation unit: the accumulator row and the parameter set to apply."""
    return data.StructLayout({"row": acc_row_layout(config), "qset": range(config.quant_sets)})


def q_row_layout(config: Config) -> data.ArrayLayout:
    """One activated row: C lanes of the operand type (``operand_width`` bits each)."""
    return data.ArrayLayout(signed(config.operand_width), config.cols)


def activation_signature(config: Config) -> wiring.Signature:
    """The ports of an activation unit of ``config`` (``ActivationUnit``, and
    ``hdl.float_activation.FloatActivationUnit`` for float operand types): ``qw`` READ_QUANT
    beats in, ``i`` accumulator rows and their parameter set in, ``o`` activated rows out."""
    return wiring.Signature({
        "qw": In(stream.Signature(quant_write_layout(config))),
        "i": In(stream.Signature(act_in_layout(config))),
        "o": Out(stream.Signature(q_row_layout(config))),
    })


class ActivationUnit(wiring.Component):
    """Requantize accumulator rows to int8 the way TFLite Micro's int8 kernels do (bit-exact to
    ``sim.requant.requantize``), ``config.activation_lanes`` lanes per chunk, pipelined.

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
      o   ``Out(stream)`` of ``q_row_layout``: one int8 row per input row (int4: each lane
          clamped to -8..7 as well), in order, from registers (once ``o.valid`` is high it and
          the payload stay until the transfer).

    Timing (``activation_timing``), N = ``chunks`` (``ceil(C / lanes)``) a row: a chunk issues
    from the input register each cycle (parallel multipliers) or every
    ``hdl.serial_requant.serial_requant_cycles`` (48 plus its shifts) cycles (``act_mult ==
    "serial"``: bit-serial 32 x 32 multipliers, no DSP block, the parameters read a byte a
    cycle, the accumulators read from the input register); a row every N chunks.
    ``o.valid & ~o.ready`` freezes the whole pipeline (one global enable; the serial datapath
    finishes its chunk and waits); no row is lost or duplicated.

    Cost per lane (parallel): a 32-bit adder, two 32-bit barrel shifters (left before the
    multiply, rounding right after), a 32 x 32 multiplier (as two registered partial products:
    DSP blocks), a 33-bit rounding adder and a 10-bit clamp; serial: see
    ``hdl.serial_requant``.
    """

    def __init__(self, config: Config, *, dsp_family=None):
        check_config(config)
        self.config = config
        self.dsp_family = check_dsp_family(dsp_family)
        super().__init__(activation_signature(config))

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
        lanes, aw, n = cfg.activation_lanes, cfg.acc_width, self.chunks
        serial = cfg.act_mult == "serial"

        # Global enable of the output side: everything after the multipliers advances unless
        # the output row is held.
        go = Signal()
        m.d.comb += go.eq(~self.o.valid | self.o.ready)

        chunk = Signal(range(n))
        last = (chunk == n - 1) if n > 1 else Const(1)
        if serial:
            q_lanes, results = self._serial(m, go, chunk, last)
        else:
            # Input register: the row, shifted down by `lanes` lanes as each chunk issues, so
            # the chunk issuing is always lanes 0..lanes-1 (no wide multiplexer).
            held = Signal()
            held_row = Signal(n * lanes * aw)
            load = self.i.valid & self.i.ready
            m.submodules.params = params = QuantParamStore(cfg)
            wiring.connect(m, wiring.flipped(self.qw), params.w)
            qset = Signal.like(self.i.payload.qset)
            issue = Signal()          # a chunk leaves the input register (the parameter read)
            m.d.comb += [issue.eq(held & go), self.i.ready.eq(go & (~held | last))]
            with m.If(issue):
                if n > 1:   # the top chunk keeps stale lanes: they are never issued
                    m.d.sync += [held_row[:-lanes * aw].eq(held_row[lanes * aw:]),
                                 chunk.eq(Mux(last, 0, chunk + 1))]
            with m.If(load):
                m.d.sync += [held.eq(1), held_row.eq(self.i.payload.row.as_value()),
                             qset.eq(self.i.payload.qset), chunk.eq(0)]
            with m.Elif(issue & last):
                m.d.sync += held.eq(0)
            m.d.comb += [params.rd_en.eq(issue), params.rd_set.eq(qset),
                         params.rd_chunk.eq(chunk)]
            q_lanes, results = self._parallel(m, go, issue, held_row, qset, params)

        # Output register: chunks shift in at the top; after N chunks the row is complete.
        out_row = Signal(n * lanes * 8)
        out_valid = Signal()
        filled = Signal(range(n))
        with m.If(go & results):
            m.d.sync += out_row.eq(Cat(out_row[lanes * 8:], *q_lanes) if n > 1 else Cat(*q_lanes))
            if n > 1:
                m.d.sync += [filled.eq(Mux(filled == n - 1, 0, filled + 1)),
                             out_valid.eq(filled == n - 1)]
            else:
                m.d.sync += out_valid.eq(1)
        with m.Elif(go):
            m.d.sync += out_valid.eq(0)
        ot = cfg.operand_type
        m.d.comb += self.o.valid.eq(out_valid)
        for c in range(cfg.cols):
            q8 = out_row.word_select(c, 8).as_signed()
            if ot.width < 8:
                # int4: the int8 result clamped to the operand's range as well.
                q8 = Mux(q8 > ot.max, ot.max, Mux(q8 < ot.min, ot.min, q8))
            m.d.comb += self.o.payload[c].eq(q8)
        return m

    def _parallel(self, m, go, issue, held_row, qset, params):
        """The pipeline of the parallel multipliers; returns (the lanes' results, their valid
        bit), from the stage-8 registers."""
        cfg = self.config
        lanes, aw = cfg.activation_lanes, cfg.acc_width
        # Stage valid bits (all advance under ``go``): 1 the chunk's lanes (and its
        # parameters, read), 2 acc + bias, 3 left shift, 4 partial products, 5 product, 6 high
        # multiply, 7 rounding add, 8 right shift.
        v = [Signal(name=f"v{k}") for k in range(_PARALLEL_STAGES + 1)]
        with m.If(go):
            m.d.sync += [v[1].eq(issue),
                         *(v[k].eq(v[k - 1]) for k in range(2, _PARALLEL_STAGES + 1))]
        # The set's layer parameters (zero point, bounds), read with the chunk's lanes, travel
        # beside the chunk (layers[k]: stage k's).
        layers = [Signal(layer_params_layout(), name=f"layer{k}")
                  for k in range(_PARALLEL_STAGES + 1)]
        with m.If(go):
            m.d.sync += [layers[2].eq(params.layer),
                         *(layers[k].eq(layers[k - 1])
                           for k in range(3, _PARALLEL_STAGES + 1))]

        q_lanes = []
        for j in range(lanes):
            acc = Signal(signed(32), name=f"acc_{j}")
            with m.If(issue):
                m.d.sync += acc.eq(held_row[j * aw:(j + 1) * aw].as_signed())
            p = params.lanes[j]
            # Stage 2: x = acc + bias (mod 2**32); the multiplier and the shift go along.
            x = Signal(signed(32), name=f"x_{j}")
            q2, e2 = Signal(signed(32), name=f"q2_{j}"), Signal(signed(6), name=f"e2_{j}")
            # Stage 3: the left shift by max(e, 0), mod 2**32, into the multiplier's input
            # registers; stage 4: its four 16 x 16 partial products (``_partial_products``: DSP
            # blocks with their input and output registers on an FPGA); stage 5: their sum,
            # xs * q.
            e3 = Signal(signed(6), name=f"e3_{j}")
            e4 = Signal(signed(6), name=f"e4_{j}")
            prod = Signal(signed(64), name=f"prod_{j}")
            e5 = Signal(signed(6), name=f"e5_{j}")
            xs = Signal(signed(32), name=f"xs_{j}")
            m.d.comb += xs.eq(Mux(e2[5], x, x << e2[:5]))
            ll, lh, hl, hh = _partial_products(m, go, xs, q2, self.dsp_family, f"{j}")
            with m.If(go):
                m.d.sync += [x.eq(acc + p.bias), q2.eq(p.mult), e2.eq(p.shift),
                             e3.eq(e2), e4.eq(e3),
                             prod.eq(Cat(ll[:32], hh) + ((lh + hl) << 16)), e5.eq(e4)]
            q_lanes.append(_round_and_clamp(m, go, prod, e5, layers[_PARALLEL_STAGES], j))
        return q_lanes, v[_PARALLEL_STAGES]

    def _serial(self, m, go, chunk, last):
        """The sequential datapath (``hdl.serial_requant``, its parameters a word at a time
        from ``hdl.quant_params.QuantWordStore``): one chunk at a time, its accumulators read a
        byte at a time straight from the row offered on ``i`` (no input register: the row is
        taken when its last chunk's accumulators have been read). Returns (the lanes' results,
        their valid bit)."""
        cfg = self.config
        lanes, n = cfg.activation_lanes, self.chunks
        m.submodules.params = store = QuantWordStore(cfg)
        wiring.connect(m, wiring.flipped(self.qw), store.w)
        m.submodules.requant = rq = SerialRequant(lanes, store.depth)
        m.d.comb += [store.rd_en.eq(rq.rd_en), store.rd_addr.eq(rq.rd_addr),
                     rq.rd_data.eq(store.rd_data)]
        # Byte ``acc_index`` of lane j of chunk ``chunk``: one multiplexer over the row's bytes
        # (each lane as its 32-bit two's complement value, acc taken mod 2**32), into a
        # register (the row comes from the accumulator buffer's block RAM: no path from its
        # read data through the multiplexer into the bias adder). The row is offered from the
        # chunk's ``start`` until its last chunk's bytes are read, and ``chunk`` moves on only
        # after the last of them.
        row = self.i.payload.row
        for j in range(lanes):
            lane_bytes = []
            for c in range(n):
                k = c * lanes + j
                value = Signal(signed(32), name=f"acc_{c}_{j}")
                m.d.comb += value.eq(row[k] if k < cfg.cols else 0)
                lane_bytes.append(value)
            m.d.sync += rq.acc_byte[j].eq(Cat(*lane_bytes).word_select(
                Cat(rq.acc_index, chunk) if n > 1 else rq.acc_index, 8))

        # Results wait for the output register (``pending``) when it is held.
        pending = Signal()
        results = rq.done | pending
        with m.If(go):
            m.d.sync += pending.eq(0)
        with m.Elif(rq.done):
            m.d.sync += pending.eq(1)
        # A chunk starts when the requantizer is free and the last one's results go; its
        # parameters start at its set's first word plus 12 words per chunk before it.
        # The row moves on (``i.ready``) once its last chunk's accumulators are read.
        issue = self.i.valid & ~rq.busy & (~results | go)
        chunk_base = Signal(range(max(1, (n - 1) * QUANT_BEATS + 1)))
        set_base = Array(Const(s * n * QUANT_BEATS, range(store.depth))
                         for s in range(cfg.quant_sets))
        m.d.comb += [rq.start.eq(issue), rq.base.eq(set_base[self.i.payload.qset] + chunk_base),
                     self.i.ready.eq(last & rq.acc_done)]
        with m.If(rq.acc_done):
            m.d.sync += [chunk.eq(Mux(last, 0, chunk + 1)),
                         chunk_base.eq(Mux(last, 0, chunk_base + QUANT_BEATS))]
        return [rq.q[j] for j in range(lanes)], results

def _partial_products(m, go, x, q, dsp_family, name):
    """The four partial products of the signed 32 x 32 product ``x * q``: ``x = xh * 2**16 +
    xl``, ``q = qh * 2**16 + ql`` (``xl``, ``ql`` unsigned, ``xh``, ``qh`` signed 16 bits):
    ``(xl * ql, xl * qh, xh * ql, xh * qh)``, each two cycles of ``go`` after ``x`` and ``q``
    (registered operands, then the registered product: a DSP block's two registers). With
    ``dsp_family == "ecp5"`` each is a ``MULT18X18D`` with those registers (``hdl.dsp``), so
    no logic sits between a register and a multiplier; otherwise Yosys maps each ``$mul``."""
    xl, xh = Cat(x[:16], Const(0, 1)).as_signed(), x[16:].as_signed()
    ql, qh = Cat(q[:16], Const(0, 1)).as_signed(), q[16:].as_signed()
    out = []
    for tag, a, b in (("ll", xl, ql), ("lh", xl, qh), ("hl", xh, ql), ("hh", xh, qh)):
        if dsp_family == "ecp5":
            out.append(mult18x18d(m, a, b, name=f"pp_{tag}_{name}", ce=go))
            continue
        a_r = Signal(signed(len(a)), name=f"pa_{tag}_{name}")
        b_r = Signal(signed(len(b)), name=f"pb_{tag}_{name}")
        p_r = Signal(signed(len(a) + len(b)), name=f"pp_{tag}_{name}")
        with m.If(go):
            m.d.sync += [a_r.eq(a), b_r.eq(b), p_r.eq(a_r * b_r)]
        out.append(p_r)
    return out


#: Bits of y kept before the zero point is added: every y whose y + zp can land in -128..127
#: fits; a y outside saturates by its sign.
_WIN = 10


def _round_and_clamp(m, go, prod, e, layer, j):
    """Stages 6 to 8 of one lane and the clamp in front of the output register: the high
    multiply ``h = (prod + 2**30) >> 31`` (saturated), the rounding right shift by
    ``max(-e, 0)`` (the rounding add, then the shift), ``+ zp`` and the clamp. Returns the
    int8 result (combinational from the stage-8 registers)."""
    # Stage 6: h = prod[31:] + prod[30] (prod + 2**30 carries into bit 31 iff bit 30 is set);
    # only INT32_MIN * INT32_MIN reaches 2**31, which saturates. The shift s = max(-e, 0) and
    # its rounding constants 2**(s-1) and 2**(s-1) - 1 (0 when s == 0) are registered beside.
    h_full = Signal(signed(34), name=f"h_full_{j}")
    m.d.comb += h_full.eq(prod[31:].as_signed() + prod[30])
    s_next = Signal(range(33), name=f"s_next_{j}")
    m.d.comb += s_next.eq(Mux(e[5], -e, 0))
    h = Signal(signed(32), name=f"h_{j}")
    s = Signal(range(33), name=f"s_{j}")
    onehot = Signal(33, name=f"onehot_{j}")           # 2**(s-1)
    ones = Signal(33, name=f"ones_{j}")               # 2**(s-1) - 1
    with m.If(go):
        m.d.sync += [h.eq(Mux(~h_full[-1] & h_full[31], (1 << 31) - 1, h_full)),
                     s.eq(s_next),
                     onehot.eq(Mux(s_next == 0, 0, Const(1, 33) << (s_next - 1)[:6])),
                     ones.eq(Mux(s_next == 0, 0, (Const(1, 33) << (s_next - 1)[:6]) - 1))]
    # Stage 7: t = h + rnd, rnd = 2**(s-1) (h >= 0) or 2**(s-1) - 1 (h < 0).
    t = Signal(signed(34), name=f"t_{j}")
    s7 = Signal(range(33), name=f"s7_{j}")
    with m.If(go):
        m.d.sync += [t.eq(h + Mux(h[31], ones, onehot)), s7.eq(s)]
    # Stage 8: y = t >> s, kept as a _WIN-bit window plus "outside" and its sign.
    y = Signal(signed(34), name=f"y_{j}")
    m.d.comb += y.eq(t >> s7)
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
