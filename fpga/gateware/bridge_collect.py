"""The bridge's beat collector: the core's host-out beats into the reply buffer, a byte per
clock (``BeatCollector``). ``fpga.gateware.bridge`` wires it to the buffer and the core.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from tpugen.fpga.protocol import acc_bytes, result_beat_size
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.layouts import host_out_layout

__all__ = ["BeatCollector"]


class BeatCollector(wiring.Component):
    """Host-out beats into the reply buffer as RESULT beats (``fpga.protocol``: a flags byte
    (``last``, ``narrow``), then each lane's ``acc_bytes`` little-endian, sign-extended; or,
    for a beat whose every lane is an 8-bit value sign-extended, each lane's low byte only:
    ``protocol.narrow_beat_size`` bytes instead of at most ``result_beat_size``).

    Parameters: ``config``, and ``capacity``, the beats the buffer holds (>= 1); the buffer is
    ``capacity * result_beat_size(config)`` bytes (``depth``); ``narrow`` (default True): send
    beats narrow when they fit (False: always wide, with the same flags byte; the iCE40 board
    tops, where Yosys 0.70's ABC9 stops on an internal assertion with the narrow logic).

    Ports:
      host_out  ``In(stream(host_out_layout))``: the core's host-out beats. Taken only while
                ``enable`` (a beat that has started goes on to its end regardless).
      enable    ``In(1)``: take beats (the bridge is handling a PROGRAM frame).
      clear     ``In(1)``: empty the buffer and zero the counts (from the next clock; the
                collector's own updates in the same clock win).
      idle      ``Out(1)``: no beat is being written or dropped (decoded from the state).
      beats     ``Out(range(capacity + 1))``: the beats in the buffer.
      dropped   ``Out(16)``: beats dropped because the buffer was full (saturating).
      overflow  ``Out(1)``: a beat has been dropped.
      wptr      ``Out(range(depth + 1))``: the bytes in the buffer (the next write address).
      wr        ``In(WritePort.Signature(addr_width=ceil_log2(depth), shape=8))``: to the
                buffer's write port.

    Timing: a beat offered while ``enable`` and ``idle`` is looked at in the next clock
    (narrow or not, a register), taken into the byte shift register in the clock after and
    written a byte per clock (its size in clocks);
    ``host_out.ready`` rises in the clock its last byte is written (or, for a dropped beat,
    the clock after it was seen), from the state registers only: no path from the core's
    ``host_out.valid`` back into its read-ahead logic. ``beats`` counts it from the next clock.
    """

    def __init__(self, config: Config, capacity: int, *, narrow: bool = True):
        check_config(config)
        self.config = config
        self.narrow = bool(narrow)
        self.capacity = check_int("capacity", capacity, 1)
        self.depth = self.capacity * result_beat_size(config)
        super().__init__({
            "host_out": In(stream.Signature(host_out_layout(config))),
            "enable": In(1),
            "clear": In(1),
            "idle": Out(1),
            "beats": Out(range(self.capacity + 1)),
            "dropped": Out(16),
            "overflow": Out(1),
            "wptr": Out(range(self.depth + 1)),
            "wr": In(WritePort.Signature(addr_width=ceil_log2(self.depth), shape=8)),
        })

    def _beat_bytes(self):
        """The bytes of the beat offered, in buffer order, wide (flags, then each lane's bytes
        little-endian) and narrow (flags, then each lane's low byte), and whether it can go
        narrow (every lane an 8-bit value, sign-extended)."""
        cfg = self.config
        C, W, OA = cfg.cols, cfg.acc_width, acc_bytes(cfg)
        beat = self.host_out.payload
        flat = beat.data.as_value()
        wide, narrow, fits = [Cat(beat.last, Const(0, 7))], [Cat(beat.last, Const(1, 7))], []
        for k in range(C):
            raw = flat[k * W:(k + 1) * W]
            ext = Cat(raw, raw[-1].replicate(8 * OA - W)) if 8 * OA > W else raw
            wide += [ext[8 * j:8 * (j + 1)] for j in range(OA)]
            narrow.append(raw[:8])
            fits.append((raw[7:] == 0) | (raw[7:] == (1 << (W - 7)) - 1))
        return wide, narrow, Cat(*fits).all()

    def elaborate(self, platform):
        m = Module()
        with m.If(self.clear):
            m.d.sync += [self.beats.eq(0), self.dropped.eq(0), self.overflow.eq(0),
                         self.wptr.eq(0)]
        # The beat stays offered until its last byte is taken (the stream rules), and the
        # core's host-out payload is a register (``hdl.host_out``). Its bytes go through a
        # shift register loaded from that payload: each buffer byte comes from the register's
        # low byte, and every bit from its neighbour, not from a wide byte multiplexer (on a
        # 16x16 array, 520 payload bits into the 8 data pins of one block RAM: a hot spot the
        # ECP5 router could not clear).
        wide, narrow, fits = self._beat_bytes()
        shifter = Signal(8 * len(wide))
        bidx = Signal(range(len(wide)))
        blast = Signal()               # the byte being written is the beat's last
        is_narrow = Signal()           # the beat offered goes narrow (a register)
        last_idx = Mux(is_narrow, len(narrow) - 2, len(wide) - 2)
        m.d.comb += [self.wr.addr.eq(self.wptr), self.wr.data.eq(shifter[:8])]
        with m.FSM(name="collect"):
            with m.State("IDLE"):
                m.d.comb += self.idle.eq(1)
                with m.If(self.enable & self.host_out.valid):
                    with m.If(self.beats == self.capacity):
                        m.next = "DROP"
                    with m.Else():
                        if self.narrow:
                            m.d.sync += is_narrow.eq(fits)
                            m.next = "LOAD"
                        else:               # always wide: loaded at once (no LOAD clock)
                            m.d.sync += [shifter.eq(Cat(*wide)), bidx.eq(0), blast.eq(0)]
                            m.next = "BYTES"
            with m.State("LOAD"):
                m.d.sync += [shifter.eq(Mux(is_narrow, Cat(*narrow), Cat(*wide))),
                             bidx.eq(0), blast.eq(0)]
                m.next = "BYTES"
            with m.State("DROP"):
                m.d.comb += self.host_out.ready.eq(1)
                m.d.sync += self.overflow.eq(1)
                with m.If(self.dropped != 0xFFFF):
                    m.d.sync += self.dropped.eq(self.dropped + 1)
                m.next = "IDLE"
            with m.State("BYTES"):
                m.d.comb += self.wr.en.eq(1)
                m.d.sync += [self.wptr.eq(self.wptr + 1), bidx.eq(bidx + 1),
                             shifter.eq(shifter[8:]), blast.eq(bidx == last_idx)]
                with m.If(blast):
                    m.d.comb += self.host_out.ready.eq(1)
                    m.d.sync += self.beats.eq(self.beats + 1)
                    m.next = "IDLE"
        return m
