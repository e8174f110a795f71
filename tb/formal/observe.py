"""White-box observation of a design under proof, through public means only.

k-induction may start from states that no run reaches (a FIFO whose pointers disagree with its
count); it closes once the harness asserts how the design's own registers relate to its model.
Those registers are not ports. Two public means reach them, and the design's code is unchanged:

- **Memories** (``lib.memory.Memory``): the component is elaborated once by its own
  ``elaborate(platform)`` (the ``Elaboratable`` protocol) into the ``Module`` that becomes the
  harness's submodule, so the harness and the design share its signals; its memories are that
  module's named submodules (``module.submodules.<name>``), whose public ports give the
  pointers (``Memory.write_ports`` / ``read_ports``: their ``addr``), and ``peek`` adds a
  combinational read port (``Memory.read_port(domain="comb")``) that shows a row to the proof.
- **Registers**: ``probe(path, width)`` is a harness signal bound, in the netlist, to the
  design's signal at ``path`` (the submodule names and the signal's name, dotted, as in the
  RTLIL Amaranth writes). The runner (``sby.run_sby``) gives the harness's RTLIL the probes as
  inputs; the SBY script flattens the design, connects each probe to its wire (Yosys
  ``connect -set``) and clears the probe's input flag (``delete -input``). A path that names no
  wire, or a width that differs, stops Yosys: the check reports ``ERROR``, never a vacuous
  ``PASS``. Amaranth names a local signal after its variable (``Signal(name=...)`` overrides);
  an FSM's state register is ``fsm_state``, its states numbered from 0 in the order the code
  first names them (``uart_harness`` relies on it, and its proof fails if that changes).

The same netlist step carries ``transform`` (a Yosys pass that keeps the design's behaviour and
eases the solver's work, e.g. ``memory_map``: a small memory as flip-flops, not an SMT array)
and ``mutate`` (a Yosys command run after the probes are bound, e.g. ``connect -set <wire>
1'b0``): a mutated design for a mutant check, without a copy of its code.

A file that builds a component for a harness marks it ``# amaranth: UnusedElaboratable=no``
(Amaranth's documented linter switch): the component object itself is never given to
``Fragment.get``, only the module its ``elaborate`` returned.
"""

from __future__ import annotations

import re

from amaranth.hdl import Elaboratable, Module, Shape, Signal, Value
from amaranth.lib.memory import Memory

from tpugen.tb.formal.stream_check import formal_module

__all__ = ["Harness", "Observed"]

_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*")


class Harness(Elaboratable):
    """A property harness: ``m`` (``formal_module()``: its ``sync`` domain, reset held low), the
    probes bound in the netlist (``probes``: ``(signal, path)``), netlist ``transforms`` and the
    Yosys commands of a mutant (``mutations``). ``run_sby`` takes it like any
    ``Elaboratable``."""

    def __init__(self):
        self.m: Module = formal_module()
        self.probes: list[tuple[Signal, str]] = []
        self.transforms: list[str] = []
        self.mutations: list[str] = []

    def observe(self, component, name: str = "dut", platform=None) -> Observed:
        """Elaborate ``component`` once, as the harness's submodule ``name``."""
        return Observed(self, component, name, platform)

    def transform(self, command: str) -> None:
        """Run the Yosys ``command`` (one that keeps the design's behaviour) on the flattened
        netlist."""
        self.transforms.append(command)

    def mutate(self, command: str) -> None:
        """Run the Yosys ``command`` on the flattened netlist (after the probes are bound): a
        mutant."""
        self.mutations.append(command)

    def yosys_commands(self) -> list[str]:
        """The netlist step of the SBY script (after ``flatten``, in module ``top``)."""
        out = []
        for sig, path in self.probes:
            out += [f"connect -set {sig.name} {path}", f"delete -input w:{sig.name}"]
        return out + list(self.transforms) + list(self.mutations)

    def elaborate(self, platform):
        return self.m


class Observed:
    """``component`` elaborated once (``module``), the submodule ``name`` of ``harness``."""

    def __init__(self, harness: Harness, component, name: str = "dut", platform=None):
        self.harness = harness
        self.component = component
        self.name = name
        self.module = component.elaborate(platform)
        harness.m.submodules[name] = self.module

    def memory(self, name: str = "mem") -> Memory:
        """The ``lib.memory.Memory`` that the component's module names ``name``."""
        try:
            mem = self.module.submodules[name]
        except AttributeError:
            raise KeyError(f"{type(self.component).__name__} has no submodule {name!r}") from None
        if not isinstance(mem, Memory):
            raise KeyError(f"submodule {name!r} is a {type(mem).__name__}, not a Memory")
        return mem

    def write_addr(self, memory: str = "mem", port: int = 0) -> Value:
        """The address of write port ``port`` of the memory (its write pointer, in a ring)."""
        return self.memory(memory).write_ports[port].addr

    def read_addr(self, memory: str = "mem", port: int = 0) -> Value:
        """The address of read port ``port`` of the memory."""
        return self.memory(memory).read_ports[port].addr

    def peek(self, addr, memory: str = "mem") -> Value:
        """The row at ``addr`` of the memory, read combinationally by a port added for the
        proof (the raw bits of the row)."""
        port = self.memory(memory).read_port(domain="comb")
        self.harness.m.d.comb += port.addr.eq(addr)
        return Value.cast(port.data)

    def probe(self, path: str, shape, *, name: str | None = None) -> Signal:
        """A signal of ``shape`` bound to the design's signal ``path`` (dotted, below this
        component: ``"held"``, ``"sync_rx.stage0"``) in the netlist."""
        if not _PATH.fullmatch(path):
            raise ValueError(f"path must be dotted identifiers, not {path!r}")
        full = f"{self.name}.{path}"
        sig = Signal(Shape.cast(shape), name=name or "probe__" + full.replace(".", "__"))
        if any(s.name == sig.name for s, _ in self.harness.probes):
            raise ValueError(f"{full!r} is probed twice")
        self.harness.probes.append((sig, full))
        return sig
