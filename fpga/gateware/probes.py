"""Measurement tops: a part of the design alone on a board's pins, so that place and route
measures that part (its size, its Fmax) and nothing of it is optimized away.

``PinHarness(dut)`` feeds every input of ``dut`` from a shift register on ``rx`` and captures
every output into a register that shifts out on ``tx``; ``ArrayProbe`` is the systolic array
(``hdl.array.SystolicArray``) in one. Both have the ports of ``fpga.gateware.top.BoardTop`` that a
board wrapper connects (``rx``, ``tx``, ``led_busy``, ``led_error``). Not working designs: only for
measuring.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, Value, ValueCastable
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from tpugen.hdl.array import SystolicArray
from tpugen.hdl.config import Config, check_config

__all__ = ["PinHarness", "ArrayProbe"]


def _flat_ports(component):
    """(inputs, outputs) of a component: the non-constant signals of its signature, flattened."""
    ins, outs = [], []
    for _path, member, value in component.signature.flatten(component):
        if isinstance(value, ValueCastable):
            value = value.as_value()
        value = Value.cast(value)
        if not isinstance(value, Signal):
            continue
        (ins if member.flow == In else outs).append(value)
    return ins, outs


class PinHarness(wiring.Component):
    """``dut`` (a ``wiring.Component``) between pins: its every input from a shift register fed
    by ``rx``; its every output captured into a register that shifts out on ``tx`` (and the
    LEDs). The harness adds no logic between registers beyond one 2:1 multiplexer, so the
    critical path is the DUT's own."""

    def __init__(self, dut):
        if not isinstance(dut, wiring.Component):
            raise TypeError(f"dut must be a wiring.Component, not {dut!r}")
        self.dut = dut
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "led_busy": Out(1),
            "led_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        ins, outs = _flat_ports(dut)
        rx = Signal()
        m.submodules.rx_sync = FFSynchronizer(self.rx, rx, init=1)
        win = max(1, sum(len(s) for s in ins)) + 1
        sin = Signal(win)
        m.d.sync += sin.eq(Cat(rx, sin[:-1]))
        pos = 1
        for s in ins:
            m.d.comb += s.eq(sin[pos:pos + len(s)])
            pos += len(s)
        cat = Cat(*outs)
        sout = Signal(max(3, len(cat)))
        with m.If(sin[0]):
            m.d.sync += sout.eq(cat)
        with m.Else():
            m.d.sync += sout.eq(sout[1:])
        m.d.comb += [self.tx.eq(sout[0]), self.led_busy.eq(sout[1]), self.led_error.eq(sout[2])]
        return m


class ArrayProbe(PinHarness):
    """The systolic array alone (``hdl.array.SystolicArray(config, dsp_plan=dsp_plan)``) in a
    ``PinHarness``: what limits the grid itself."""

    def __init__(self, config: Config, *, dsp_plan=None, dsp_sites=None):
        check_config(config)
        self.config = config
        super().__init__(SystolicArray(config, dsp_plan=dsp_plan, dsp_sites=dsp_sites))
