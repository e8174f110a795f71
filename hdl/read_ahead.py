"""The read-one-ahead stage shared by the engines that stream memory rows to a consumer."""

from amaranth.hdl import Shape, Signal

__all__ = ["ReadAhead"]


class ReadAhead:
    """Issues synchronous memory reads one row ahead of a valid/ready consumer.

    ``read`` (combinational): read row ``issued`` (relative to the job's start) this cycle:
    while ``active``, rows remain (``issued < count``), and the staged row is absent or being
    taken this cycle (``go``). ``staged``: a row read earlier is on the memory's data port (a
    read port's data holds while it does not read), so the consumer's ``valid`` is ``staged``.
    Rows reach the consumer one per cycle while it takes them. ``restart()`` gives the
    statements that begin a new job; put them after this stage's own (the last one wins).
    ``issued`` has the width of ``count``.
    """

    def __init__(self, m, *, active, count, go):
        self.issued = Signal(Shape.cast(count.shape()).width)
        self.staged = Signal()
        self.read = Signal()
        m.d.comb += self.read.eq(active & (self.issued < count) & (~self.staged | go))
        with m.If(self.read):
            m.d.sync += [self.issued.eq(self.issued + 1), self.staged.eq(1)]
        with m.Elif(go):
            m.d.sync += self.staged.eq(0)

    def restart(self):
        return [self.issued.eq(0), self.staged.eq(0)]
