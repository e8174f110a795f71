"""The MNIST example's MLP and CNN on the simulated board with their models kept on the board
(the ULX3S default with a weight memory and a program memory; the CNN's convolutions on the
window walk, ``Config.window``): after one load, 100 single-image inferences send no weight
bytes, the link carries at most 1.25 x (input + output) bytes per image, and every output equals
TFLite Micro's. Slow (``make test-slow``): the simulated board runs every UART bit."""

import sys
from pathlib import Path

import numpy as np
import pytest

import tpugen
from tpugen.fpga.flow.boards import get_board
from tpugen.tb.simboard import SimulatedBoardTop
from tpugen.tflite import TFLiteModel
from tpugen.tflite.oracle import run_tflite_micro

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import mnist  # noqa: E402

IMAGES = 100


def _stays_on_the_board(config, layers, shape, weights_expected=None):
    rng = np.random.default_rng(0)
    images, labels = mnist.load_mnist()
    x = images[:1000].astype(np.float32) / 255
    mnist.train(layers, x.reshape((-1, *shape[1:])), labels[:1000], 2, rng)
    data = mnist.to_tflite(layers, x[:200].reshape((-1, *shape[1:])), shape)
    model = TFLiteModel(data)
    xq = (images[1000:1000 + IMAGES].astype(np.int16) - 128).astype(np.int8)
    xq = xq.reshape((-1, *shape))
    expected = run_tflite_micro(data, xq, stacked=True)
    with SimulatedBoardTop(config) as board:
        accel = tpugen.Accelerator(config, "board", port=board.port)
        accel.backend.timeout = 300
        link = accel.backend.board
        per_image = []
        for k in range(IMAGES):
            before = (link.bytes_to_board, link.bytes_from_board)
            got = model.run(xq[k], accel)
            assert np.array_equal(got.reshape(-1), expected[k].reshape(-1)), k
            assert accel.backend.last_loaded == (k == 0), k
            per_image.append((link.bytes_to_board - before[0],
                              link.bytes_from_board - before[1]))
        accel.backend.close()
    weights = accel.backend.last_resident.weight_bytes()
    if weights_expected is not None:
        assert weights == weights_expected
    assert model.last.chains and len(model.last.chains) == 1     # one program an image
    for to, back in per_image[1:]:
        assert to + back <= 1.25 * (784 + 10), (to, back)
        assert to < weights // 10                # no weight bytes: the input and one word
    print(f"per image after the load: {per_image[1]} bytes (to, from); load "
          f"{sum(per_image[0])} bytes; weights on the board {weights} bytes")


def _config(**extra):
    return get_board("ulx3s").config.replace(quant_sets=8, weight_tiles=256,
                                             program_words=2048, **extra)


@pytest.mark.slow
def test_mlp_stays_on_the_board():
    rng = np.random.default_rng(0)
    layers = [mnist.Dense(rng, 784, 64, True), mnist.Dense(rng, 64, 10, False)]
    # every weight tile (N padded to 16) resident
    _stays_on_the_board(_config(), layers, (1, 784), weights_expected=784 * 64 + 64 * 16)


@pytest.mark.slow
def test_cnn_stays_on_the_board():
    rng = np.random.default_rng(0)
    layers = [mnist.Conv(rng, 1, 8, 28), mnist.Conv(rng, 8, 16, 14),
              mnist.Dense(rng, 784, 10, False)]
    _stays_on_the_board(_config(window=1), layers, (1, 28, 28, 1))
