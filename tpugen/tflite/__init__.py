"""Import int8 TensorFlow Lite models and run them on the accelerator, bit-exact with TFLite
Micro.

``load_tflite(path)`` reads a ``.tflite`` file and returns a ``TFLiteModel``:
``model.run(x, accelerator)`` runs FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D as GEMM
layers on the accelerator and the other ops it supports on the host (``SUPPORTED_OPS``); a model
with any other op is refused with ``UnsupportedModel`` naming it. ``tpugen infer`` is the
command line (``tpugen.tflite.infer``).
"""

from .errors import UnsupportedModel
from .model import SUPPORTED_OPS, InferenceReport, TFLiteModel, load_tflite

__all__ = ["load_tflite", "TFLiteModel", "InferenceReport", "UnsupportedModel", "SUPPORTED_OPS"]
