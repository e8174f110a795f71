"""The weight-stationary multiply-accumulate cell."""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import Config, check_config
from tpugen.hdl.dsp import DSP_ROLES, mult18x18d, sb_mac16_8x8
from tpugen.hdl.float_mul import float_product
from tpugen.hdl.fp32_add import fp32_add

__all__ = ["Cell", "DspLink", "cell_signature", "mac16_hold"]


def mac16_hold(config: Config, role) -> bool:
    """Whether a cell of ``role`` keeps its active weight in its iCE40 block's B register (no
    active register and multiplexer of its own): a block of its own always; a shared block
    when R >= 3, because the ``mac16_hi`` cell's half takes its shadow one cycle before its
    tile starts there, and the array writes a tile's last shadow row at least two cycles before
    the tile's flag reaches it only then (``hdl.array``: its last beat one cycle before the
    first vector, whose flag reaches row R - 1 R - 1 cycles after row 0)."""
    if role == "mac16_one":
        return True
    return role in ("mac16_lo", "mac16_hi") and config.rows >= 3


def cell_signature(config: Config, ps_width: int | None = None) -> wiring.Signature:
    """The ports of a ``Cell`` of ``config`` with ``ps_width``-bit partial sums (default
    ``config.acc_width``; the array's cells use ``config.psum_width``), also those of its
    Verilog module."""
    ow = config.operand_width
    aw = config.acc_width if ps_width is None else ps_width
    return wiring.Signature({
        "a_in": In(signed(ow)),
        "first_in": In(1),
        "ps_in": In(signed(aw)),
        "w_data": In(signed(ow)),
        "w_load": In(1),
        "a_out": Out(signed(ow)),
        "first_out": Out(1),
        "ps_out": Out(signed(aw)),
    })


