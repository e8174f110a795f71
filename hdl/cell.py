"""The weight-stationary multiply-accumulate cell."""

from amaranth.hdl import Module, Mux, Signal, signed
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

    def __init__(self, config: Config, *, fault: bool = False):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        self.fault = bool(fault)
        super().__init__(cell_signature(config))

    def elaborate(self, platform):
        m = Module()
        ow = self.config.operand_width
        w_active = Signal(signed(ow))
        w_shadow = Signal(signed(ow))

        w = Mux(self.first_in, w_shadow, w_active)
        product = self.a_in * w
        if self.fault:
            product = product ^ 1

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
