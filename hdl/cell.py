"""The weight-stationary multiply-accumulate cell."""

from amaranth.hdl import ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import Config

__all__ = ["Cell", "cell_signature"]


def cell_signature(config: Config) -> wiring.Signature:
    """The ports of a ``Cell`` of ``config`` (also those of its Verilog module)."""
    ow, aw = config.operand_width, config.acc_width
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
      ps_in, ps_out       ``acc_width`` partial sums; ``ps_out = ps_in + a_in * w`` one cycle
                          later, wrapped to ``acc_width`` in two's complement.
      w_data, w_load      when ``w_load`` is high, ``w_data`` is written into the shadow weight
                          register at the end of the cycle.

    The weight ``w`` used in a cycle is the active register, or the shadow register when
    ``first_in`` is high; in the latter case the shadow is copied to the active register at the
    end of that cycle. So a cell switches to the next tile's weights exactly with the first
    activation of that tile, and a shadow write in the very cycle of the switch is safe (the
    switch reads the old shadow).

    ``fault=True`` is a debug option for testing the tests: the product's LSB is inverted.
    """

    def __init__(self, config: Config, *, fault: bool = False, index=None):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        self.fault = bool(fault)
        self.index = index
        super().__init__(cell_signature(config))

    def elaborate(self, platform):
        m = Module()
        ow = self.config.operand_width
        w_active = Signal(signed(ow))
        w_shadow = Signal(signed(ow))

        w = Mux(self.first_in, w_shadow, w_active)
        a = self.a_in
        if self._ecp5_dsp(platform):
            product = self._mult18x18d(m, a, w)
        elif self.config.cell_pipeline >= 2:
            # Registered multiplier inputs (a DSP block's input registers).
            a_r, w_r = Signal(signed(ow)), Signal(signed(ow))
            m.d.sync += [a_r.eq(a), w_r.eq(w)]
            a, w = a_r, w_r
        if not self._ecp5_dsp(platform):
            product = a * w
        if self.fault:
            product = product ^ 1
        if self.config.cell_pipeline >= 1 and not self._ecp5_dsp(platform):
            # Registered product (a DSP block's output register).
            p_r = Signal(signed(2 * ow))
            m.d.sync += p_r.eq(product)
            product = p_r

        m.d.sync += [
            self.a_out.eq(self.a_in),
            self.first_out.eq(self.first_in),
            self.ps_out.eq(self.ps_in + product),
        ]
        with m.If(self.first_in):
            m.d.sync += w_active.eq(w_shadow)
        with m.If(self.w_load):
            m.d.sync += w_shadow.eq(self.w_data)
        return m

    def _ecp5_dsp(self, platform):
        """On an ECP5 with ``cell_pipeline == 2``, cells ``i * C + j < platform.tpugen_dsp_cells``
        use a MULT18X18D with its input and output registers as the two pipeline stages."""
        if self.config.cell_pipeline != 2 or self.index is None or self.fault:
            return False
        if getattr(platform, "family", None) != "ecp5":
            return False
        budget = getattr(platform, "tpugen_dsp_cells", 0)
        i, j = self.index
        return i * self.config.cols + j < budget

    def _mult18x18d(self, m, a, w):
        ow = self.config.operand_width
        p = Signal(36)
        a18 = Signal(18)
        b18 = Signal(18)
        m.d.comb += [a18.eq(a.as_signed()), b18.eq(w.as_signed())]   # sign-extended
        kw = {}
        for k in range(18):
            kw[f"i_A{k}"] = a18[k]
            kw[f"i_B{k}"] = b18[k]
            kw[f"i_C{k}"] = Const(0)
        for k in range(36):
            kw[f"o_P{k}"] = p[k]
        regs = {}
        for r in ("INPUTA", "INPUTB", "OUTPUT"):
            regs[f"p_REG_{r}_CLK"] = "CLK0"
            regs[f"p_REG_{r}_CE"] = "CE0"
            regs[f"p_REG_{r}_RST"] = "RST0"
        for r in ("INPUTC", "PIPELINE"):
            regs[f"p_REG_{r}_CLK"] = "NONE"
        m.submodules.dsp = Instance(
            "MULT18X18D",
            **regs,
            p_CLK0_DIV="ENABLED", p_CLK1_DIV="ENABLED", p_CLK2_DIV="ENABLED",
            p_CLK3_DIV="ENABLED", p_HIGHSPEED_CLK="NONE", p_GSR="DISABLED",
            p_CAS_MATCH_REG="FALSE", p_SOURCEB_MODE="B_SHIFT", p_MULT_BYPASS="DISABLED",
            p_RESETMODE="SYNC",
            i_SIGNEDA=Const(1), i_SIGNEDB=Const(1), i_SOURCEA=Const(0), i_SOURCEB=Const(0),
            i_CLK0=ClockSignal(), i_CLK1=Const(0), i_CLK2=Const(0), i_CLK3=Const(0),
            i_CE0=Const(1), i_CE1=Const(0), i_CE2=Const(0), i_CE3=Const(0),
            i_RST0=ResetSignal(), i_RST1=Const(0), i_RST2=Const(0), i_RST3=Const(0),
            **kw)
        return p[:2 * ow].as_signed()
