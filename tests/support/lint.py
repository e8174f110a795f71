"""``verilator --lint-only -Wall`` of generated Verilog, with the waivers of one place."""

import subprocess
from pathlib import Path

from tpugen.sim.runner import VERILATOR_WAIVERS
from tpugen.sim.simulators import verilator_env, verilator_root

__all__ = ["lint", "waiver_file"]


def waiver_file(path: Path) -> Path:
    """Write a Verilator control file that waives ``VERILATOR_WAIVERS`` (with reasons)."""
    lines = ["`verilator_config"]
    for rule, why in VERILATOR_WAIVERS.items():
        lines.append(f"// {rule}: {why}")
        lines.append(f"lint_off -rule {rule}")
    path.write_text("\n".join(lines) + "\n")
    return path


def lint(verilog: Path, top: str) -> tuple[bool, str]:
    """Lint ``verilog`` (top module ``top``); return ``(passed, output)``."""
    verilog = Path(verilog)
    vlt = waiver_file(verilog.with_suffix(".vlt"))
    exe = verilator_root() / "bin" / "verilator"
    out = subprocess.run([str(exe), "--lint-only", "-Wall", "--top-module", top, str(vlt),
                          str(verilog)], env=verilator_env(), capture_output=True, text=True)
    return out.returncode == 0, out.stdout + out.stderr
