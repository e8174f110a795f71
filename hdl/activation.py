"""The activation unit: requantizes accumulator rows to int8 with rounding, zero point and ReLU."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import Config
from .isa import QUANT_LAYOUT
from .serial_mult import SerialMultiplier, serial_latency

__all__ = ["ActivationUnit", "activation_timing", "acc_row_layout", "q_row_layout"]


def activation_timing(config: Config) -> tuple[int, int]:
    """``(cycles_per_row, latency)`` of the ``ActivationUnit`` of ``config`` (without building
    one)."""
    serial = config.act_mult == "serial"
    per_row = _chunks(config) * _cycles_per_chunk(config)
    return per_row, per_row + _STAGES + (0 if serial else _PARTIAL_STAGE)


def _chunks(config: Config) -> int:
    return -(-config.cols // config.act_lanes)


def _cycles_per_chunk(config: Config) -> int:
    return serial_latency(32) + 1 if config.act_mult == "serial" else 1

#: Pipeline stages after the input register: product, coarse shift, fine shift and rounding,
#: output register.
_STAGES = 4
#: The parallel multipliers' extra stage: the partial products acc * mult[:16] and
#: acc * mult[16:] are registered (DSP output registers) before their sum.
_PARTIAL_STAGE = 1


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

    Timing, with ``N = ceil(C / act_lanes)`` chunks per row, ``K`` = 1 cycle per chunk (34
    with ``config.act_mult == "serial"``), ``cycles_per_row = N * K``:
      latency     ``N * K + 5`` cycles (serial: ``N * K + 4``) from a row's ``i`` transfer to
                  its ``o.valid`` when ``o`` does not stall (``latency``): an input register
                  (the row is issued ``act_lanes`` lanes per chunk from it), the registered
                  partial products ``acc * mult[:16]`` and ``acc * mult[16:]`` and the product
                  register (serial: the multipliers' own, 33 cycles after the chunk issues,
                  taken one cycle later), a register after ``>> (shift & 56)``, one after
                  ``>> (shift & 7)`` and the rounding, then ``+ zp``/clamp into the output
                  register.
      throughput  one row per ``N * K`` cycles; one row per cycle when ``act_lanes == C`` and
                  the multipliers are parallel.
      stalls      ``o.valid & ~o.ready`` freezes the whole pipeline (one global enable);
                  no row is lost or duplicated. Bubbles inside do not collapse during a stall.

    Cost: ``act_lanes`` multipliers of ``acc_width`` x 32 bits (low 64 bits kept), with
    registered inputs and outputs (DSP-friendly), or with ``act_mult == "serial"`` as many
    ``hdl.serial_mult.SerialMultiplier`` (one adder each, no DSP block). After the product
    nothing is 64 bits wide:
    only a 10-bit window of ``(2 * p) >> shift`` is shifted out (the rounding bit and 9 bits of
    ``p >> shift``, enough for every result that can land in -128..127), by a log shifter
    that narrows at each stage (41, 25, 17, 13, 11, 10 bits), with two flags: the bits above
    the window all equal its sign (else the result saturates), and ``p + r`` wraps past 2**63
    (``p[shift - 1 .. 62]`` all ones: then ``y = ~(p >> shift)``). ``+ zp`` is a 10-bit add.
    Measured with Yosys 0.70 (``synth_ice40 -dsp`` / ``synth_ecp5``) for C = 4, acc_width 32,
    act_lanes 1: 379 SB_LUT4, 56 SB_CARRY, 265 flip-flops, 4 SB_MAC16 on the iCE40 (the
    64-bit datapath it replaced: 803, 301, 361, 4); 332 LUT4, 58 CCU2C, 4 MULT18X18D on the
    ECP5 (was 617, 184). Each further lane adds about 230 iCE40 LUTs (was about 560).
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
    def chunks(self) -> int:
        """Chunks of ``act_lanes`` lanes per row: ``ceil(C / act_lanes)``."""
        return _chunks(self.config)

    @property
    def cycles_per_chunk(self) -> int:
        """Cycles between chunks at full throughput: 1, or with ``act_mult == "serial"`` the
        bit-serial multiplier's latency plus one (34)."""
        return _cycles_per_chunk(self.config)

    @property
    def cycles_per_row(self) -> int:
        """Cycles between rows at full throughput: ``chunks * cycles_per_chunk``."""
        return activation_timing(self.config)[0]

    @property
    def latency(self) -> int:
        """Cycles from a row's ``i`` transfer to its ``o.valid`` without stalls:
        ``cycles_per_row + 4``."""
        return activation_timing(self.config)[1]

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        c, lanes, aw = cfg.cols, cfg.act_lanes, cfg.acc_width
        n = self.chunks
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
        serial = cfg.act_mult == "serial"
        if serial:
            # Bit-serial multipliers (one per lane, started together): a chunk issues when
            # they are idle and their last products are taken (or being taken) by stage 2.
            mults = [SerialMultiplier(aw, 32) for _ in range(lanes)]
            for j, mu in enumerate(mults):
                m.submodules[f"mult_{j}"] = mu
            busy, done = mults[0].busy, mults[0].done
            pending = Signal()          # products in the multipliers not yet taken
            issue = held & ~busy & ~done & (~pending | go)
            with m.If(done):
                m.d.sync += pending.eq(1)
            with m.Elif(go):
                m.d.sync += pending.eq(0)
            m.d.comb += self.i.ready.eq(~held | (last & issue))
        else:
            issue = held & go
            m.d.comb += self.i.ready.eq(go & (~held | last))
        load = self.i.valid & self.i.ready
        with m.If(issue):
            if n > 1:   # the top chunk keeps stale lanes: they are never issued
                m.d.sync += [held_row[:-lanes * aw].eq(held_row[lanes * aw:]),
                             chunk.eq(Mux(last, 0, chunk + 1))]
        with m.If(load):
            m.d.sync += [held.eq(1), held_row.eq(self.i.payload.as_value()), chunk.eq(0)]
        with m.Elif(issue & last):
            m.d.sync += held.eq(0)

        # Stage valid bits (stages 1..3); all advance together under `go`.
        v = [Signal(name=f"v{s}") for s in range(1, 4)]
        with m.If(go):
            m.d.sync += [v[1].eq(v[0]), v[2].eq(v[1])]
        if serial:
            # The multipliers' product registers are stage 1: valid while a product waits.
            m.d.comb += v[0].eq(pending)
        else:
            v_pp = Signal()             # the partial-product registers hold a chunk
            with m.If(go):
                m.d.sync += [v_pp.eq(issue), v[0].eq(v_pp)]

        shift = p.shift
        lo = Signal(8)
        m.d.comb += lo.eq(Mux(p.relu, p.zp, -128))

        q_lanes = []
        for j in range(lanes):
            acc = held_row[j * aw:(j + 1) * aw].as_signed()
            prod = Signal(signed(64), name=f"prod_{j}")
            if serial:
                mu = mults[j]
                m.d.comb += [mu.start.eq(issue), mu.a.eq(acc), mu.b.eq(p.mult),
                             prod.eq(mu.p)]            # sign-extended or truncated to 64
            else:
                # Two registered partial products (DSP blocks with output registers), then
                # their sum, wrapped to 64 bits: acc * mult mod 2**64.
                pp_lo = Signal(signed(aw + 17), name=f"pp_lo_{j}")
                pp_hi = Signal(signed(aw + 16), name=f"pp_hi_{j}")
                with m.If(go):
                    m.d.sync += [pp_lo.eq(acc * p.mult[:16]),
                                 pp_hi.eq(acc * p.mult[16:].as_signed()),
                                 prod.eq(pp_lo + (pp_hi << 16))]
            q_lanes.append(_requant_lane(m, go, prod, shift, p.zp, p.relu, lo, j))

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


