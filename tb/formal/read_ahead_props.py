"""The read-ahead stage (``hdl.read_ahead.ReadAhead``): a one- or two-entry queue of rows
read ahead of a valid/ready consumer (the matmul, activate and host-out engines' reads).

The harness gives it a job: ``count`` (``AnyConst``, 0 .. ``2**width - 1``) rows, ``active``
from the first cycle on; the memory is a model whose row ``k`` holds ``k`` (a synchronous
read port: the data of the last read, held while there is none) and, at ``latency=2``, the
caller's register that ``load`` fills from the port. The consumer takes the row offered
(``go = staged & ready``, ``ready`` from the solver in any cycle). It asserts, for every
``count`` and every pattern of ``ready``:

- **order, no loss or duplicate**: the ``j``-th row taken is row ``j``;
- **count**: no more than ``count`` rows taken; ``issued`` (rows read) never exceeds ``count``,
  and rows read = rows taken + rows in the stage (``staged``, plus ``fetched`` at latency 2),
  so a row read is never lost nor read twice (no overflow; no underflow: the consumer is
  offered a row only when one was read);
- **progress**: an empty stage with rows left reads one at once.

Mutants: ``skip`` (a wrapper: the consumer sees the row after the one offered) and
``short`` (wrong expected count: one row fewer).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Cover, Signal

from tpugen.hdl.read_ahead import ReadAhead
from tpugen.tb.formal.stream_check import formal_module

__all__ = ["READ_AHEAD_MUTANTS", "read_ahead_harness"]

READ_AHEAD_MUTANTS = ("skip", "short")


def read_ahead_harness(latency: int = 1, width: int = 3, *, mutant: str | None = None,
                       covers: bool = False):
    """The harness of the module docstring; ``width``: bits of ``count``."""
    if latency not in (1, 2):
        raise ValueError(f"latency must be 1 or 2, not {latency!r}")
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be an int >= 1, not {width!r}")
    if mutant is not None and mutant not in READ_AHEAD_MUTANTS:
        raise ValueError(f"mutant must be one of {READ_AHEAD_MUTANTS}, not {mutant!r}")
    m = formal_module()
    count = AnyConst(width)
    ready = AnySeq(1)
    go = Signal()
    ra = ReadAhead(m, active=1, count=count, go=go, latency=latency)
    m.d.comb += go.eq(ra.staged & ready)
    port = Signal(width)                    # the read port's data: row ``issued`` of the read
    with m.If(ra.read):
        m.d.sync += port.eq(ra.issued)
    offered = port
    held = 0
    if latency == 2:
        offered = Signal(width)
        with m.If(ra.load):
            m.d.sync += offered.eq(port)
        held = ra.fetched
    seen = offered + 1 if mutant == "skip" else offered
    taken = Signal(width + 1)
    m.d.sync += taken.eq(taken + go)
    limit = count - 1 if mutant == "short" else count
    with m.If(go):
        m.d.comb += Assert(seen == taken[:width], "the row taken is not the next in order")
    # (The same as invariants, for k-induction: the row staged is the next to take, the one
    # fetched at latency 2 the one after it.)
    with m.If(ra.staged):
        m.d.comb += Assert(offered == taken[:width], "the row staged is not the next")
    if latency == 2:
        with m.If(ra.fetched):
            m.d.comb += Assert(port == (taken + ra.staged)[:width], "the row fetched is wrong")
    m.d.comb += [
        Assert(taken <= limit, "more rows taken than the job has"),
        Assert(ra.issued <= count, "more rows read than the job has"),
        Assert(ra.issued == taken + ra.staged + held, "a row read was lost or read twice"),
    ]
    # Progress: an empty stage with rows left reads one in this cycle.
    empty = ~ra.staged if latency == 1 else ~ra.staged & ~ra.fetched
    with m.If(empty & (ra.issued < count)):
        m.d.comb += Assert(ra.read, "the stage stalls with rows left")
    if covers:
        full = ra.staged & ra.fetched if latency == 2 else ra.staged
        m.d.comb += [Cover((taken == count) & (count == 2 ** width - 1)),
                     Cover(full & ~ready & (taken != 0))]
    return m
