"""White-box access to an elaborated component, for the invariants a k-induction proof needs.

A component's registers that its ports do not show (a FIFO's pointers, a cell's held weights)
leave states that no bounded run reaches but that k-induction may start from; the proof closes
once the harness asserts how those registers relate to its model. The generator's code stays as
it is: ``Whitebox(component)`` elaborates it once into a ``Fragment`` (used as the harness's
submodule in place of the component, so the harness and the design share the same signals),
``signal(name)`` finds one of its signals by name (its path of submodules, dotted, picks among
several), and ``peek(memory, addr)`` adds a combinational read port to one of its memories:
the row's contents, to the proof only.

It reads Amaranth 0.5's elaborated netlist (``Fragment.statements``, ``MemoryInstance`` and its
ports), which the project pins (``amaranth<0.6``); ``tests/test_formal.py`` checks it.
"""

from __future__ import annotations

from amaranth.hdl import Const, Fragment, MemoryInstance, Shape, Signal

__all__ = ["Whitebox"]


class Whitebox:
    """``component`` elaborated (``fragment``, a harness's submodule) and its insides."""

    def __init__(self, component, platform=None):
        self.component = component
        self.fragment = Fragment.get(component, platform)
        self._signals: dict[str, list[tuple[str, Signal]]] = {}
        self._memories: dict[str, MemoryInstance] = {}
        self._walk(self.fragment, "")

    def _walk(self, fragment, path):
        if isinstance(fragment, MemoryInstance):
            self._memories[path] = fragment
        for stmts in fragment.statements.values():
            for stmt in stmts:
                for sig in stmt._lhs_signals():
                    self._add(path, sig)
                for sig in stmt._rhs_signals():
                    self._add(path, sig)
        for sub, name, _ in fragment.subfragments:
            self._walk(sub, f"{path}.{name}" if path else str(name))

    def _add(self, path, sig):
        found = self._signals.setdefault(sig.name, [])
        if all(s is not sig for _, s in found):
            found.append((path, sig))

    def signal(self, name: str, where: str | None = None) -> Signal:
        """The signal named ``name``; ``where`` (a dotted submodule path, or its end) chooses
        among signals of that name in several submodules. Raises ``KeyError`` when there is
        none or more than one."""
        found = self._signals.get(name, [])
        if where is not None:
            found = [(p, s) for p, s in found if p == where or p.endswith("." + where)]
        if len(found) != 1:
            paths = [p or "(top)" for p, _ in self._signals.get(name, [])]
            raise KeyError(f"{len(found)} signals named {name!r}"
                           f"{'' if where is None else f' in {where!r}'} (found in {paths})")
        return found[0][1]

    def state(self, fsm_signal: str, name: str, where: str | None = None) -> int:
        """The encoding of state ``name`` of the FSM whose state signal is ``fsm_signal``
        (Amaranth's ``fsm_state``; its decoder names the states)."""
        sig = self.signal(fsm_signal, where)
        for value in range(1 << len(sig)):
            if sig.decoder(value).split("/")[0] == name:
                return value
        raise KeyError(f"{fsm_signal} has no state {name!r}")

    def memory(self, where: str = "mem") -> MemoryInstance:
        """The memory at submodule path ``where`` (or ending in it)."""
        found = [m for p, m in self._memories.items() if p == where or p.endswith("." + where)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} memories at {where!r} (have {list(self._memories)})")
        return found[0]

    def write_addr(self, where: str = "mem", port: int = 0):
        """The address of write port ``port`` of the memory at ``where`` (a register's name may
        be lost to Amaranth's tracer, ``a, b = Signal(), Signal()``; the port's is not)."""
        return self.memory(where)._write_ports[port]._addr

    def peek(self, addr, where: str = "mem", name: str = "peek") -> Signal:
        """The row at ``addr`` (a value, ``ceil_log2(depth)`` bits) of the memory at ``where``,
        read combinationally: a read port added for the proof (raw bits of the row)."""
        mem = self.memory(where)
        data = Signal(Shape.cast(mem._data.shape).width, name=name)
        mem.read_port(domain="comb", addr=addr, data=data, en=Const(1), transparent_for=())
        return data
