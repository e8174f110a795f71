"""``tpugen infer`` and ``tpugen.load_tflite``: the command line of imported models."""

import numpy as np
import pytest

import tpugen
import tpugen.tflite.model as tflite_model
from tpugen.cli import main
from tpugen.tflite.writer import ModelWriter


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(5)
    mw = ModelWriter()
    x = mw.input((1, 6, 6, 2), 0.05, 4)
    y = mw.conv2d(x, rng.integers(-127, 128, (3, 3, 3, 2)), rng.integers(-500, 500, 3),
                  rng.uniform(0.001, 0.02, 3), 0.04, -2, stride=2, padding="SAME",
                  activation="RELU")
    y = mw.fully_connected(y, rng.integers(-127, 128, (4, 27)), None, 0.01, 0.05, 0)
    model = tmp_path / "m.tflite"
    model.write_bytes(mw.build(y))
    one = tmp_path / "x1.npy"
    many = tmp_path / "x5.npy"
    np.save(one, rng.integers(-128, 128, (1, 6, 6, 2)).astype(np.int8))
    np.save(many, rng.integers(-128, 128, (5, 1, 6, 6, 2)).astype(np.int8))
    mw = ModelWriter()
    x = mw.input((1, 8), 0.05, 4)
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(mw.build(mw.op("TANH", [x], (1, 8), 1 / 128, 0)))
    return model, one, many, bad


def test_infer_check_stacked_and_output(files, tmp_path, capsys):
    model, _, many, _ = files
    out = tmp_path / "y.npy"
    rc = main(["infer", str(model), "--input", str(many), "--output", str(out), "--rows", "4",
               "--cols", "4", "--check"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "check: bit-exact with the TFLite Micro interpreter" in text
    assert "CONV_2D            accelerator, chain 1" in text
    assert "45 x 18 x 3" in text                            # 5 samples x 3 x 3 outputs
    y = np.load(out)
    assert y.shape == (5, 1, 4) and y.dtype == np.int8
    direct = tpugen.load_tflite(model).run(np.load(many), tpugen.Accelerator(
        tpugen.Config(rows=4, cols=4), backend="model"))
    assert np.array_equal(direct, y)


def test_infer_single_input(files, capsys):
    model, one, _, _ = files
    assert main(["infer", str(model), "--input", str(one), "--check"]) == 0
    text = capsys.readouterr().out
    assert "8 x 8 array" in text and "output (1, 4) int8" in text


def test_infer_check_reports_a_mismatch(files, capsys, monkeypatch):
    model, one, _, _ = files
    real = tflite_model.run_layers

    def off_by_one(accelerator, x, layers):
        y, report = real(accelerator, x, layers)
        y = y.copy()
        y.flat[0] = y.flat[0] ^ 1
        return y, report

    monkeypatch.setattr(tflite_model, "run_layers", off_by_one)
    assert main(["infer", str(model), "--input", str(one), "--check"]) == 1
    assert "check: first mismatch at index" in capsys.readouterr().out


def test_infer_refuses_unsupported_op_in_one_line(files, capsys):
    _, one, _, bad = files
    assert main(["infer", str(bad), "--input", str(one)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tpugen: error: unsupported op TANH (op 0)")
    assert err.count("\n") == 1


def test_infer_user_errors(files, tmp_path, capsys):
    model, one, _, _ = files
    assert main(["infer", str(model), "--input", str(tmp_path / "none.npy")]) == 2
    assert "no such file" in capsys.readouterr().err
    np.save(tmp_path / "wrong.npy", np.zeros((3, 3), np.int8))
    assert main(["infer", str(model), "--input", str(tmp_path / "wrong.npy")]) == 2
    assert "must have shape (1, 6, 6, 2)" in capsys.readouterr().err
    assert main(["infer", str(model), "--input", str(one), "--backend", "icarus"]) == 1
    assert "needs the activation-unit work" in capsys.readouterr().err
