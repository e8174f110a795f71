"""tpugen: generate a parameterizable systolic-array matrix accelerator and prove it correct.

The front door::

    from tpugen import Config, Accelerator
    acc = Accelerator(Config(rows=8, cols=8), backend="verilator")
    C = acc.matmul(A, B)          # int32, checked: a wrong result raises ResultMismatch

Subpackages: ``tpugen.hdl`` (the Amaranth hardware and the ISA), ``tpugen.sim`` (golden model,
compiler, simulating backends), ``tpugen.tb`` (cocotb testbenches), ``tpugen.fpga`` (the host
link, board tops, builds). ``tpugen.backends`` lists every backend. ``load_tflite(path)``
imports an int8 TensorFlow Lite model (``tpugen.tflite``) to ``.run(x, accelerator)``.
"""

from importlib.metadata import PackageNotFoundError, version

from tpugen.accelerator import Accelerator, GemmReport, ResultMismatch
from tpugen.backends import BACKENDS, get_backend
from tpugen.hdl.config import Config
from tpugen.tflite import load_tflite

__all__ = ["Config", "Accelerator", "GemmReport", "ResultMismatch", "BACKENDS", "get_backend",
           "load_tflite",
           "__version__"]

try:
    __version__ = version("tpugen")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
