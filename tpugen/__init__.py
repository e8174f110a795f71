"""tpugen: generate a parameterizable systolic-array matrix accelerator and prove it correct.

The front door::

    from tpugen import Config, Accelerator
    acc = Accelerator(Config(rows=8, cols=8), backend="verilator")
    C = acc.matmul(A, B)          # int32, checked: a wrong result raises ResultMismatch

Subpackages (``docs/architecture.md`` maps them): ``tpugen.hdl`` (the Amaranth hardware and the
ISA), ``tpugen.sim`` (golden models, the program format, simulator plumbing),
``tpugen.compiler`` (GEMMs and layer chains to programs), ``tpugen.fpga`` (the link's gateware
and host side, board builds), ``tpugen.tb`` (testbenches, the compiled harness, the simulated
board), ``tpugen.backends`` (every backend, one module each). ``load_tflite(path)`` imports an
int8 TensorFlow Lite model (``tpugen.tflite``) to ``.run(x, accelerator)``.

``import tpugen`` is light: the backends, the TFLite reader (``tflite``), cocotb and pyserial
load when first used.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

from tpugen.accelerator import Accelerator, GemmReport, ResultMismatch
from tpugen.backends import BACKENDS, get_backend
from tpugen.hdl.config import Config

__all__ = ["Config", "Accelerator", "GemmReport", "ResultMismatch", "BACKENDS", "get_backend",
           "load_tflite",
           "__version__"]

try:
    __version__ = version("tpugen")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"


#: Names of the front door that load their subpackage on first use.
_LAZY = {"load_tflite": "tpugen.tflite"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tpugen' has no attribute {name!r}")
