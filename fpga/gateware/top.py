"""The platform-independent board top: UART link endpoint + core bridge + core.

Platform wrappers (clock, pins) instantiate ``BoardTop`` and connect its one-bit ports; the
constructor and the ports below are the stable interface. ``BoardParameters`` validates the
same parameters without building anything (the simulated board's build key, its testbench).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tpugen.fpga.gateware.bridge import Bridge, check_max_reply
from tpugen.fpga.gateware.link_endpoint import LinkEndpoint, link_parameters
from tpugen.fpga.protocol import (
    DEFAULT_MAX_PAYLOAD,
    MAX_LENGTH,
    FrameType,
    beat_record_size,
    board_id_from_config,
    default_max_reply,
)
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.core import Core
from tpugen.hdl.dsp import check_dsp_family, check_dsp_plan, check_dsp_sites

__all__ = ["BoardTop", "BoardParameters", "LED_HOLD_SECONDS", "connect_core"]

#: How long ``led_link`` stays lit after a frame.
LED_HOLD_SECONDS = 0.05
#: The request types the link passes to the bridge.
_INSIDE_TYPES = (FrameType.PROGRAM, FrameType.CONTROL)


@dataclass(frozen=True)
class BoardParameters:
    """A ``BoardTop``'s parameters (see there), validated and with the defaults filled in:
    ``make`` builds them (``TypeError`` / ``ValueError`` naming a bad one); ``to_dict`` and
    ``from_dict`` carry them as JSON (into a simulator process)."""

    config: Config
    clk_freq: float
    baud: float
    max_payload: int
    max_reply: int
    timeout_bits: int

    @classmethod
    def make(cls, config: Config, clk_freq, baud, *, max_payload: int = DEFAULT_MAX_PAYLOAD,
             max_reply: int | None = None, timeout_bits: int | None = None) -> BoardParameters:
        check_config(config)
        max_payload = check_int("max_payload", max_payload)
        least = max(16, beat_record_size(config))
        if not least <= max_payload <= MAX_LENGTH:
            raise ValueError(f"max_payload must be in {least}..{MAX_LENGTH} (a frame must hold "
                             f"a host-in beat record), not {max_payload!r}")
        if max_reply is None:
            max_reply = default_max_reply(config, max_payload)
            if max_reply > MAX_LENGTH:
                raise ValueError(f"C={config.cols} lanes of {config.acc_width} bits make a "
                                 f"READ_COUNTERS reply longer than {MAX_LENGTH} bytes")
        check_max_reply(config, max_reply)
        link = link_parameters(clk_freq, baud, max_payload=max_payload, max_reply=max_reply,
                               id_payload=board_id_from_config(config),
                               timeout_bits=timeout_bits, inside_types=_INSIDE_TYPES)
        return cls(config, clk_freq, baud, max_payload, max_reply, link.timeout_bits)

    def to_dict(self) -> dict:
        return {"config": self.config.to_dict(), "clk_freq": self.clk_freq, "baud": self.baud,
                "max_payload": self.max_payload, "max_reply": self.max_reply,
                "timeout_bits": self.timeout_bits}

    @classmethod
    def from_dict(cls, d: dict) -> BoardParameters:
        if not isinstance(d, dict):
            raise TypeError(f"board parameters must be a dict, not {d!r}")
        d = dict(d)
        config = Config.from_dict(d.pop("config"))
        return cls.make(config, d.pop("clk_freq"), d.pop("baud"), **d)


def connect_core(m, bridge: Bridge, core: Core) -> None:
    """Connect a ``Bridge`` to a ``Core`` made with ``snapshot_port=True``: the bridge's
    ``core`` member is the core's whole bus flipped (``hdl.core.core_signature``: the streams,
    the status, the clear pulses and the counter snapshot); not ``core_rst``, which the caller
    puts on the core's reset."""
    if not core.snapshot_port:
        raise ValueError("the core must be made with snapshot_port=True for a bridge")
    wiring.connect(m, bridge.core, core)


