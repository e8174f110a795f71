"""Build the array's generated Verilog for a cocotb simulator (cached per configuration)."""

from tpugen.hdl.config import Config
from tpugen.hdl.verilog import array_verilog, module_names
from tpugen.sim.runner import Build, build

__all__ = ["build_array"]


def build_array(config: Config, sim: str, *, fault=None, waves=False) -> Build:
    key = config.name + (f"_fault{fault[0]}x{fault[1]}" if fault else "")
    return build(sim, "array_" + key, lambda: array_verilog(config, fault=fault),
                 module_names()["array"], waves=waves)
