"""Training on the array: an MLP whose every GEMM (forward X W, input gradient dY W^T, weight
gradient X^T dY) runs on an ``Accelerator`` in a float operand type (bf16, or fp8 E4M3 / E5M2)
with binary32 accumulation, each checked bit for bit against the golden model; softmax
cross-entropy, biases, ReLU and SGD with momentum on the host in float32 on float32 master
weights ([docs/training.md](../../docs/training.md)).

    from tpugen import Accelerator, Config
    from tpugen.training import ArrayGemms, TrainOptions, mnist_split, train
    d = mnist_split()
    acc = Accelerator(Config(rows=16, cols=16, operand="bf16"), "model")
    run = train(d.x_train, d.y_train, TrainOptions(), ArrayGemms(acc),
                test=(d.x_test, d.y_test))
    run.mlp.weights, run.history        # float32 master weights, one EpochStats per epoch

``Float32Gemms()`` in place of ``ArrayGemms(acc)`` is the float32 NumPy reference of the same
run (same initial weights, same batches). ``mlp_to_tflite`` writes the trained model as an int8
``.tflite`` (post-training quantization). ``tpugen train`` is the command line.
"""

from tpugen.training.engines import GEMM_KINDS, ArrayGemms, Float32Gemms, GemmTally
from tpugen.training.int8_export import mlp_to_tflite
from tpugen.training.mlp import MLP
from tpugen.training.mnist_data import Digits, load_mnist, mnist_split
from tpugen.training.trainer import EpochStats, LossNotFinite, Trainer, TrainOptions, train

__all__ = ["ArrayGemms", "Float32Gemms", "GemmTally", "GEMM_KINDS", "MLP", "TrainOptions",
           "Trainer", "EpochStats", "LossNotFinite", "train", "mlp_to_tflite", "Digits",
           "load_mnist", "mnist_split"]
