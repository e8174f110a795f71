"""One generator, two elaborations: place a sub-component flat or as a named Verilog instance."""

from amaranth.hdl import ClockSignal, Instance, ResetSignal
from amaranth.lib import wiring

__all__ = ["place"]


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
