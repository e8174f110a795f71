"""The read-ahead stage shared by the engines that stream memory rows to a consumer."""

from amaranth.hdl import Shape, Signal

__all__ = ["ReadAhead"]


class ReadAhead:
    """Issues synchronous memory reads ahead of a valid/ready consumer, one row per cycle.

    ``read`` (combinational): read row ``issued`` (relative to the job's start) this cycle.
    ``go``: the consumer takes the row it is offered this cycle. ``staged``: a row is offered
    (the consumer's ``valid``). ``issued`` has the width of ``count``. ``restart()`` gives the
    statements that begin a new job; put them after this stage's own (the last one wins).

    ``latency=1``: the row offered is on the memory's read data port (a read port's data holds
    while it does not read). A row is read while ``active``, rows remain (``issued < count``)
    and the staged row is absent or being taken; the first row is offered the cycle after the
    first ``read``.

    ``latency=2``: the row is read into the memory's data port, then into a register the
    caller keeps (``load``: take the port's row, or what the caller makes of it, into that
    register this cycle), which is what the consumer is offered. So a block RAM's read data
    goes only into a register, never through logic. ``fetched``: a row waits on the port. A row
    is read while ``active``, rows remain and the port's row is absent or being loaded; the
    first row is offered two cycles after the first ``read``. Both latencies move one row per
    cycle while the consumer takes them.
    """

    def __init__(self, m, *, active, count, go, latency=1):
        if latency not in (1, 2):
            raise ValueError(f"latency must be 1 or 2, not {latency!r}")
        self.latency = latency
        self.issued = Signal(Shape.cast(count.shape()).width)
        self.staged = Signal()
        self.read = Signal()
        more = active & (self.issued < count)
        if latency == 1:
            m.d.comb += self.read.eq(more & (~self.staged | go))
            with m.If(self.read):
                m.d.sync += [self.issued.eq(self.issued + 1), self.staged.eq(1)]
            with m.Elif(go):
                m.d.sync += self.staged.eq(0)
            self.fetched = self.load = None
            return
        self.fetched = Signal()
        self.load = Signal()
        m.d.comb += [
            self.load.eq(self.fetched & (~self.staged | go)),
            self.read.eq(more & (~self.fetched | self.load)),
        ]
        with m.If(self.read):
            m.d.sync += [self.issued.eq(self.issued + 1), self.fetched.eq(1)]
        with m.Elif(self.load):
            m.d.sync += self.fetched.eq(0)
        with m.If(self.load):
            m.d.sync += self.staged.eq(1)
        with m.Elif(go):
            m.d.sync += self.staged.eq(0)

    def restart(self):
        out = [self.issued.eq(0), self.staged.eq(0)]
        if self.fetched is not None:
            out.append(self.fetched.eq(0))
        return out
