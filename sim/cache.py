"""Where tpugen writes what it generates and caches: one directory, never inside the package.

``build_root()`` is ``$TPUGEN_BUILD_DIR`` when that is set, else ``build/`` under the current
directory (like ``tpugen verilog``'s default output). Simulator builds go under
``<root>/cocotb/<simulator>/<config>/``, simulator jobs under ``<root>/jobs/``, FPGA builds under
``<root>/fpga/``. It is read at each call, so a process may change directory or the variable.
"""

import hashlib
import os
from pathlib import Path

import tpugen.hdl

__all__ = ["BUILD_DIR_ENV", "build_root", "gateware_digest"]

#: The environment variable that moves the build directory.
BUILD_DIR_ENV = "TPUGEN_BUILD_DIR"


def build_root() -> Path:
    """The build directory (see the module docstring); not created here."""
    value = os.environ.get(BUILD_DIR_ENV)
    return Path(value) if value else Path.cwd() / "build"


def gateware_digest() -> str:
    """A hash of the generator's sources (``tpugen.hdl``), so that cached builds are rebuilt
    when the hardware's source changes (builds of board tops add ``tpugen.fpga``'s own digest
    to their key)."""
    h = hashlib.sha256()
    for p in sorted(Path(tpugen.hdl.__file__).parent.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]
