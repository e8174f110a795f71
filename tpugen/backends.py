"""Every backend a program can run on, in one table.

``BACKENDS`` maps a name to a ``BackendInfo``: what it is and how to make it. The simulating
backends live in ``tpugen.sim.backends``, the board's in ``tpugen.fpga``; only this front-door
module knows both, so ``tpugen.sim`` never imports ``tpugen.fpga``.
"""

from collections.abc import Callable
from dataclasses import dataclass

from tpugen.fpga.board_backend import BoardBackend
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.config import Config
from tpugen.sim.backends import AmaranthBackend, Backend, ModelBackend
from tpugen.tb.core_backend import CocotbBackend
from tpugen.tb.harness_backend import HarnessBackend

__all__ = ["BackendInfo", "BACKENDS", "SIMULATORS", "get_backend"]


@dataclass(frozen=True)
class BackendInfo:
    """One backend: ``summary`` (a line for help texts), ``make(config, fault=, port=, baud=)``
    (the ``Backend``), whether it takes a ``fault`` (debug fault cell) and needs a ``port``."""

    name: str
    summary: str
    make: Callable[..., Backend]
    takes_fault: bool = True
    needs_port: bool = False
    has_waves: bool = True


BACKENDS: dict[str, BackendInfo] = {b.name: b for b in (
    BackendInfo("model", "the NumPy golden model (no cycles)",
                lambda config, **_: ModelBackend(config), takes_fault=False, has_waves=False),
    BackendInfo("amaranth", "the Amaranth simulator (flat elaboration, slow)",
                lambda config, fault=None, **_: AmaranthBackend(config, fault=fault)),
    BackendInfo("icarus", "the generated Verilog in Icarus Verilog (cocotb)",
                lambda config, fault=None, **_: CocotbBackend(config, "icarus", fault=fault)),
    BackendInfo("verilator", "the generated Verilog in Verilator (compiled C++ harness, fast)",
                lambda config, fault=None, **_: HarnessBackend(config, fault=fault)),
    BackendInfo("verilator-cocotb", "the generated Verilog in Verilator (cocotb testbench)",
                lambda config, fault=None, **_: CocotbBackend(config, "verilator", fault=fault)),
    BackendInfo("board", "a board (or the simulated board) at a serial port",
                lambda config, port=None, baud=DEFAULT_BAUD, **_: BoardBackend(config, port, baud),
                takes_fault=False, needs_port=True, has_waves=False),
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
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    info = BACKENDS[name]
    if fault is not None and not info.takes_fault:
        raise ValueError(f"fault has no meaning for the {name} backend")
    if info.needs_port and port is None:
        raise ValueError(f"port must name the board's serial device for the {name} backend")
    if port is not None and not info.needs_port:
        raise ValueError(f"port has no meaning for the {name} backend")
    return info.make(config, fault=fault, port=port, baud=baud)
