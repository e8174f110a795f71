"""Verilog of one component, with its signature's members as ports."""

from amaranth.back import verilog
from amaranth.hdl import Signal, Value
from amaranth.lib import wiring

__all__ = ["to_verilog"]


def to_verilog(component: wiring.Component, name: str, *, platform=None) -> str:
    """Convert ``component`` to Verilog with module name ``name`` (elaborated for
    ``platform``: ``None`` for simulators).

    Ports are the signature's members, named by their path joined with ``__``
    (``act__payload``; the names ``wiring.Component`` gives its members' signals); constant
    members (``always_ready`` / ``always_valid`` streams) are not ports, since a constant has
    nothing to connect. Directions follow from the design (what it drives is an output).
    """
    ports = []
    for path, _member, value in component.signature.flatten(component):
        value = Value.cast(value)
        if not isinstance(value, Signal):
            continue
        expected = "__".join(map(str, path))
        if value.name != expected:
            raise ValueError(f"port {expected!r} is a signal named {value.name!r}: the member "
                             f"signals of {component!r} must keep their signature's names")
        ports.append(value)
    return verilog.convert(component, name=name, ports=ports, platform=platform)
