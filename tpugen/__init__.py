"""tpugen: generate a parameterizable systolic-array matrix accelerator and prove it correct."""

from tpugen.hdl.config import Config

__all__ = ["Config"]
__version__ = "0.1.0"