class Cell(wiring.Component):
    """One MAC cell of the systolic array: activation east, partial sum south, weight held.

    Ports (all registered outputs, latency 1 cycle):
      a_in, a_out         operand-width activation; ``a_out`` is ``a_in`` one cycle later.
      first_in, first_out the tile-boundary flag travelling with the activation.
      ps_in, ps_out       ``ps_width`` partial sums (default ``acc_width``; the array's cells
                          carry ``config.psum_width``); ``ps_out = ps_in + a * w`` one cycle
                          later, wrapped to ``ps_width`` in two's complement (float operand
                          types: the exact product in binary32, ``hdl.float_mul``, added with
                          ``hdl.fp32_add``: round to nearest even, flush to zero), where ``a`` and
                          ``w`` are the operands of ``P = config.cell_pipeline`` cycles earlier
                          (``P`` = 0: this cycle's ``a_in``; 1: the product is registered;
                          2: the multiplier's operands too). The array's latency grows by P.
      w_data, w_load      when ``w_load`` is high, ``w_data`` is written into the shadow weight
                          register at the end of the cycle.

    The weight ``w`` used in a cycle is the active register, or the shadow register when
    ``first_in`` is high; in the latter case the shadow is copied to the active register at the
    end of that cycle. So a cell switches to the next tile's weights exactly with the first
    activation of that tile, and a shadow write in the very cycle of the switch is safe (the
    switch reads the old shadow).

    ``fault=True`` is a debug option for testing the tests: the product's LSB is inverted.
    ``dsp_role`` (with ``cell_pipeline == 2``, on an FPGA; see ``hdl.dsp``): the multiplier is a
    DSP block with its two registers: ``"mult18"`` an ECP5 MULT18X18D; ``"mac16_lo"`` /
    ``"mac16_hi"`` the bottom / top half of an iCE40 SB_MAC16 shared through ``dsp_link`` (a
    ``DspLink``; the ``lo`` cell instances the block); ``"mac16_one"`` a block of its own.
    ``dsp_site`` (``"mult18"`` only): the BEL its block is placed at (``fpga.gateware.floorplan``).
    """

    def __init__(self, config: Config, *, fault: bool = False, dsp_role=None, dsp_link=None,
                 ps_width: int | None = None, dsp_site: str | None = None):
        check_config(config)
        if ps_width is None:
            ps_width = config.acc_width
        least = config.operand_type.product_width
        if (not isinstance(ps_width, int) or isinstance(ps_width, bool)
                or not min(least, config.acc_width) <= ps_width <= config.acc_width):
            raise ValueError(f"ps_width must be an integer in "
                             f"{min(least, config.acc_width)}..{config.acc_width}, "
                             f"not {ps_width!r}")
        if dsp_role is not None and dsp_role not in DSP_ROLES:
            raise ValueError(f"dsp_role must be None or one of {', '.join(DSP_ROLES)}, not "
                             f"{dsp_role!r}")
        if dsp_role is not None and config.operand_type.is_float:
            raise ValueError(f"dsp_role must be None for {config.operand}, not {dsp_role!r}")
        if dsp_role is not None and config.cell_pipeline != 2:
            raise ValueError(f"dsp_role needs cell_pipeline 2, not {config.cell_pipeline}")
        if (dsp_role in ("mac16_lo", "mac16_hi")) != (dsp_link is not None):
            raise ValueError("dsp_link must be given exactly for the mac16_lo / mac16_hi roles")
        if dsp_site is not None and dsp_role != "mult18":
            raise ValueError(f"dsp_site places a 'mult18' block, not a {dsp_role!r} cell")
        self.dsp_site = dsp_site
        self.config = config
        self.fault = bool(fault)
        self.dsp_role = dsp_role
        self.dsp_link = dsp_link
        self.ps_width = ps_width
        super().__init__(cell_signature(config, ps_width))

    def elaborate(self, platform):
        m = Module()
        ot = self.config.operand_type
        ow = ot.width
        pipeline = self.config.cell_pipeline
        # Data registers have no reset (fewer reset arcs on an FPGA): what they hold matters
        # only beside valid vectors, whose flags (in the array) are reset. ``first_out`` is.
        w_active = Signal(signed(ow), reset_less=True)
        w_shadow = Signal(signed(ow), reset_less=True)

        a = self.a_in
        w = Signal(signed(ow))
        m.d.comb += w.eq(Mux(self.first_in, w_shadow, w_active))
        role, link = self.dsp_role, self.dsp_link
        # iCE40 blocks hold the active weights in their B register (``mac16_hold``).
        hold = mac16_hold(self.config, role)
        if role == "mult18":
            product = mult18x18d(m, a, w, site=self.dsp_site)
        elif role in ("mac16_lo", "mac16_one") and hold:
            # B takes the shadows when a tile starts here and holds otherwise, so it is the
            # active register; the partner (column j + 1) sees this cycle's activation and flag
            # one cycle later, so its half takes them now and its product waits a cycle more.
            zero = Const(0, signed(8))
            p_lo, p_hi = sb_mac16_8x8(m, _signed8(m, a), _signed8(m, w_shadow),
                                      _signed8(m, a) if link else zero,
                                      link.w if link else zero,
                                      b_hold=~self.first_in, top_delay=link is not None)
            product = p_lo
            if link is not None:
                m.d.comb += link.p.eq(p_hi)
        elif role == "mac16_hi" and hold:
            m.d.comb += link.w.eq(w_shadow)
            product = link.p
        elif role in ("mac16_lo", "mac16_one"):
            zero = Const(0, signed(8))
            p_lo, p_hi = sb_mac16_8x8(m, _signed8(m, a), _signed8(m, w),
                                      link.a if link else zero, link.w if link else zero)
            product = p_lo
            if link is not None:
                m.d.comb += link.p.eq(p_hi)
        elif role == "mac16_hi":
            # The block lives in the partner cell (column j - 1).
            m.d.comb += [link.a.eq(a), link.w.eq(w)]
            product = link.p
        else:
            if pipeline >= 2:
                # Registered multiplier inputs (a DSP block's input registers).
                a_r = Signal(signed(ow), reset_less=True)
                w_r = Signal(signed(ow), reset_less=True)
                m.d.sync += [a_r.eq(a), w_r.eq(w)]
                a, w = a_r, w_r
            product = float_product(m, a, w, ot) if ot.is_float else a * w
            if pipeline >= 1:
                # Registered product (a DSP block's output register).
                p_r = Signal(signed(ot.product_width), reset_less=True)
                m.d.sync += p_r.eq(product)
                product = p_r
        if self.fault:
            product = product ^ 1

        a_q = Signal(signed(ow), reset_less=True)
        ps_q = Signal(signed(self.ps_width), reset_less=True)
        m.d.sync += [
            a_q.eq(self.a_in),
            self.first_out.eq(self.first_in),
            ps_q.eq(fp32_add(m, self.ps_in, product) if ot.is_float else self.ps_in + product),
        ]
        m.d.comb += [self.a_out.eq(a_q), self.ps_out.eq(ps_q)]
        with m.If(self.first_in):
            m.d.sync += w_active.eq(w_shadow)
        with m.If(self.w_load):
            m.d.sync += w_shadow.eq(self.w_data)
        return m


def _signed8(m, v):
    """``v`` (a signed operand of up to 8 bits) sign-extended to the 8 bits of an SB_MAC16
    8x8 operand."""
    if len(v) == 8:
        return v
    wide = Signal(signed(8))
    m.d.comb += wide.eq(v)
    return wide


class DspLink:
    """The wires between two cells sharing an iCE40 SB_MAC16: the ``mac16_hi`` cell's operands
    ``a``, ``w`` (to the block, sign-extended to 8 bits) and its product ``p`` (from the
    block)."""

    def __init__(self, config: Config, name: str):
        self.a = Signal(signed(8), name=f"{name}_a")
        self.w = Signal(signed(8), name=f"{name}_w")
        self.p = Signal(signed(16), name=f"{name}_p")
