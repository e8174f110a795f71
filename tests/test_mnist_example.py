"""The MNIST example (``examples/mnist.py``) at a small size, on the ``model`` backend: trains,
quantizes, writes both ``.tflite`` files and gets TFLite Micro's accuracy from tpugen, bit for
bit. The full run (the test set on ``model``, slices on Verilator and the simulated board) is
``make mnist``."""

import importlib.util
from pathlib import Path

import pytest

from tpugen.fpga.flow.boards import get_board

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mnist.py"


@pytest.fixture(scope="module")
def mnist():
    spec = importlib.util.spec_from_file_location("mnist_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mnist_small(mnist, tmp_path):
    lines = []
    results = mnist.run(out_dir=tmp_path, sizes=(400, 100), epochs=(2, 1), slices={},
                        log=lines.append)
    assert [r["name"] for r in results] == ["MLP", "CNN"]
    for r in results:
        (run,) = r["runs"]
        assert run["backend"] == "model" and run["images"] == 100
        assert run["bit_exact"], run["mismatch"]
        assert run["tflite_micro"] == run["tpugen"]
        assert run["tpugen"] > 0.5, run                  # learned something (10 classes)
        assert run["cycles_per_inference"] is None and run["ideal_per_inference"] > 0
        assert Path(r["file"]).stat().st_size > 1000
    assert [shape for _, shape in results[1]["gemms"]] == [(100 * 196, 9, 8),
                                                           (100 * 49, 72, 16),
                                                           (100, 784, 10)]
    row = lines[0].splitlines()[2].split()
    assert row[:2] == ["model", "100"] and row[6] == "yes"      # backend, images, bit-exact
    c = get_board("ulx3s").config                               # the ULX3S board's config
    assert f"{c.rows} x {c.cols} (r{c.rows}c{c.cols}_" in lines[0]


def test_mnist_options_are_checked(mnist, capsys):
    for argv, message in ((["--board", "nope"], "nope"), (["--verilator", "-1"],
                                                          "--verilator -1: must be 0")):
        with pytest.raises(SystemExit) as e:
            mnist.main(argv)
        assert e.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.slow
def test_mnist_on_the_simulated_board(mnist, tmp_path):
    """``make mnist``'s path with a simulated-board slice (the board's default config served
    behind a pseudo-terminal): two images each, bit-exact, and the link lines printed."""
    lines = []
    results = mnist.run(out_dir=tmp_path, sizes=(400, 20), epochs=(1, 1), slices={"board": 2},
                        log=lines.append)
    for r in results:
        model_run, board_run = r["runs"]
        assert board_run["backend"] == "board" and board_run["images"] == 2
        assert board_run["bit_exact"], board_run["mismatch"]
    assert sum("link per image on the ULX3S" in line for line in lines) == 2
