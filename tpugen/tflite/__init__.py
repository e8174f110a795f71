"""Import int8 TensorFlow Lite models and run them on the accelerator, bit-exact with TFLite
Micro.

``load_tflite(path)`` reads a ``.tflite`` file and returns a ``TFLiteModel``:
``model.run(x, accelerator)`` runs FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D as chains of
GEMM layers on the accelerator's backend (``tpugen.chain.run_layers``) and the other ops it
supports on the host or at load time (``SUPPORTED_OPS``); a model with any other op is
refused with ``UnsupportedModel`` naming every such op with its count. ``tpugen infer`` is the
command line (``tpugen.cli``); ``oracle`` runs the TFLite Micro interpreter, ``writer`` writes
models, ``corpus`` fetches the real-model corpus.
"""

from tpugen.tflite.tflite_model import (
           SUPPORTED_OPS,
           ChainRun,
           InferenceReport,
           OpRun,
           TFLiteModel,
           load_tflite,
)
from tpugen.tflite.unsupported import UnsupportedModel

__all__ = ["load_tflite", "TFLiteModel", "InferenceReport", "OpRun", "ChainRun",
           "UnsupportedModel", "SUPPORTED_OPS"]
