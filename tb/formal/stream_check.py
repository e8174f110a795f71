"""The ``lib.stream`` rules as properties, and free stream ends, for property harnesses.

The rules (``tpugen.sim.stream_rules`` states them for the simulators): a transfer is a cycle
with ``valid`` and ``ready`` high; once a source raises ``valid`` it keeps ``valid`` high and
the payload unchanged until that transfer; ``ready`` may change in any cycle.

``stream_rules(m, port, check=Assert)`` attaches the checker to any stream port (asserted for a
design's output, ``Assume`` for what drives a design's input); ``free_source`` drives a design's
input stream from the solver within the rules, ``free_sink`` a ready from the solver. Also
``formal_module()``: a harness's ``Module`` with its ``sync`` domain and a reset held low.
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, ClockDomain, Module, Signal, Value

__all__ = ["formal_module", "stream_rules", "free_source", "free_sink", "transfer"]


def formal_module() -> Module:
    """A harness's module: the ``sync`` domain (SBY steps every flip-flop once a cycle) with its
    reset held low, so registers start from their ``init`` values and never reset."""
    m = Module()
    m.domains.sync = cd = ClockDomain("sync")
    m.d.comb += cd.rst.eq(0)
    return m


def transfer(port) -> Value:
    """``valid & ready`` of a stream port (``valid`` for an ``always_ready`` one)."""
    ready = getattr(port, "ready", None)
    return port.valid & ready if ready is not None else port.valid


def stream_rules(m: Module, port, name: str, check=Assert, *, over=None) -> None:
    """``check`` (``Assert`` or ``Assume``) that ``port`` keeps ``valid`` high and its payload
    unchanged from a cycle with ``valid`` high and ``ready`` low to the transfer. An
    ``always_ready`` port (no ``ready``) has nothing to check. ``over`` (a value): a cycle in
    which it is high ends the stream's obligation (a documented exception, e.g. a request the
    far side has finished with): its waiting beat may be withdrawn from the next cycle."""
    if getattr(port, "ready", None) is None:
        return
    payload = Value.cast(port.payload)
    waiting = Signal(name=f"{name}_waiting")        # last cycle: valid and not ready
    held = Signal(len(payload), name=f"{name}_held")
    ends = 0 if over is None else over
    m.d.sync += [waiting.eq(port.valid & ~port.ready & ~ends), held.eq(payload)]
    with m.If(waiting):
        m.d.comb += [
            check(port.valid, f"{name}: valid fell before the transfer"),
            check(payload == held, f"{name}: the payload changed before the transfer"),
        ]


def free_source(m: Module, port, name: str, *, valid=None) -> None:
    """Drive ``port`` (a design's input stream) from the solver: any ``valid`` and payload in
    each cycle, assumed to keep the stream rules. ``valid`` (a value) replaces the free one."""
    payload = Value.cast(port.payload)
    m.d.comb += [
        port.valid.eq(AnySeq(1) if valid is None else valid),
        payload.eq(AnySeq(len(payload))),
    ]
    stream_rules(m, port, name, check=Assume)


def free_sink(m: Module, port) -> None:
    """Drive ``port.ready`` (a design's output stream) from the solver, any value each cycle."""
    m.d.comb += port.ready.eq(AnySeq(1))