class BoardTop(wiring.Component):
    """``LinkEndpoint`` + ``Bridge`` + a flat ``Core(config)``, one clock domain (``sync``).

    Parameters:
      config       the accelerator's ``hdl.config.Config``.
      clk_freq     the ``sync`` clock in Hz (the UART's timing comes from it).
      baud         the UART bit rate (``fpga.uart.baud_timing`` checks the pair).
      max_payload  the largest request payload in bytes (the request buffer), 16..65535 and
                   at least one host-in beat record (``protocol.beat_record_size``); default
                   ``protocol.DEFAULT_MAX_PAYLOAD``.
      max_reply    the largest reply payload (the reply buffer, plus the bridge's own beat
                   buffer of about the same size); default ``protocol.default_max_reply``.
      timeout_bits the link's idle timeout in bit-times (default 10 ms worth; see
                   ``LinkEndpoint``).
      dsp_plan     the array cells whose multiplier is an FPGA DSP block
                   (``hdl.dsp.dsp_plan``; default none: a build's choice, not a parameter of
                   the board's behaviour).
      dsp_family   the FPGA family whose DSP primitives the activation unit instances
                   (``hdl.dsp.DSP_FAMILIES``; default none: Yosys maps its multipliers).
      dsp_sites    where the array's ECP5 blocks are placed (``fpga.floorplan``; default
                   where nextpnr puts them).

    All are validated here (``BoardParameters.make``, ``hdl.dsp.check_dsp_plan``); ``params``
    holds the first five.

    Ports (all synchronous to ``sync`` except ``rx``, which is synchronized inside):
      rx         ``In(1)``, idle high: the UART line from the host.
      tx         ``Out(1)``, idle high: the UART line to the host.
      led_busy   ``Out(1)``: the core is busy or the bridge is handling a frame.
      led_error  ``Out(1)``: the core's sticky error is set.
      led_link   ``Out(1)``: lit for ``LED_HOLD_SECONDS`` after each frame (good or bad).
      core_busy  ``Out(1)``: the core's ``status.busy`` alone (for a logic analyser).

    The link answers PING and ID (board part: ``protocol.board_id_from_config(config)``) and
    bad frames itself and passes PROGRAM and CONTROL to the bridge (``fpga.protocol`` has the
    formats). The synchronous reset resets everything; a CONTROL frame can reset the core alone.
    """

    def __init__(self, config: Config, clk_freq, baud, *, max_payload: int = DEFAULT_MAX_PAYLOAD,
                 max_reply: int | None = None, timeout_bits: int | None = None,
                 dsp_plan: dict | None = None, dsp_family: str | None = None,
                 dsp_sites: dict | None = None):
        self.params = p = BoardParameters.make(config, clk_freq, baud, max_payload=max_payload,
                                               max_reply=max_reply, timeout_bits=timeout_bits)
        self.dsp_plan = check_dsp_plan(config, dsp_plan)
        self.dsp_family = check_dsp_family(dsp_family)
        self.dsp_sites = check_dsp_sites(config, self.dsp_plan, dsp_sites)
        self.config = config
        self.clk_freq, self.baud = clk_freq, baud
        self.max_payload, self.max_reply = p.max_payload, p.max_reply
        self.led_hold = max(1, math.ceil(LED_HOLD_SECONDS * float(clk_freq)))
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "led_busy": Out(1),
            "led_error": Out(1),
            "led_link": Out(1),
            "core_busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.link = link = LinkEndpoint(
            p.clk_freq, p.baud, max_payload=p.max_payload, max_reply=p.max_reply,
            id_payload=board_id_from_config(p.config), timeout_bits=p.timeout_bits,
            inside_types=_INSIDE_TYPES)
        # (narrow RESULT beats but on the iCE40: Yosys 0.70's ABC9 stops on an assertion there)
        m.submodules.bridge = bridge = Bridge(p.config, max_reply=p.max_reply,
                                              max_payload=p.max_payload,
                                              narrow_beats=self.dsp_family != "ice40")
        core = Core(p.config, dsp_plan=self.dsp_plan, snapshot_port=True,
                    dsp_family=self.dsp_family, dsp_sites=self.dsp_sites)
        m.submodules.core = ResetInserter({"sync": bridge.core_rst})(core)

        wiring.connect(m, link.req, bridge.req)
        wiring.connect(m, bridge.rsp, link.rsp)
        connect_core(m, bridge, core)
        m.d.comb += [
            link.rx.eq(self.rx),
            self.tx.eq(link.tx),
            self.led_busy.eq(core.status.busy | bridge.active),
            self.led_error.eq(core.status.error),
            self.core_busy.eq(core.status.busy),
        ]
        hold = Signal(range(self.led_hold + 1))
        with m.If(link.good_frame | link.bad_frame):
            m.d.sync += hold.eq(self.led_hold)
        with m.Elif(hold != 0):
            m.d.sync += hold.eq(hold - 1)
        m.d.comb += self.led_link.eq(hold != 0)
        return m
