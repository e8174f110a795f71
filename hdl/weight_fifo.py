"""The weight FIFO: whole R x C weight tiles queued, one tile row per beat, for the array."""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .array import weight_layout
from .config import Config

__all__ = ["WeightFIFO"]


class WeightFIFO(wiring.Component):
    """A first-in first-out queue of up to ``weight_fifo_depth`` whole weight tiles.

    A tile is R beats, one beat being one tile row (``weight_layout``: C int8 lanes), so the
    queue holds at least ``capacity = weight_fifo_depth * R`` beats: ``storage = max(capacity,
    3)``, since a ``SyncFIFOBuffered`` of fewer than 3 entries moves one beat per 2 cycles.
    Storage is an ``amaranth.lib.fifo.SyncFIFOBuffered`` (a ``lib.memory.Memory`` of
    ``storage - 1`` rows with a synchronous read, which maps to block RAM, plus an output
    register); it knows nothing of tiles, the controller counts them.

    Ports:
      w_in   ``In(stream)`` of ``weight_layout``: beats in. ``w_in.ready`` is high exactly while
             ``level < storage``; it does not depend on ``w_in.valid`` or ``w_out.ready`` (a
             full queue takes no beat even in a cycle in which one leaves).
      w_out  ``Out(stream)`` of ``weight_layout``: beats out in order (to the array's ``weight``
             port). ``w_out.valid`` and the payload come from a register and hold until the
             transfer.
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
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
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
        fifo = m.submodules.fifo = SyncFIFOBuffered(width=self.beat_layout.size,
                                                    depth=self.storage)
        m.d.comb += [
            fifo.w_data.eq(self.w_in.payload.as_value()),
            fifo.w_en.eq(self.w_in.valid),
            self.w_in.ready.eq(fifo.w_rdy),
            self.w_out.payload.eq(fifo.r_data),
            self.w_out.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.w_out.ready),
            self.level.eq(fifo.level),
        ]
        return m
