"""The activation unit of the float operand types: binary32 accumulator rows converted to the
operand type, with an optional ReLU."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring

from tpugen.hdl.activation import activation_signature
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.float_convert import from_fp32

__all__ = ["FloatActivationUnit", "FLOAT_ACTIVATION_LATENCY"]

#: Cycles from a row's ``i`` transfer to its ``o.valid`` (one register: the converted row).
FLOAT_ACTIVATION_LATENCY = 1


class FloatActivationUnit(wiring.Component):
    """ACTIVATE for ``bf16`` / ``fp8_e4m3`` / ``fp8_e5m2``: each of the C lanes of an
    accumulator row (binary32 bits) goes through a ReLU (``x > 0 ? x : +0.0``, NaN stays NaN)
    when the row's parameter set ``qset`` is odd, then is converted to the operand type with
    round-to-nearest-even (``hdl.float_convert``: bf16 flushes to zero and overflows to
    infinity, fp8 saturates), bit-exact to ``sim.float_golden.activate``.

    The ports are the ``ActivationUnit``'s (``activation_signature``), so the core takes either:
      qw  ``In(stream)``: READ_QUANT beats, always taken and ignored (float types have no
          requantization parameters).
      i   ``In(stream)`` of ``act_in_layout``: an accumulator row and its set.
          ``i.ready = ~o.valid | o.ready`` (combinational from ``o.ready``, never from
          ``i.valid``).
      o   ``Out(stream)`` of ``q_row_layout``: the converted row, from a register.

    Timing: a row per cycle; ``FLOAT_ACTIVATION_LATENCY`` = 1 cycle from the ``i`` transfer to
    ``o.valid``. Cost: C converters (a rounding incrementer and the range checks each).
    """

    def __init__(self, config: Config):
        check_config(config)
        if not config.operand_type.is_float:
            raise ValueError(f"config.operand must be a float type, not {config.operand!r}")
        self.config = config
        super().__init__(activation_signature(config))

    @property
    def cycles_per_row(self) -> int:
        return 1

    @property
    def latency(self) -> int:
        return FLOAT_ACTIVATION_LATENCY

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.d.comb += self.qw.ready.eq(1)
        go = Signal()
        m.d.comb += [go.eq(~self.o.valid | self.o.ready), self.i.ready.eq(go)]
        relu = self.i.payload.qset[0] if cfg.quant_sets > 1 else 0
        with m.If(go):
            m.d.sync += self.o.valid.eq(self.i.valid)
            for c in range(cfg.cols):
                y = from_fp32(m, self.i.payload.row[c], cfg.operand_type, relu)
                m.d.sync += self.o.payload[c].eq(y)
        return m
