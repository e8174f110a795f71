"""One generator, two elaborations: place a sub-component flat or as a named Verilog instance."""

from amaranth.hdl import ClockSignal, Instance, ResetSignal, Signal, Value
from amaranth.lib import wiring

__all__ = ["place", "place_component"]


def place(m, name, make, connections, *, module_name=None, signature=None):
    """Add a sub-component to module ``m`` under ``name`` and wire its ports.

    ``connections`` maps each port name of the sub-component's signature to a signal or value
    of the parent (inputs) or to a parent signal to drive (outputs).

    Flat (``module_name is None``): ``make()`` builds the component, which is elaborated as a
    submodule; this is what the Amaranth simulator needs (it treats an ``Instance`` as a black
    box). Hierarchical: an ``Instance`` of the Verilog module ``module_name`` (generated once,
    elsewhere) with ports named after ``signature``'s members, plus ``clk`` and ``rst``.
    """
    if module_name is None:
        comp = make()
        m.submodules[name] = comp
        members = comp.signature.members
        for port, value in connections.items():
            if members[port].flow == wiring.In:
                m.d.comb += getattr(comp, port).eq(value)
            else:
                m.d.comb += value.eq(getattr(comp, port))
        return comp
    members = signature.members
    kwargs = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
    for port, value in connections.items():
        prefix = "i" if members[port].flow == wiring.In else "o"
        kwargs[f"{prefix}_{port}"] = value
    m.submodules[name] = Instance(module_name, **kwargs)
    return None


def place_component(m, name, make, *, module_name=None, signature=None):
    """Like ``place``, for a component with nested (stream) members; returns its interface.

    Flat: ``make()`` as a submodule, returned. Hierarchical: an interface created from
    ``signature`` (connect to it as to the component) and an ``Instance`` of ``module_name``
    whose ports are the flattened member paths joined with ``__`` (``act__valid``), as
    ``hdl.convert.to_verilog`` names them; constant members are not ports.
    """
    if module_name is None:
        comp = make()
        m.submodules[name] = comp
        return comp
    iface = signature.create(path=(name,))
    kwargs = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
    for path, member, value in signature.flatten(iface):
        value = Value.cast(value)
        if not isinstance(value, Signal):
            continue
        prefix = "i" if member.flow == wiring.In else "o"
        kwargs[f"{prefix}_{'__'.join(map(str, path))}"] = value
    m.submodules[name] = Instance(module_name, **kwargs)
    return iface
