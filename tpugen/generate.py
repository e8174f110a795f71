"""Writing generated Verilog with its configuration and a port description."""

from pathlib import Path

from amaranth.hdl import Signal, Value
from amaranth.lib import wiring

from tpugen.hdl.array import array_latency, array_signature
from tpugen.hdl.config import Config
from tpugen.hdl.core import core_signature
from tpugen.hdl.layouts import host_lanes
from tpugen.hdl.verilog import array_verilog, core_verilog, module_names

__all__ = ["write_verilog", "port_description"]


def _flat_ports(signature: wiring.Signature):
    """(name, flow, width) of each port of a component with ``signature``: the members' paths
    joined with ``__``, constant members (``always_ready``) left out, as in the Verilog."""
    for path, member, value in signature.flatten(signature.create()):
        value = Value.cast(value)
        if isinstance(value, Signal):
            yield "__".join(map(str, path)), member.flow, len(value)


def port_description(config: Config) -> str:
    """A Markdown description of the array top's ports and timing."""
    names = module_names()
    r, c, ow, aw = config.rows, config.cols, config.operand_width, config.acc_width
    notes = {
        "act__payload": f"bits [{ow}*i +: {ow}] = lane i (row i), i = 0..{r - 1}, signed; "
                        f"bit {r * ow} = first (first vector of a tile)",
        "act__valid": "activation vector offered",
        "act__ready": "low only while a `first` vector waits for its weight tile",
        "weight__payload": f"bits [{ow}*j +: {ow}] = W[i, j], j = 0..{c - 1}: one tile row; "
                           f"a tile is {r} beats, i = 0..{r - 1} in order",
        "weight__valid": "weight beat offered",
        "weight__ready": "low while a whole next tile is waiting",
        "out__payload": f"bits [{aw}*j +: {aw}] = y[j], j = 0..{c - 1}, signed, wrapped to "
                        f"{aw} bits; bit {c * aw} = first",
        "out__valid": "output vector valid; there is no ready: the consumer must always accept",
    }
    lines = [
        f"# `{names['array']}`: {r} x {c} weight-stationary systolic array",
        "",
        f"Operands {config.operand}, accumulators {aw} bits (two's-complement wrap).",
        f"Latency: R + C - 1 + cell_pipeline = {array_latency(config)} cycles from an `act` "
        "transfer to its",
        "`out__valid`; one vector per cycle in and out; tiles of M >= R vectors back to back,",
        "tiles of M < R vectors start every R cycles.",
        "",
        "Clock `clk` (rising edge), reset `rst` (synchronous, active high).",
        "",
        "| port | dir | bits | meaning |",
        "|---|---|---|---|",
    ]
    for name, flow, width in _flat_ports(array_signature(config)):
        d = "in" if flow == wiring.In else "out"
        lines.append(f"| `{name}` | {d} | {width} | {notes.get(name, '')} |")
    return "\n".join(lines) + "\n"


def write_verilog(config: Config, outdir: Path, *, top="array", fault=None) -> list:
    """Write ``<top>.v``, ``config.json`` and ``ports.md`` into ``outdir``; return the paths."""
    if top not in ("array", "core"):
        raise ValueError(f"top must be 'array' or 'core', not {top!r}")
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    text = (array_verilog if top == "array" else core_verilog)(config, fault=fault)
    files = [outdir / f"{module_names()[top]}.v", outdir / "config.json",
             outdir / "ports.md"]
    files[0].write_text(text)
    files[1].write_text(config.to_json() + "\n")
    files[2].write_text(port_description(config) if top == "array"
                        else core_port_description(config))
    return files


def core_port_description(config: Config) -> str:
    """A Markdown description of the core top's ports (see ``hdl/isa.py`` for the ISA)."""
    r, c, ow, aw = config.rows, config.cols, config.operand_width, config.acc_width
    h = host_lanes(config)
    notes = {
        "cmd__payload": "one 64-bit instruction word (hdl/isa.py)",
        "host_in__payload": f"bits [{ow}*k +: {ow}] = lane k, k = 0..{h - 1} (R lanes for "
                            f"READ_HOST, C for READ_WEIGHTS); bit {h * ow} = last",
        "host_out__payload": f"bits [{aw}*j +: {aw}] = lane j, j = 0..{c - 1}; bit {c * aw} = "
                             "last",
        "status": "busy, error, cause[4], then 64-bit counters: cycles, array_busy, "
                  "host_in_stall, host_out_stall, retired",
        "clear_error": "pulse: clear the sticky error",
        "clear_counters": "pulse: zero the counters",
    }
    lines = [f"# `{module_names()['core']}`: {r} x {c} core", "",
             f"Unified buffer {config.ub_rows} rows, accumulators {config.acc_rows} rows, "
             f"weight FIFO {config.weight_fifo_depth} tiles, activation lanes "
             f"{config.activation_lanes}.", "",
             "Clock `clk` (rising edge), reset `rst` (synchronous, active high). Streams are "
             "valid/ready.", "", "| port | dir | bits | meaning |", "|---|---|---|---|"]
    for name, flow, width in _flat_ports(core_signature(config)):
        d = "in" if flow == wiring.In else "out"
        lines.append(f"| `{name}` | {d} | {width} | {notes.get(name, '')} |")
    return "\n".join(lines) + "\n"
