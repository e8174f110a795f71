"""Verilog of one component, with its signature's members as ports."""

from amaranth.back import verilog
from amaranth.hdl import Signal, ValueCastable
from amaranth.hdl._ir import PortDirection
from amaranth.lib import wiring

__all__ = ["to_verilog"]


def to_verilog(component: wiring.Component, name: str, *, platform=None) -> str:
    """Convert ``component`` to Verilog with module name ``name`` (elaborated for
    ``platform``: ``None`` for simulators).

    Ports are the signature's members, named by their path joined with ``__``
    (``act__payload``); constant members (``always_ready`` / ``always_valid`` streams) are
    not ports, since a constant has nothing to connect.
    """
    ports = {}
    for path, member, value in component.signature.flatten(component):
        if isinstance(value, ValueCastable):
            value = value.as_value()
        if not isinstance(value, Signal):
            continue
        direction = PortDirection.Input if member.flow == wiring.In else PortDirection.Output
        ports["__".join(map(str, path))] = (value, direction)
    return verilog.convert(component, name=name, ports=ports, platform=platform)
