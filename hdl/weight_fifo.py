"""The weight FIFO: whole R x C weight tiles queued, one tile row per beat, for the array."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tpugen.hdl.array import weight_layout
from tpugen.hdl.config import Config, check_config

__all__ = ["WeightFIFO"]


class WeightFIFO(wiring.Component):
    """A first-in first-out queue of up to ``weight_fifo_depth`` whole weight tiles.

    A tile is R beats, one beat being one tile row (``weight_layout``: C operand lanes), so the
    queue holds at least ``capacity = weight_fifo_depth * R`` beats: ``storage = max(capacity,
    3)``. Storage is a ring of ``storage - 1`` rows in a ``lib.memory.Memory`` (block RAM) and
    two beats out of it: the synchronous read port's data register and a holding register; it
    knows nothing of tiles, the controller counts them. The oldest beat is offered: the holding
    register's when it holds one, else the read port's. The ring is read whenever it holds a
    row and the holding register is empty (registers only: the consumer's ``ready`` does not
    reach the block RAM's enable, a path across the die on an FPGA); a beat on the port that is
    not taken then moves into the holding register. So a beat offered and not taken stays
    offered, and beats leave one per cycle. A row is never read in the cycle it is written
    (``no_rw_check``: no collision logic): a read takes the oldest row, a write the next free
    one, and the two are the same row only when the ring is full, when nothing is written
    (``w_in.ready`` is low then: the ring is only full with a beat on the read port).

    Ports:
      w_in   ``In(stream)`` of ``weight_layout``: beats in. ``w_in.ready`` is high exactly while
             ``level < storage``; it does not depend on ``w_in.valid`` or ``w_out.ready`` (a
             full queue takes no beat even in a cycle in which one leaves).
      w_out  ``Out(stream)`` of ``weight_layout``: beats out in order (to the array's ``weight``
             port). ``w_out.valid`` and the payload come from registers (the payload from the
             block RAM's own read register) and hold until the transfer.
      level  ``Out(range(storage + 1))``: beats held (accepted, not yet sent), including the
             one on ``w_out``.

    Timing:
      latency     2 cycles from a beat's ``w_in`` transfer into an empty queue to its
                  ``w_out.valid``.
      throughput  one beat per cycle in and out at the same time.
      level       counts a beat from the cycle after its ``w_in`` transfer until the cycle
                  after its ``w_out`` transfer.
    """

    def __init__(self, config: Config):
        check_config(config)
        self.config = config
        self.capacity = config.weight_fifo_depth * config.rows
        self.storage = max(self.capacity, 3)
        beat = weight_layout(config)
        super().__init__({
            "w_in": In(stream.Signature(beat)),
            "w_out": Out(stream.Signature(beat)),
            "level": Out(range(self.storage + 1)),
        })

    @property
    def beat_layout(self) -> data.ArrayLayout:
        return weight_layout(self.config)

    def elaborate(self, platform):
        m = Module()
        rows = self.storage - 1
        m.submodules.mem = mem = Memory(shape=self.beat_layout, depth=rows, init=[],
                                        attrs={"no_rw_check": 1})
        wp = mem.write_port()
        rp = mem.read_port()
        w_ptr, r_ptr = Signal(range(rows)), Signal(range(rows))
        held = Signal(range(rows + 1))        # rows in the ring (not yet read)
        on_port = Signal()                    # a beat is on the read port's data register
        kept = Signal()                       # a beat is in the holding register (the older)
        hold = Signal(self.beat_layout)
        port_data = Signal(self.beat_layout)   # the read port's data (named for the proofs)
        room = Signal(init=1)                 # level < storage (a register)
        take = self.w_in.valid & self.w_in.ready
        give = self.w_out.valid & self.w_out.ready
        read = (held != 0) & ~kept
        m.d.comb += [
            self.w_in.ready.eq(room),
            wp.addr.eq(w_ptr), wp.data.eq(self.w_in.payload), wp.en.eq(take),
            rp.addr.eq(r_ptr), rp.en.eq(read), port_data.eq(rp.data),
            self.w_out.valid.eq(kept | on_port),
            self.w_out.payload.eq(Mux(kept, hold, port_data)),
        ]
        with m.If(take):
            m.d.sync += w_ptr.eq(Mux(w_ptr == rows - 1, 0, w_ptr + 1))
        with m.If(read):
            m.d.sync += [r_ptr.eq(Mux(r_ptr == rows - 1, 0, r_ptr + 1)), on_port.eq(1)]
            with m.If(on_port & ~give):      # the port's beat is about to be overwritten
                m.d.sync += [hold.eq(port_data), kept.eq(1)]
        with m.Elif(kept):
            with m.If(give):                 # the held beat leaves; the port's is next
                m.d.sync += kept.eq(0)
        with m.Elif(give):
            m.d.sync += on_port.eq(0)
        m.d.sync += [
            held.eq(held + take - read),
            self.level.eq(self.level + take - give),
        ]
        with m.If(take & ~give):
            m.d.sync += room.eq(self.level < self.storage - 1)
        with m.Elif(give & ~take):
            m.d.sync += room.eq(1)
        return m
