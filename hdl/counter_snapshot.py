"""The counter snapshot: the status counters as they were in one cycle, read out 16 bits at a
time (READ_COUNTERS, and the board bridge's reply header)."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import Config, check_config
from tpugen.hdl.isa import COUNTER_CHUNKS, N_COUNTERS

__all__ = ["CounterSnapshot", "counter_chunks_kept"]


def counter_chunks_kept(config: Config) -> int:
    """The 16-bit chunks of a counter that can be non-zero: ``ceil(counter_width / 16)`` (the
    others of its ``COUNTER_CHUNKS`` are zero)."""
    return -(-config.counter_width // 16)


class CounterSnapshot(wiring.Component):
    """Keeps the counters of one cycle and gives them back as a sequence of 16-bit chunks: the
    ``hdl.isa.Counter``s in order, each as ``COUNTER_CHUNKS`` chunks, low first (what
    READ_COUNTERS sends, and the little-endian 64-bit counters of a reply header).

    Ports:
      counters  ``In(64 * N_COUNTERS)``: the live counters (each zero above
                ``counter_width``, as the status port has them).
      hold      ``In(1)``: keep the snapshot. While it is low the snapshot takes ``counters``
                in every cycle (and shows chunk 0 of counter 0), so while it is high it holds
                the counters of the last cycle before it rose.
      next      ``In(1)``: while ``hold``, show the next chunk from the next cycle.
      chunk     ``Out(16)``: the chunk shown: a register, or 0 for the chunks that
                ``counter_width`` leaves zero (then the register does not move).

    Storage: the ``counter_chunks_kept`` chunks of each counter in one shift register that moves
    16 bits per kept chunk shown (a logic cell per bit on a LUT4 FPGA: its multiplexer's select
    and the register's enable come from ``hold`` and ``next`` alone, no load pulse). Users take
    turns: the host-out engine during READ_COUNTERS, the board bridge for a reply header.
    """

    def __init__(self, config: Config):
        check_config(config)
        self.config = config
        super().__init__({
            "counters": In(64 * N_COUNTERS),
            "hold": In(1),
            "next": In(1),
            "chunk": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        kept = counter_chunks_kept(self.config)
        chunks = [self.counters[64 * k + 16 * j:64 * k + 16 * (j + 1)]
                  for k in range(N_COUNTERS) for j in range(kept)]
        sr = Signal(16 * len(chunks))
        pos = Signal(range(COUNTER_CHUNKS))     # the chunk shown, of its counter
        shown = pos < kept
        m.d.comb += self.chunk.eq(Mux(shown, sr[:16], 0))
        with m.If(~self.hold):
            m.d.sync += [sr.eq(Cat(*chunks)), pos.eq(0)]
        with m.Elif(self.next):
            m.d.sync += pos.eq(Mux(pos == COUNTER_CHUNKS - 1, 0, pos + 1))
            with m.If(shown):
                m.d.sync += sr.eq(sr >> 16)
        return m
