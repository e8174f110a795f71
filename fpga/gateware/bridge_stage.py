"""The bridge's way to the core: the record register (``RecordStage``) and the detector of
records the core can never take (``StuckDetector``). ``fpga.gateware.bridge`` wires them up.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tpugen.fpga.protocol import operand_bytes, packs_int4
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.isa import INSTR_LAYOUT
from tpugen.hdl.layouts import host_in_layout, host_lanes

__all__ = ["RecordStage", "StuckDetector", "STUCK_CYCLES", "saturating_run"]

#: Cycles a record may wait in a state in which the core can never take it before the bridge
#: gives up on it (``BridgeError.NOT_TAKEN``).
STUCK_CYCLES = 16


def saturating_run(m: Module, counts, limit: int, name: str):
    """A run counter: the clocks in a row in which ``counts`` was high, saturating at
    ``limit``, zeroed by a clock with ``counts`` low. Returns ``(run, at_limit)``, both
    registers: ``at_limit`` is high in the clock after one in which ``counts`` was high and
    ``run`` was at least ``limit - 1`` (so ``at_limit`` rises together with ``run`` reaching
    ``limit``). The signals are named ``{name}_run`` and ``{name}_lim``."""
    run = Signal(range(limit + 1), name=f"{name}_run")
    at_limit = Signal(name=f"{name}_lim")
    with m.If(counts):
        with m.If(run != limit):
            m.d.sync += run.eq(run + 1)
    with m.Else():
        m.d.sync += run.eq(0)
    m.d.sync += at_limit.eq(counts & (run >= limit - 1))
    return run, at_limit


class RecordStage(wiring.Component):
    """The record register, which is also the one-entry register stage to the core.

    Bytes shift in at the top and move down a byte per step, so a record's last byte is at
    the top: an instruction word is the top 64 bits, a beat the top ``8 * beat_in`` bits
    (``beat_in`` = ``host_lanes * operand_bytes``; a packed int4 beat record the top
    ``(host_lanes + 1) // 2`` bytes, lane k its nibble k, sign-extended).

    Ports (the control inputs act at the clock edge; the outputs come from registers: the
    payloads straight from the record register (an int4 beat through the nibble multiplexer),
    ``cmd.valid`` / ``host_in.valid`` are ``full & ~withdraw`` and the kind):
      byte          ``In(8)``: the byte shifted in with ``shift``.
      shift         ``In(1)``: move the register down a byte, ``byte`` at the top.
      start         ``In(1)``: a record begins; ``start_word`` (an instruction word: only
                    ``is_word`` is set), else a beat with ``start_last`` (the host-in beat's
                    ``last``) and ``start_packed`` (a packed int4 record).
      fill          ``In(1)``: the record is complete: offer it from the next clock (``full``).
      drop          ``In(1)``: give up on the record offered (``full`` low from the next clock).
      flush         ``In(1)``: the core is being reset: the record offered is gone.
      withdraw      ``In(1)``: do not offer the record in this clock (``StuckDetector.at_limit``).
      full          ``Out(1)``: a record is held (offered unless withdrawn).
      is_word       ``Out(1)``: it is an instruction word (else a host-in beat).
      taken         ``Out(1)``: the core took the record in the previous clock.
      cmd, host_in  ``Out`` streams to the core's ``cmd`` and ``host_in``.

    Timing: the core's ``ready`` only clears ``full`` at the clock edge (and sets ``taken``):
    no combinational path runs from the core's ``ready`` into the bridge. ``fill`` and
    ``drop`` win over a transfer in the same clock (they never coincide with one).
    """

    def __init__(self, config: Config):
        check_config(config)
        self.config = config
        self.lanes = host_lanes(config)
        self.operand_bytes = operand_bytes(config)
        #: Payload bytes of a beat record, and of a packed one (int4 only).
        self.beat_in = self.lanes * self.operand_bytes
        self.packs = packs_int4(config)
        self.beat_packed = (self.lanes + 1) // 2
        super().__init__({
            "byte": In(8),
            "shift": In(1),
            "start": In(1),
            "start_word": In(1),
            "start_last": In(1),
            "start_packed": In(1),
            "fill": In(1),
            "drop": In(1),
            "flush": In(1),
            "withdraw": In(1),
            "full": Out(1),
            "is_word": Out(1),
            "taken": Out(1),
            "cmd": Out(stream.Signature(INSTR_LAYOUT)),
            "host_in": Out(stream.Signature(host_in_layout(config))),
        })

    def elaborate(self, platform):
        m = Module()
        SW = max(64, 8 * self.beat_in)
        sh = Signal(SW)
        last_flag = Signal()
        packed = Signal()              # the beat in ``sh`` came in a packed record
        with m.If(self.shift):
            m.d.sync += sh.eq(Cat(sh[8:], self.byte))
        with m.If(self.start):
            m.d.sync += self.is_word.eq(self.start_word)
            with m.If(~self.start_word):
                m.d.sync += [last_flag.eq(self.start_last), packed.eq(self.start_packed)]

        m.d.comb += self.cmd.payload.eq(sh[SW - 64:])
        beat_bits = sh[SW - 8 * self.beat_in:]
        byte_lanes = Cat(beat_bits.word_select(k, 8 * self.operand_bytes)
                         for k in range(self.lanes))
        if self.packs:
            # A packed record's bytes are the top ones: lane k is nibble k, sign-extended.
            nibbles = sh[SW - 8 * self.beat_packed:]
            wide = [Signal(signed(8), name=f"nibble_{k}") for k in range(self.lanes)]
            m.d.comb += [w.eq(nibbles.word_select(k, 4).as_signed())
                         for k, w in enumerate(wide)]
            byte_lanes = Mux(packed, Cat(*wide), byte_lanes)
        m.d.comb += [
            self.host_in.payload.data.eq(byte_lanes),
            self.host_in.payload.last.eq(last_flag),
        ]

        offer = self.full & ~self.withdraw
        m.d.comb += [
            self.cmd.valid.eq(offer & self.is_word),
            self.host_in.valid.eq(offer & ~self.is_word),
        ]
        take = Mux(self.is_word, self.cmd.valid & self.cmd.ready,
                   self.host_in.valid & self.host_in.ready)
        m.d.sync += self.taken.eq(take)
        with m.If(take | self.flush):
            m.d.sync += self.full.eq(0)
        with m.If(self.fill):
            m.d.sync += self.full.eq(1)
        with m.If(self.drop):
            m.d.sync += self.full.eq(0)
        return m


class StuckDetector(wiring.Component):
    """Decides when the record offered can never be taken by the core (``NOT_TAKEN``).

    The record offered is given up on when it has waited ``STUCK_CYCLES`` clocks in a state
    in which the core can never take it: a word while the core's host-in engine waits for
    data, a beat while the core is idle. The engine's waiting is seen through the host-in
    stall counter: it grows by at most one per clock, so bit 0 toggling means it grew (the
    engine waited for host-in data in the previous clock).

    Parameter: ``limit``, the clocks (>= 2; default ``STUCK_CYCLES``).

    Ports:
      full, is_word  ``In(1)``: ``RecordStage``'s: a record is held, and its kind.
      taken      ``In(1)``: ``RecordStage.taken`` (a clock in which the record was just taken
                 does not count).
      watch      ``In(1)``: count the engine's waiting clocks (normally ``full & is_word``).
      busy       ``In(1)``: the core's ``status.busy``.
      stall_bit  ``In(1)``: bit 0 of the core's ``status.host_in_stall``.
      stall_run  ``Out(range(STUCK_CYCLES + 1))``: the watched clocks in a row (saturating) in
                 which the engine waited (as seen a clock late), a register.
      at_limit   ``Out(1)``: the record held has waited ``STUCK_CYCLES`` clocks: withdraw it in
                 this clock (from registers and ``is_word`` only: the record's ``valid`` comes
                 from registers through two gates).
      stuck      ``Out(1)``: give up on it (``full & at_limit & ~taken``); the core cannot take
                 it in this clock, as it is withdrawn.
    """

    def __init__(self, limit: int = STUCK_CYCLES):
        self.limit = check_int("limit", limit, 2)
        super().__init__({
            "full": In(1),
            "is_word": In(1),
            "taken": In(1),
            "watch": In(1),
            "busy": In(1),
            "stall_bit": In(1),
            "stall_run": Out(range(limit + 1)),
            "at_limit": Out(1),
            "stuck": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        stall_q = Signal()
        stalled = Signal()
        m.d.sync += stall_q.eq(self.stall_bit)
        m.d.comb += stalled.eq(self.stall_bit ^ stall_q)
        stall_run, stall_lim = saturating_run(
            m, self.watch & stalled & ~self.taken, self.limit, "stall")
        _idle_run, idle_lim = saturating_run(
            m, self.full & ~self.is_word & ~self.busy & ~self.taken, self.limit, "idle")
        m.d.comb += [
            self.stall_run.eq(stall_run),
            self.at_limit.eq(Mux(self.is_word, stall_lim, idle_lim)),
            self.stuck.eq(self.full & self.at_limit & ~self.taken),
        ]
        return m
