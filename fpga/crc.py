"""CRC-16/CCITT-FALSE in software and as a byte-wise Amaranth component.

CRC-16/CCITT-FALSE: width 16, polynomial 0x1021, init 0xFFFF, no input or output reflection,
no final XOR; the check value (CRC of ``b"123456789"``) is 0x29B1. Appending a message's CRC high
byte first makes the CRC of the whole 0 (the "residue"), which is how frame receivers check it.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CRC_POLY", "CRC_INIT", "CRC_CHECK", "crc16", "crc16_update", "CRC16",
           "SerialCRC16"]

CRC_POLY = 0x1021
CRC_INIT = 0xFFFF
#: CRC of b"123456789".
CRC_CHECK = 0x29B1


def _make_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ CRC_POLY if crc & 0x8000 else crc << 1) & 0xFFFF
        table.append(crc)
    return table


_TABLE = _make_table()


def crc16_update(crc: int, byte: int) -> int:
    """The CRC after one more byte."""
    return ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ byte) & 0xFF]


def crc16(data: bytes, crc: int = CRC_INIT) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (continuing from ``crc`` if given)."""
    for byte in bytes(data):
        crc = crc16_update(crc, byte)
    return crc


def _byte_step_matrix() -> list[frozenset]:
    """For each bit of the next CRC, the set of current-CRC bits (0..15) and data bits (16..23)
    whose XOR it is: the bit-serial MSB-first update unrolled over one byte, in GF(2)."""
    crc = [frozenset({i}) for i in range(16)]
    for k in range(7, -1, -1):                      # data bits, MSB first
        feedback = crc[15] ^ frozenset({16 + k})
        shifted = [frozenset()] + crc[:15]
        crc = [shifted[i] ^ feedback if CRC_POLY >> i & 1 else shifted[i] for i in range(16)]
    return crc


class CRC16(wiring.Component):
    """Byte-wise CRC-16/CCITT-FALSE: one byte per cycle.

    Ports:
      clear   ``In(1)``: restart from ``CRC_INIT`` (with ``valid`` in the same cycle, the byte is
              the first of the new message).
      valid   ``In(1)``: ``data`` is the next message byte.
      data    ``In(8)``
      crc     ``Out(16)``: the CRC of the bytes so far, registered (a byte given in cycle t is
              included from cycle t + 1 on).
      next    ``Out(16)``: combinationally, what ``crc`` will be in the next cycle.
    """

    def __init__(self):
        super().__init__({
            "clear": In(1),
            "valid": In(1),
            "data": In(8),
            "crc": Out(16, init=CRC_INIT),
            "next": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        base = Signal(16)
        m.d.comb += base.eq(CRC_INIT)
        with m.If(~self.clear):
            m.d.comb += base.eq(self.crc)
        inputs = Cat(base, self.data)
        stepped = Signal(16)
        for i, terms in enumerate(_byte_step_matrix()):
            bit = 0
            for t in sorted(terms):
                bit = bit ^ inputs[t]
            m.d.comb += stepped[i].eq(bit)
        m.d.comb += self.next.eq(base)
        with m.If(self.valid):
            m.d.comb += self.next.eq(stepped)
        m.d.sync += self.crc.eq(self.next)
        return m


class SerialCRC16(wiring.Component):
    """Bit-serial CRC-16/CCITT-FALSE: a byte is taken in one clock and folded in over the next
    eight, one bit a clock (MSB first). About a logic cell per CRC bit plus a 9-bit byte shift
    register, against some 70 LUT4s for the byte-parallel ``CRC16``; it suits byte streams from
    a UART (a byte every 30 clocks or more).

    Ports:
      clear   ``In(1)``: restart from ``CRC_INIT`` (with ``valid`` in the same cycle, the byte is
              the first of the new message).
      valid   ``In(1)``: take ``data`` as the next message byte (only while ``busy`` is low).
      data    ``In(8)``
      busy    ``Out(1)``: a byte is being folded in; ``crc`` is final when it is low.
      crc     ``Out(16)``: the CRC of the bytes folded in so far (registered). A byte given in
              cycle t is included from cycle t + 9 on.

    Feeding the CRC's own high byte shifts it left by eight bits (``crc16_update(c, c >> 8) ==
    c << 8 & 0xFFFF``), so a transmitter can send ``crc[8:]`` twice, feeding the first.
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
        # The byte at the top (bit 8 is the next bit to fold in) above a marker 1 that reaches
        # the top after eight shifts: busy while the marker is below bit 8.
        sr = Signal(9)
        m.d.comb += self.busy.eq(sr[:8] != 0)
        crc = self.crc
        fb = crc[15] ^ sr[8]
        stepped = Cat(fb, *(crc[i - 1] ^ fb if CRC_POLY >> i & 1 else crc[i - 1]
                            for i in range(1, 16)))
        with m.If(self.valid):
            m.d.sync += sr.eq(Cat(1, self.data))
        with m.Elif(self.busy):
            m.d.sync += [sr.eq(sr << 1), crc.eq(stepped)]
        with m.If(self.clear):
            m.d.sync += crc.eq(CRC_INIT)
        return m
