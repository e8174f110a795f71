"""The platform-independent board top: UART link endpoint + core bridge + core.

Platform wrappers (clock, pins) instantiate ``BoardTop`` and connect its one-bit ports; the
constructor and the ports below are the stable interface.
"""

import math

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from tpugen.hdl.config import Config
from tpugen.hdl.core import Core

from .bridge import Bridge, beat_record_size, result_beat_size
from .link import LinkEndpoint
from .protocol import (
    BOARD_ID_SIZE,
    LINK_ID_SIZE,
    MAX_LENGTH,
    RESULT_HEADER_SIZE,
    FrameType,
    board_id_from_config,
)

__all__ = ["BoardTop", "default_max_reply", "LED_HOLD_SECONDS"]

#: How long ``led_link`` stays lit after a frame.
LED_HOLD_SECONDS = 0.05
#: A reply must hold a whole READ_COUNTERS (the longest instruction output that the host
#: cannot split): 4 beats per counter, five counters.
_UNSPLITTABLE_BEATS = 20


def default_max_reply(config: Config, max_payload: int) -> int:
    """The reply buffer ``BoardTop`` uses by default: ``max_payload``, but at least a RESULT
    with one READ_COUNTERS (20 beats) and the ID reply."""
    need = max(max_payload, RESULT_HEADER_SIZE + _UNSPLITTABLE_BEATS * result_beat_size(config),
               LINK_ID_SIZE + BOARD_ID_SIZE)
    return need


class BoardTop(wiring.Component):
    """``LinkEndpoint`` + ``Bridge`` + a flat ``Core(config)``, one clock domain (``sync``).

    Parameters:
      config       the accelerator's ``hdl.config.Config``.
      clk_freq     the ``sync`` clock in Hz (the UART's timing comes from it).
      baud         the UART bit rate (``fpga.uart.baud_timing`` checks the pair).
      max_payload  the largest request payload in bytes (the request buffer), 16..65535 and
                   at least one host-in beat record (``bridge.beat_record_size``).
      max_reply    the largest reply payload (the reply buffer, plus the bridge's own beat
                   buffer of about the same size); default ``default_max_reply``.
      timeout_bits the link's idle timeout in bit-times (default 10 ms worth; see
                   ``LinkEndpoint``).
      dsp_plan     the array cells whose multiplier is an FPGA DSP block
                   (``hdl.dsp.dsp_plan``; default none).

    Ports (all synchronous to ``sync`` except ``rx``, which is synchronized inside):
      rx         ``In(1)``, idle high: the UART line from the host.
      tx         ``Out(1)``, idle high: the UART line to the host.
      led_busy   ``Out(1)``: the core is busy or the bridge is handling a frame.
      led_error  ``Out(1)``: the core's sticky error is set.
      led_link   ``Out(1)``: lit for ``LED_HOLD_SECONDS`` after each frame (good or bad).
      core_busy  ``Out(1)``: the core's ``status.busy`` alone (for a logic analyser).

    The link answers PING and ID (board part: ``board_id_from_config(config)``) and bad frames
    itself and passes PROGRAM and CONTROL to the bridge (``fpga.protocol`` has the formats).
    The synchronous reset resets everything; a CONTROL frame can reset the core alone.
    """

    def __init__(self, config: Config, clk_freq, baud, *, max_payload: int = 1024,
                 max_reply: int | None = None, timeout_bits: int | None = None,
                 dsp_plan: dict | None = None):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        if not isinstance(max_payload, int) or isinstance(max_payload, bool):
            raise TypeError(f"max_payload must be an integer, not {max_payload!r}")
        least = max(16, beat_record_size(config))
        if not least <= max_payload <= MAX_LENGTH:
            raise ValueError(f"max_payload must be in {least}..{MAX_LENGTH} (a frame must hold "
                             f"a host-in beat record), not {max_payload!r}")
        if max_reply is None:
            max_reply = default_max_reply(config, max_payload)
            if max_reply > MAX_LENGTH:
                raise ValueError(f"C={config.cols} lanes of {config.acc_width} bits make a "
                                 f"READ_COUNTERS reply longer than {MAX_LENGTH} bytes")
        self.config = config
        self.id_payload = board_id_from_config(config)
        # Validates clk_freq, baud, max_reply and timeout_bits.
        self.link = LinkEndpoint(clk_freq, baud, max_payload=max_payload, max_reply=max_reply,
                                 id_payload=self.id_payload, timeout_bits=timeout_bits,
                                 inside_types=(FrameType.PROGRAM, FrameType.CONTROL))
        self.bridge = Bridge(config, max_reply=max_reply, max_payload=max_payload)
        self.core = Core(config, dsp_plan=dsp_plan)
        for part in (self.link, self.bridge, self.core):
            part._MustUse__silence = True      # elaborated with this top (which is MustUse)
        self.clk_freq, self.baud = clk_freq, baud
        self.max_payload, self.max_reply = max_payload, max_reply
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
        link, bridge, core = self.link, self.bridge, self.core
        m.submodules.link = link
        m.submodules.bridge = bridge
        m.submodules.core = ResetInserter({"sync": bridge.core_rst})(core)

        wiring.connect(m, link.req, bridge.req)
        wiring.connect(m, bridge.rsp, link.rsp)
        wiring.connect(m, bridge.cmd, core.cmd)
        wiring.connect(m, bridge.host_in, core.host_in)
        wiring.connect(m, core.host_out, bridge.host_out)
        m.d.comb += [
            bridge.status.eq(core.status),
            core.clear_error.eq(bridge.clear_error),
            core.clear_counters.eq(bridge.clear_counters),
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
