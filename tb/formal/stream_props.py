# amaranth: UnusedElaboratable=no
"""The ``lib.stream`` rules on every stream port of a component, under free inputs.

``ports_harness(component)`` walks the component's signature (nested interfaces too, e.g. the
bridge's ``core`` bus) and attaches ``stream_check``'s checker to each stream port: an output
stream (the component is its source) gets a free ``ready`` (``free_sink``) and the rules
asserted (``stream_rules``: ``valid`` held high and the payload unchanged from a cycle with
``valid`` and not ``ready`` to the transfer); an input stream is driven by the solver within
the rules (``free_source``); every other input port takes any value in any cycle
(``AnySeq``). Nothing else is assumed: any command words, bytes, line levels, status values.
k-induction (``prove``) then shows the rules for every input sequence, unbounded, when it
closes; ``bmc`` checks them to a depth.

``STREAM_PORTS`` lists the components so checked (the core's and the link's): each builds its
component at a small size. ``covers=True`` adds, for each output stream, a cover of a beat that
waited (``valid`` without ``ready``) and then went, so a proof is not about a port that never
waits. ``glitch=<port>``: the mutant: the checker sees that port's ``valid`` dropped in one
cycle (``AnyConst`` picks it) while a beat waits, as a source that withdraws a beat would; it
must fail.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Cover, Signal, Value
from amaranth.lib import stream, wiring

from tpugen.fpga.gateware.bridge import Bridge
from tpugen.fpga.gateware.bridge_reply import ReplyBuilder
from tpugen.fpga.gateware.bridge_stage import RecordStage
from tpugen.fpga.gateware.framing import FrameReceiver, FrameTransmitter
from tpugen.fpga.gateware.link_endpoint import LinkEndpoint
from tpugen.fpga.gateware.uart import UARTReceiver
from tpugen.fpga.protocol import FrameType
from tpugen.hdl.activation import ActivationUnit
from tpugen.hdl.command_source import CommandSource
from tpugen.hdl.config import Config
from tpugen.hdl.controller import Controller
from tpugen.hdl.core import Core
from tpugen.tb.formal.observe import Harness
from tpugen.tb.formal.stream_check import free_sink, free_source, stream_rules, transfer

__all__ = ["stream_ports", "ports_harness", "STREAM_PORTS"]


def stream_ports(component):
    """The stream ports of ``component`` and its other input ports: ``(outputs, inputs,
    others)``, each a list of ``(path, interface)`` (``others``: ``(path, signal)``), paths
    dotted (``core.cmd``)."""
    outputs, inputs, others = [], [], []

    def walk(signature, obj, prefix):
        for name, member in signature.members.items():
            value = getattr(obj, name)
            path = f"{prefix}{name}"
            if member.is_signature:
                if isinstance(member.signature, stream.Signature):
                    (outputs if member.flow is wiring.Out else inputs).append((path, value))
                else:
                    walk(member.signature, value, path + ".")
            elif member.flow is wiring.In:
                others.append((path, value))

    walk(component.signature, component, "")
    return outputs, inputs, others


def ports_harness(component, *, covers=False, glitch: str | None = None,
                  over=None, inner=None):
    """The harness of the module docstring for ``component`` (a ``wiring.Component``);
    ``over``: ``{output path: function(component) -> value}``, the documented exceptions
    (``stream_check.stream_rules``'s ``over``); ``inner``: a function of the component's
    elaborated module giving ``[(path, stream interface)]`` inside it (a submodule's output
    stream, e.g. ``ctrl.q_in``), checked as well (its ``ready`` is the design's own);
    ``covers``: ``True`` (every output stream) or the paths to cover."""
    if not isinstance(component, wiring.Component):
        raise TypeError(f"component must be a wiring.Component, not {component!r}")
    outputs, inputs, others = stream_ports(component)
    names = [p for p, _ in outputs]
    if not outputs:
        raise ValueError(f"{type(component).__name__} has no output stream to check")
    h = Harness()
    m = h.m
    dut = h.observe(component)
    inside = [] if inner is None else inner(dut.module)
    names += [p for p, _ in inside]
    if glitch is not None and glitch not in names:
        raise ValueError(f"glitch must be one of the output streams {names}, not {glitch!r}")
    for path, port in inputs:
        free_source(m, port, path.replace(".", "_"))
    for _path, sig in others:
        m.d.comb += Value.cast(sig).eq(AnySeq(len(Value.cast(sig))))
    for path, port in outputs + inside:
        name = path.replace(".", "_")
        if isinstance(port.ready, Signal) and (path, port) in outputs:
            free_sink(m, port)      # (an ``always_ready`` one's is a constant)
        seen = port
        if path == glitch:
            waited = Signal(name=f"{name}_was_waiting")
            m.d.sync += waited.eq(port.valid & ~port.ready)
            when = AnyConst(8)
            cycle = Signal(8, name="glitch_cycle")
            m.d.sync += cycle.eq(cycle + (cycle != 255))
            seen = SimpleNamespace(valid=port.valid & ~((cycle == when) & waited),
                                   ready=port.ready, payload=port.payload)
        ends = None if path not in (over or {}) else over[path](component)
        stream_rules(m, seen, name, over=ends)
        if (covers is True or path in (covers or ())) and isinstance(port.ready, Signal):
            waited = Signal(name=f"{name}_cover_waited")
            m.d.sync += waited.eq(waited | (port.valid & ~port.ready))
            m.d.comb += Cover(waited & transfer(port))
    return h


def _small_config(act_lanes: int = 0, program_words: int = 0):
    return Config(rows=2, cols=2, operand="int4", acc_width=16, weight_fifo_depth=1,
                  ub_rows=4, acc_rows=4, quant_sets=1, counter_width=32, act_lanes=act_lanes,
                  program_words=program_words)


def _component(kind: str):
    """The component ``kind`` of ``STREAM_PORTS``, small."""
    cfg = _small_config()
    build = {
        # (one activation lane a chunk: two chunks a row, so ``q_in`` and ``quant_w`` wait)
        "core": lambda: Core(_small_config(act_lanes=1)),
        "controller": lambda: Controller(cfg),
        "command_source": lambda: CommandSource(_small_config(program_words=4)),
        "activation": lambda: ActivationUnit(cfg),
        "uart_rx": lambda: UARTReceiver(4_000_000, 1_000_000),
        "frame_rx": lambda: FrameReceiver(1, 12, [FrameType.PING]),
        "frame_tx": lambda: FrameTransmitter(4),
        "link": lambda: LinkEndpoint(4_000_000, 1_000_000, max_payload=4),
        "bridge": lambda: Bridge(cfg),
        "bridge_stage": lambda: RecordStage(cfg),
        "bridge_reply": lambda: ReplyBuilder(cfg, 16, 16),
    }
    if kind not in build:
        raise ValueError(f"kind must be one of {tuple(build)}, not {kind!r}")
    return build[kind]()


#: The components whose stream ports are checked: name -> their module.
STREAM_PORTS = {
    "core": "hdl/core.py",
    "controller": "hdl/controller.py",
    "command_source": "hdl/command_source.py",
    "activation": "hdl/activation.py",
    "uart_rx": "fpga/gateware/uart.py",
    "frame_rx": "fpga/gateware/framing.py",
    "frame_tx": "fpga/gateware/framing.py",
    "link": "fpga/gateware/link_endpoint.py",
    "bridge": "fpga/gateware/bridge.py",
    "bridge_stage": "fpga/gateware/bridge_stage.py",
    "bridge_reply": "fpga/gateware/bridge_reply.py",
}


def _reply_over(link):
    """The link's exception (``LinkEndpoint``): the request is over at the reply's ``last``
    transfer; request beats not yet taken are dropped."""
    return transfer(link.rsp) & link.rsp.payload.last


def _core_inner(module):
    """The core's inner streams: the command source's, the controller's, the weight FIFO's and
    the activation unit's outputs (between the real memories, array and units)."""
    sub = module.submodules
    ctrl = sub.ctrl
    return [("cmds.o", sub.cmds.o), *((f"ctrl.{n}", getattr(ctrl, n))
                                        for n in ("act", "w_out", "q_in", "quant_w")),
            ("fifo.w_out", sub.fifo.w_out), ("act.o", sub.act.o)]


#: The documented exceptions to the rules, and the inner streams, by component.
_OVER = {"link": {"req": _reply_over}}
_INNER = {"core": _core_inner}


def _cut_link_uart(h: Harness) -> None:
    """The link's frame receiver fed by the solver instead of its UART receiver: any byte, in
    any cycle, and any line error (Yosys ``cutpoint`` on the ``frx`` inputs: their drivers
    replaced by ``$anyseq``). The UART delivers a subset of these sequences (a byte per ten
    bit-times at most), so the rules hold for it too; and a request comes out in tens of
    cycles instead of hundreds."""
    for wire in ("i__valid", "data", "line_error"):
        h.transform(f"cutpoint w:dut.frx.{wire}")


def component_harness(kind: str, **kw):
    """``ports_harness`` of the component ``kind`` of ``STREAM_PORTS``."""
    h = ports_harness(_component(kind), over=_OVER.get(kind), inner=_INNER.get(kind), **kw)
    if kind == "link":
        _cut_link_uart(h)
    return h
