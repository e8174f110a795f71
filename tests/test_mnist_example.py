"""The MNIST example (``examples/mnist.py``) at a small size: trains, quantizes, writes both
``.tflite`` files and gets TFLite Micro's accuracy from tpugen, bit for bit. The full run is
``make mnist``."""

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mnist.py"


@pytest.fixture(scope="module")
def mnist():
    spec = importlib.util.spec_from_file_location("mnist_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mnist_small(mnist, tmp_path):
    lines = []
    results = mnist.run(out_dir=tmp_path, sizes=(400, 100), epochs=(2, 1), log=lines.append)
    assert [r["name"] for r in results] == ["MLP", "CNN"]
    for r in results:
        assert r["bit_exact"], r["mismatch"]
        assert r["tflite_micro"] == r["tpugen"]
        assert r["tpugen"] > 0.5, r                      # learned something (10 classes)
        assert Path(r["file"]).stat().st_size > 1000
    assert [shape for _, shape in results[1]["gemms"]] == [(100 * 196, 9, 8),
                                                           (100 * 49, 72, 16),
                                                           (100, 784, 10)]
    assert "bit-exact    yes" in lines[0]
