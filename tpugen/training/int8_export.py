"""Post-training int8 quantization of a trained model and its ``.tflite`` file (written with
``tpugen.tflite.writer``), as the MNIST example does (``examples/mnist.py`` uses these too):

- weights: symmetric per output channel, scale ``max |w| / 127``, values in -127..127
  (``per_channel``);
- biases: int32 at ``s_in * s_w``;
- activations: asymmetric int8 covering each layer's float range on calibration data and 0
  (``act_quant``);
- the input: ``S_IN`` / ``ZP_IN`` (MNIST pixels: ``pixel - 128``); the output: TFLite's int8
  SOFTMAX after the last layer.

The ``.tflite`` model runs on tpugen (``tpugen infer``) bit for bit like TFLite Micro.
"""

import numpy as np

from tpugen.tflite.writer import ModelWriter
from tpugen.training.mlp import MLP
from tpugen.training.mnist_data import S_IN, ZP_IN

__all__ = ["act_quant", "per_channel", "int32_bias", "mlp_to_tflite"]


def act_quant(values: np.ndarray) -> tuple[float, int]:
    """Asymmetric int8 scale and zero point covering ``values`` (and 0)."""
    lo, hi = min(float(values.min()), 0.0), max(float(values.max()), 0.0)
    scale = max(hi - lo, 1e-8) / 255
    return scale, int(np.clip(round(-128 - lo / scale), -128, 127))


def per_channel(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-output-channel int8 weights of ``w`` (K x N): (N x K int8, N float32
    scales)."""
    s = np.maximum(np.abs(w).max(0), 1e-12) / 127
    return np.clip(np.round(w / s), -127, 127).astype(np.int8).T, s.astype(np.float32)


def int32_bias(b: np.ndarray, s_in: float, s_w: np.ndarray) -> np.ndarray:
    """The bias ``b`` at scale ``s_in * s_w``, rounded and clamped to int32 (as int64)."""
    bias = np.round(b / (np.float32(s_in) * s_w)).astype(np.int64)
    return np.clip(bias, -(1 << 31), (1 << 31) - 1)


def mlp_to_tflite(mlp: MLP, calib: np.ndarray, *, s_in: float = S_IN,
                  zp_in: int = ZP_IN) -> bytes:
    """The int8 ``.tflite`` of ``mlp`` (float32 master weights): input (1, inputs) int8 at
    ``s_in`` / ``zp_in``, FULLY_CONNECTED layers (RELU but the last), SOFTMAX. Activation
    ranges come from ``calib`` (N x inputs float32: the float values the int8 input stands for)
    through the float32 forward pass. Needs the tflite-micro wheel (``RuntimeError``)."""
    if not isinstance(mlp, MLP):
        raise TypeError(f"mlp must be a tpugen.training.MLP, not {mlp!r}")
    mw = ModelWriter()
    x = mw.input((1, mlp.sizes[0]), s_in, zp_in)
    h = np.asarray(calib, np.float32)
    last = len(mlp.weights) - 1
    for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases, strict=True)):
        h = h @ w + b
        if i < last:
            h = np.maximum(h, 0)
        wq, s_w = per_channel(w)
        s_out, zp_out = act_quant(h)
        x = mw.fully_connected(x, wq, int32_bias(b, s_in, s_w), s_w, s_out, zp_out,
                               "RELU" if i < last else "NONE")
        s_in = s_out
    return mw.build(mw.softmax(x))
