"""``tpugen infer`` and ``tpugen.load_tflite``: the command line of imported models."""

import numpy as np
import pytest

import tpugen
import tpugen.tflite.tflite_model as tflite_model
from tpugen.cli import main
from tpugen.tflite import TFLiteModel, UnsupportedModel
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
    bad.write_bytes(mw.build(mw.op("EXP", [x], (1, 8), 1 / 128, 0)))
    return model, one, many, bad


def test_infer_check_stacked_and_output(files, tmp_path, capsys):
    model, _, many, _ = files
    out = tmp_path / "y.npy"
    rc = main(["infer", str(model), "--input", str(many), "--output", str(out), "--rows", "4",
               "--cols", "4", "--check"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "check: bit-exact with the TFLite Micro interpreter" in text
    assert "CONV_2D            model, chain 1" in text
    assert "45 x 18 x 3" in text                            # 5 samples x 3 x 3 outputs
    assert ("4 x 4 array, 5 sample(s), 2970 model MACs (594 per sample): cycles not counted "
            "by the model backend") in text                 # 45 x 18 x 3 + 5 x 27 x 4
    y = np.load(out)
    assert y.shape == (5, 1, 4) and y.dtype == np.int8
    direct = tpugen.load_tflite(model).run(np.load(many), tpugen.Accelerator(
        tpugen.Config(rows=4, cols=4), backend="model"))
    assert np.array_equal(direct, y)


def test_infer_single_input_and_config_file(files, tmp_path, capsys):
    model, one, _, _ = files
    assert main(["infer", str(model), "--input", str(one), "--check"]) == 0
    text = capsys.readouterr().out
    assert "8 x 8 array" in text and "output (1, 4) int8: [[" in text
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"rows": 3, "cols": 5, "ub_rows": 64}')
    assert main(["infer", str(model), "--input", str(one), "--config", str(cfg), "--cols",
                 "2"]) == 0
    assert "3 x 2 array" in capsys.readouterr().out       # --config, then what was typed


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
    assert err.startswith(f"tpugen: error: {bad}: unsupported ops: EXP (1); tpugen runs "
                          f"FULLY_CONNECTED, CONV_2D")
    assert err.count("\n") == 1
    with pytest.raises(UnsupportedModel, match=r"^unsupported ops: EXP \(1\)"):
        tpugen.load_tflite(bad)


def _one_line(capsys, *argv) -> str:
    assert main(["infer", *map(str, argv)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured
    assert captured.err.startswith("tpugen: error: ")
    return captured.err[len("tpugen: error: "):].strip()


def test_infer_user_errors_are_one_line(files, tmp_path, capsys):
    model, one, many, _ = files
    missing = tmp_path / "none.npy"
    assert _one_line(capsys, model, "--input", missing) == f"--input {missing}: no such file"
    assert _one_line(capsys, tmp_path / "no.tflite", "--input", one) == \
        f"{tmp_path / 'no.tflite'}: no such file"
    assert _one_line(capsys, tmp_path, "--input", one) == \
        f"{tmp_path}: is a directory, not a .tflite model"
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"\x00" * 40)
    assert "not a .tflite flatbuffer" in _one_line(capsys, junk, "--input", one)
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(model.read_bytes()[:300])
    assert _one_line(capsys, cut, "--input", one).startswith(
        f"{cut}: not a valid .tflite flatbuffer")
    text = tmp_path / "x.npy"
    text.write_text("hello")
    assert _one_line(capsys, model, "--input", text).startswith(
        f"--input {text}: not a NumPy .npy array file")
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((3, 3), np.int8))
    assert _one_line(capsys, model, "--input", wrong) == (
        f"--input {wrong} must have shape (1, 6, 6, 2) (or N x (1, 6, 6, 2) for N inputs), "
        f"not (3, 3)")
    np.save(wrong, np.zeros((1, 6, 6, 2), np.float32))
    assert _one_line(capsys, model, "--input", wrong) == \
        f"--input {wrong} must have dtype int8, not float32"
    assert _one_line(capsys, model, "--input", one, "--output", tmp_path / "y.txt") == \
        f"--output {tmp_path / 'y.txt'}: the file name must end in .npy"
    assert _one_line(capsys, model, "--input", one, "--rows", "0").startswith(
        "--rows 0: rows must be")
    assert _one_line(capsys, model, "--input", one, "--config", tmp_path / "c.json") == \
        f"--config {tmp_path / 'c.json'}: no such file"
    bad_cfg = tmp_path / "bad.json"
    bad_cfg.write_text('{"rows": 3, "colls": 5}')
    assert _one_line(capsys, model, "--input", one, "--config", bad_cfg).startswith(
        f"--config {bad_cfg}: ")
    assert _one_line(capsys, model, "--input", one, "--backend", "board") == (
        "--backend board: needs --port DEV (the board's serial device, or the simulated "
        "board's pty)")
    assert _one_line(capsys, model, "--input", one, "--port", "/dev/null") == \
        "--port /dev/null: only with --backend board"
    assert _one_line(capsys, model, "--input", one, "--backend", "board", "--port",
                     tmp_path / "tty") == f"--port {tmp_path / 'tty'}: no such device"
    assert _one_line(capsys, model, "--input", one, "--backend", "tpu").startswith(
        "argument --backend: invalid choice: 'tpu'")


def test_load_tflite_and_run_check_their_arguments(files, tmp_path):
    model, one, _, _ = files
    with pytest.raises(TypeError, match="path must be a str or a path, not 3"):
        tpugen.load_tflite(3)
    with pytest.raises(ValueError, match="no such file"):
        tpugen.load_tflite(tmp_path / "none.tflite")
    m = tpugen.load_tflite(str(model))
    with pytest.raises(TypeError, match="accelerator must be a tpugen.Accelerator"):
        m.run(np.load(one), tpugen.Config(rows=4, cols=4))
    with pytest.raises(ValueError, match=r"x must have shape \(1, 6, 6, 2\)"):
        m.run(np.zeros((6, 6, 2), np.int8), tpugen.Accelerator(tpugen.Config()))
    with pytest.raises(TypeError, match="data must be the bytes of a .tflite file, not int"):
        tflite_model.TFLiteModel(5)


def test_list_ops_runs_nothing_and_lists_refused_models_too(files, capsys, monkeypatch):
    model, _, _, bad = files
    monkeypatch.setattr(TFLiteModel, "run", None)                # nothing may run
    assert main(["infer", "--list-ops", str(model)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"model {model}:"
    assert out[2].split()[:5] == ["0", "CONV_2D", "array,", "chain", "1"]
    assert out[2].split()[5:10] == ["486", "9", "x", "18", "x"]       # 9 x 18 x 3 MACs
    assert out[-1].startswith("total: 594 model MACs per sample on the array")
    assert main(["infer", str(bad), "--list-ops"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].split() == ["0", "EXP", "unsupported"]
    assert out[-1].startswith("refused: unsupported ops: EXP (1); ")
    assert _one_line(capsys, model) == "--input X.npy is required (or --list-ops)"
    missing = model.parent / "nope.tflite"
    assert _one_line(capsys, "--list-ops", missing) == f"{missing}: no such file"