#: Bits of ``(2 * p) >> shift`` that the datapath keeps: the rounding bit and 9 bits of
#: ``p >> shift`` (enough for every y whose y + zp can land inside -128..127).
_WIN = 10


def _all_equal(bits):
    return bits.all() | ~bits.any()


def _requant_lane(m, go, prod, shift, zp, relu, lo, j, domain="sync"):
    """The requantization datapath of one lane after the product register: two registers
    (window shift, then fine shift and rounding) and the ``+ zp`` / clamp logic in front of
    the output register. Returns the int8 result (combinational from the last register).
    ``lo`` is ``relu ? zp : -128``; ``domain="comb"`` turns the two registers into wires (for
    an equivalence check of the datapath against the 64-bit formula).

    ``pp = 2 * prod`` (65 bits, sign-extended) shifted right by ``shift`` gives ``a``; its
    bit 0 is the rounding bit ``prod[shift - 1]`` (0 when shift == 0) and bits 1.. are
    ``prod >> shift``. Only a ``_WIN``-bit window of ``a`` is produced, by a log shifter
    that narrows at each stage, plus ``fits`` (``a`` is a ``_WIN``-bit signed number: every
    bit the stages drop above the window equals the window's top bit) and ``wrap`` (bits
    ``shift - 1 .. 62`` of ``prod`` all ones: the carry of ``+ r`` reaches bit 63, so
    ``t = prod + r`` has the opposite sign of ``prod``; if ``prod >= 0`` that is the 64-bit
    overflow, and either way ``t >> shift == ~(prod >> shift)``)."""
    pp = Cat(Const(0, 1), prod, prod[63].replicate(8))       # bits 0..72, 65.. = sign
    width = [_WIN + (1 << k) - 1 for k in range(6)] + [65]     # window width after stage k

    def stage(x, k):
        # stage k shifts by 2**k or not; returns the narrower window and its "fits" term
        sel, step, w = shift[k], 1 << k, width[k]
        y = Mux(sel, x[step:step + w], x[:w])
        return y, sel | _all_equal(x[w - 1:width[k + 1]])

    # -- stage A: product -> coarse window (shift by 32 / 16 / 8), its flags -----------------
    x, oks = pp, []
    for k in (5, 4, 3):
        x, ok = stage(x, k)
        oks.append(ok)
    # wrap, upper part: every byte of pp above the byte that holds bit `shift` is all ones
    # (pp[8g:8g+8] for g = shift[3:] + 1 .. 7; pp[8..63] = prod[7..62]).
    sh = shift[3:]
    groups = [pp[8 * g:8 * g + 8].all() | (sh >= g) for g in range(1, 8)]
    a_win = Signal(width[3], name=f"a_win_{j}")
    a_ok = Signal(name=f"a_ok_{j}")
    a_wrap = Signal(name=f"a_wrap_{j}")
    a_neg = Signal(name=f"a_neg_{j}")
    with m.If(go):
        m.d[domain] += [a_win.eq(x), a_ok.eq(Cat(*oks).all()),
                        a_wrap.eq(Cat(*groups).all()), a_neg.eq(prod[63])]

    # -- stage B: fine shift (4 / 2 / 1), rounding, saturation flags -----------------------
    x, oks = a_win, [a_ok]
    for k in (2, 1, 0):
        x, ok = stage(x, k)
        oks.append(ok)
    sl = shift[:3]
    wrap = a_wrap & Cat(*[a_win[i] | (sl > i) for i in range(8)]).all()
    fits = Cat(*oks).all()
    # y = t >> shift. No wrap: y = (prod >> shift) + round bit, exact when `fits`
    # (-256..256). Wrap: y = ~(prod >> shift), exact when `fits`. Not `fits`: y is outside
    # -256..255 and saturates by its sign, the sign of t: prod[63] ^ wrap.
    hi_n = x[1:] ^ wrap.replicate(_WIN - 1)
    cin_n = x[0] & ~wrap
    hi = Signal(signed(_WIN - 1), name=f"hi_{j}")
    cin = Signal(name=f"cin_{j}")
    y_neg = Signal(name=f"y_neg_{j}")
    sat = Signal(name=f"sat_{j}")
    with m.If(go):
        m.d[domain] += [hi.eq(hi_n), cin.eq(cin_n), y_neg.eq(a_neg ^ wrap), sat.eq(~fits)]

    # -- y + zp = hi + cin + zp and clamp, into the output register --------------------------
    s = Signal(signed(_WIN), name=f"s_{j}")                    # -384..383
    m.d.comb += s.eq((hi + zp + cin)[:_WIN])
    over = ~s[-1] & (s[7] | s[8])                              # s > 127
    under = Mux(relu, y_neg, s[-1] & ~(s[7] & s[8]))           # s < lo
    hi_sat = Mux(sat, ~y_neg, over)
    lo_sat = Mux(sat, y_neg, under)
    q = Signal(signed(8), name=f"q_{j}")
    m.d.comb += q.eq(Mux(hi_sat, 127, Mux(lo_sat, lo, s[:8])))
    return q
