"""Every backend a program can run on, in one table; one module each, loaded on first use.

``BACKENDS`` maps a name to a ``BackendInfo``: what it is, where its class lives and what it
takes. Making a backend imports its module then (``get_backend``), so ``import tpugen`` loads
neither cocotb nor pyserial nor a simulator's plumbing.

| name               | module                               | class            |
|--------------------|--------------------------------------|------------------|
| `model`            | ``tpugen.backends.golden_model``     | ``ModelBackend`` |
| `amaranth`         | ``tpugen.backends.amaranth_sim``     | ``AmaranthBackend`` |
| `icarus`, `verilator-cocotb` | ``tpugen.backends.cocotb_sim`` | ``CocotbBackend`` |
| `verilator`        | ``tpugen.backends.harness``          | ``HarnessBackend`` |
| `board`            | ``tpugen.backends.board``            | ``BoardBackend`` |
"""

from dataclasses import dataclass
from importlib import import_module

from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.config import Config, check_config
from tpugen.sim.backend_base import Backend

__all__ = ["BackendInfo", "BACKENDS", "SIMULATORS", "get_backend"]


@dataclass(frozen=True)
class BackendInfo:
    """One backend: ``summary`` (a line for help texts), the module and class that make it, the
    simulator a cocotb backend runs (``simulator``), whether it takes a ``fault`` (debug fault
    cell), needs a ``port`` and can write waveforms (``has_waves``: it simulates the RTL)."""

    name: str
    summary: str
    module: str
    cls: str
    simulator: str | None = None
    takes_fault: bool = True
    needs_port: bool = False
    has_waves: bool = True

    def load(self) -> type[Backend]:
        """The backend's class (importing its module)."""
        return getattr(import_module(f"{__name__}.{self.module}"), self.cls)

    def make(self, config: Config, *, fault=None, port=None, baud: int = DEFAULT_BAUD) -> Backend:
        cls = self.load()
        if self.needs_port:
            return cls(config, port, baud)
        if self.simulator is not None:
            return cls(config, self.simulator, fault=fault)
        return cls(config, fault=fault) if self.takes_fault else cls(config)


BACKENDS: dict[str, BackendInfo] = {b.name: b for b in (
    BackendInfo("model", "the NumPy golden model (no cycles)", "golden_model", "ModelBackend",
                takes_fault=False, has_waves=False),
    BackendInfo("amaranth", "the Amaranth simulator (flat elaboration, slow)",
                "amaranth_sim", "AmaranthBackend"),
    BackendInfo("icarus", "the generated Verilog in Icarus Verilog (cocotb)",
                "cocotb_sim", "CocotbBackend", simulator="icarus"),
    BackendInfo("verilator", "the generated Verilog in Verilator (compiled C++ harness, fast)",
                "harness", "HarnessBackend"),
    BackendInfo("verilator-cocotb", "the generated Verilog in Verilator (cocotb testbench)",
                "cocotb_sim", "CocotbBackend", simulator="verilator"),
    BackendInfo("board", "a board (or the simulated board) at a serial port",
                "board", "BoardBackend", takes_fault=False, needs_port=True, has_waves=False),
)}

#: The backends that simulate the RTL (they count cycles and can write waveforms).
SIMULATORS = tuple(name for name, b in BACKENDS.items() if b.has_waves)


def get_backend(name: str, config: Config, *, fault=None, port=None,
                baud: int = DEFAULT_BAUD) -> Backend:
    """The backend called ``name`` (a key of ``BACKENDS``) for ``config``. ``fault`` (a debug
    fault cell ``(row, col)``) only for simulators of the RTL; ``port`` (the serial device of a
    board or of ``tpugen.tb.simboard``) only, and always, for ``board``."""
    if not isinstance(name, str) or name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {name!r}")
    check_config(config)
    info = BACKENDS[name]
    if fault is not None and not info.takes_fault:
        raise ValueError(f"fault has no meaning for the {name} backend")
    if info.needs_port and port is None:
        raise ValueError(f"port must name the board's serial device for the {name} backend")
    if port is not None and not info.needs_port:
        raise ValueError(f"port has no meaning for the {name} backend")
    return info.make(config, fault=fault, port=port, baud=baud)
