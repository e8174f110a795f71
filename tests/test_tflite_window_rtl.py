"""The window walk's programs (``compiler.planes``) on the compiled RTL: the MNIST example's
CNN shape as one program on the ULX3S array with ``window=1``, bit-exact with TFLite Micro on
Verilator, and in fewer cycles than the host path (im2col, three programs); average pools
on the walk in the same program."""

import numpy as np
import pytest
from test_tflite_pool_window import pooled_net
from test_tflite_window import mnist_cnn

import tpugen
from tpugen.fpga.flow.boards import get_board
from tpugen.tflite import TFLiteModel
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro


@pytest.mark.slow
def test_mnist_cnn_on_verilator_in_fewer_cycles():
    rng = np.random.default_rng(22)
    data = mnist_cnn(rng)
    x = rng.integers(-128, 128, (4, 1, 28, 28, 1)).astype(np.int8)
    want = run_tflite_micro(data, x, stacked=True)
    cycles = {}
    for window in (1, 0):
        model = TFLiteModel(data)
        config = get_board("ulx3s").config.replace(window=window)
        got = model.run(x, tpugen.Accelerator(config, backend="verilator"))
        assert first_mismatch(got, want) is None
        cycles[window] = model.last.cycles
        programs = sum(c.programs for c in model.last.chains)
        assert programs == (1 if window else 3)
    # Measured: 4 images in 12,975 cycles on planes, 20,949 by the host path.
    assert cycles[1] < 0.8 * cycles[0], cycles


def test_pools_on_verilator():
    """Convolutions, an average pool between them and a global one before the classifier
    (``test_tflite_pool_window``'s network): one program on Verilator, bit-exact."""
    rng = np.random.default_rng(31)
    data = pooled_net(rng)
    x = rng.integers(-128, 128, (2, 1, 12, 12, 3)).astype(np.int8)
    model = TFLiteModel(data)
    config = get_board("ulx3s").config.replace(window=1)
    got = model.run(x, tpugen.Accelerator(config, backend="verilator"))
    assert first_mismatch(got, run_tflite_micro(data, x, stacked=True)) is None
    assert sum(c.programs for c in model.last.chains) == 1
    pools = [o for o in model.last.ops if o.name == "AVERAGE_POOL_2D"]
    assert len(pools) == 2 and all(o.where.endswith("window walk") for o in pools)
