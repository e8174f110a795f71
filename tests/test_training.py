"""Training on the array (``tpugen.training``, ``tpugen train``) on the ``model`` backend: every
GEMM on the accelerator and bit-exact with an independent step written here from the golden
model, determinism for a seed, the float32 reference, fp8 with power-of-two scaling, bad input,
a diverging run, and the command line end to end with ``tpugen infer --check`` on the model it
writes. The Verilator run is tests/test_training_rtl.py."""

import numpy as np
import pytest

import tpugen.training.trainer as trainer_module
from tpugen import Accelerator, Config, ResultMismatch
from tpugen.cli import main
from tpugen.sim import float_golden
from tpugen.sim.formats import encode
from tpugen.training import (
    ArrayGemms,
    Float32Gemms,
    LossNotFinite,
    Trainer,
    TrainOptions,
    mnist_split,
    train,
)
from tpugen.training.engines import pow2_scale
from tpugen.training.mlp import MLP, softmax_xent

BF16 = Config(rows=4, cols=4, operand="bf16")


@pytest.fixture(scope="module")
def digits():
    """The first 256 training and 100 test digits, 4 x 4 average-pooled (49 features)."""
    d = mnist_split(0, 256, 100)
    pool = lambda x: x.reshape(-1, 7, 4, 7, 4).mean(axis=(2, 4)).reshape(len(x), 49)  # noqa
    return pool(d.x_train), d.y_train, pool(d.x_test), d.y_test


def _array(operand="bf16", rows=4, cols=4):
    return ArrayGemms(Accelerator(Config(rows=rows, cols=cols, operand=operand), "model"))


def _bits(mlp):
    return [p.view(np.uint32).copy() for p in mlp.params()]


SMALL = TrainOptions(hidden=(12,), batch=16, epochs=2, lr=0.2)


# --- the arithmetic ---------------------------------------------------------------------------
def _golden(a, b, rows=BF16.rows):
    """a @ b as the array computes it: bf16 operands (RNE), binary32 sums in its order."""
    bits = float_golden.gemm(encode(a, "bf16"), encode(b, "bf16"), "bf16", rows)
    return bits.astype(np.uint32).view(np.float32)


def test_a_step_equals_one_written_from_the_golden_model(digits):
    """One step of the trainer, bit for bit, against the same step written out here: each of
    the five GEMMs (X W1, H W2, dZ W2^T, H^T dZ, X^T dH) from the golden model, the rest in
    float32 NumPy."""
    x, y = digits[0][:16], digits[1][:16]
    opts = TrainOptions(hidden=(12,), batch=16, epochs=1, momentum=0.5)
    t = Trainer(x, y, opts, _array())
    w1, b1, w2, b2 = (p.copy() for p in t.mlp.params())
    idx = np.random.default_rng((0, 1)).permutation(16)
    xb, yb = x[idx], y[idx]
    h = _golden(xb, w1) + b1
    a = np.maximum(h, np.float32(0))
    z = _golden(a, w2) + b2
    _, dz, _ = softmax_xent(z, yb)
    g_w2, g_b2 = _golden(a.T, dz), dz.sum(axis=0, dtype=np.float32)
    dh = np.where(h > 0, _golden(dz, w2.T), np.float32(0)).astype(np.float32)
    g_w1, g_b1 = _golden(xb.T, dh), dh.sum(axis=0, dtype=np.float32)
    t.fit(max_steps=1)
    lr = np.float32(opts.lr)
    for got, p0, g in zip(t.mlp.params(), (w1, b1, w2, b2), (g_w1, g_b1, g_w2, g_b2),
                          strict=True):
        want = p0 + (np.float32(0) - lr * g)       # v = 0.5 * 0 - lr * g; p += v
        assert got.dtype == np.float32
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    tally = t.gemms.tally
    assert [tally[k].count for k in ("forward", "input_grad", "weight_grad")] == [2, 1, 2]
    assert tally["forward"].macs == 16 * 49 * 12 + 16 * 12 * 10


def test_every_gemm_goes_through_matmul(digits, monkeypatch):
    """The step's GEMMs are Accelerator.matmul calls of the shapes the module states; a wrong
    result from the backend stops the run (ResultMismatch), nothing wrong is used."""
    gemms = _array()
    shapes = []
    real = Accelerator.matmul

    def spy(self, a, b, **kw):
        shapes.append((np.shape(a), np.shape(b)))
        return real(self, a, b, **kw)

    monkeypatch.setattr(Accelerator, "matmul", spy)
    t = train(*digits[:2], SMALL, gemms, max_steps=1)
    assert t.steps == 1
    assert shapes == [((16, 49), (49, 12)), ((16, 12), (12, 10)),      # forward
                      ((12, 16), (16, 10)), ((16, 10), (10, 12)),      # dW2 = H^T dZ, dH
                      ((49, 16), (16, 12))]                            # dW1 = X^T dH
    backend = gemms.accelerator.backend
    real_run = type(backend).run

    def corrupt(self, program, **kw):
        result = real_run(self, program, **kw)
        result.host_out[0] ^= 1 << 20
        return result

    monkeypatch.setattr(type(backend), "run", corrupt)
    with pytest.raises(ResultMismatch):
        train(*digits[:2], SMALL, _array(), max_steps=1)


def test_runs_are_deterministic_for_a_seed(digits):
    runs = [train(*digits[:2], SMALL, _array(), max_steps=6) for _ in range(2)]
    other = train(*digits[:2], TrainOptions(**{**SMALL.__dict__, "seed": 1}), _array(),
                  max_steps=6)
    init = MLP.init((49, 12, 10), 0)
    for a, b, c, w0 in zip(*(_bits(r.mlp) for r in (*runs, other)), _bits(init), strict=True):
        assert np.array_equal(a, b)
        assert not np.array_equal(a, c) and not np.array_equal(a, w0)


def test_the_float32_reference_shares_init_and_order_but_not_the_rounding(digits):
    x, y, xt, yt = digits
    ref = train(x, y, SMALL, Float32Gemms(), test=(xt, yt))
    run = train(x, y, SMALL, _array(), test=(xt, yt))
    assert len(ref.history) == len(run.history) == 2
    assert [s.steps for s in run.history] == [16, 16]
    for r, a in zip(ref.history, run.history, strict=True):
        assert abs(r.loss - a.loss) < 0.05 and abs(r.test_acc - a.test_acc) < 0.1
    for p, q in zip(ref.mlp.params(), run.mlp.params(), strict=True):
        assert np.allclose(p, q, atol=0.05)
    assert not np.array_equal(ref.mlp.weights[0], run.mlp.weights[0])   # bf16 shows
    assert run.history[-1].test_acc > 0.5 and run.history[-1].loss < run.history[0].loss
    assert ref.gemms.tally["forward"].count == run.gemms.tally["forward"].count
    assert run.history[0].cycles_per_step is None                       # the model backend


@pytest.mark.parametrize("operand", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_trains_with_power_of_two_scaling(digits, operand):
    x, y, xt, yt = digits
    gemms = _array(operand)
    assert gemms.scale
    run = train(x, y, SMALL, gemms, test=(xt, yt))
    assert run.history[-1].loss < run.history[0].loss
    assert run.history[-1].test_acc > 0.4


def test_pow2_scale():
    assert pow2_scale(np.array([3.0, -100.0], np.float32), 448.0) == 2   # 400 <= 448
    assert pow2_scale(np.array([1e-4], np.float32), 448.0) == 22
    assert pow2_scale(np.array([448.0], np.float32), 448.0) == 0
    assert pow2_scale(np.zeros(3, np.float32), 448.0) == 0
    for v in (1e-30, 0.3, 7e5):
        k = pow2_scale(np.array([v]), 57344.0)
        assert 57344.0 / 2 < v * 2.0 ** k <= 57344.0


# --- bad input --------------------------------------------------------------------------------
def test_a_non_float_operand_type_is_refused():
    for operand in ("int8", "int4"):
        with pytest.raises(TypeError, match=f"float operand type .* not {operand}"):
            ArrayGemms(Accelerator(Config(rows=4, cols=4, operand=operand), "model"))


@pytest.mark.parametrize("bad, where", [(np.nan, "x holds nan at sample 3, feature 5"),
                                        (np.inf, "x holds inf at sample 3, feature 5"),
                                        (1e39, r"x holds 1e\+39 at sample 3, feature 5")])
def test_nan_or_inf_in_the_data_is_refused(digits, bad, where):
    x = digits[0].astype(np.float64)
    x[3, 5] = bad
    with pytest.raises(ValueError, match=where):
        Trainer(x, digits[1], SMALL, _array())
    xt = digits[2].copy()
    xt[0, 0] = np.nan
    t = Trainer(*digits[:2], SMALL, Float32Gemms())
    with pytest.raises(ValueError, match="the test set holds nan at sample 0, feature 0"):
        t.fit(test=(xt, digits[3]))
    assert t.steps == 0                                   # found before any step


def test_bad_labels_options_and_shapes_are_refused(digits):
    x, y = digits[:2]
    with pytest.raises(ValueError, match="labels of x must be in 0..9, found 10"):
        Trainer(x, np.where(y == 0, 10, y), SMALL, _array())
    with pytest.raises(TypeError, match="labels of x must be integers"):
        Trainer(x, y.astype(np.float32), SMALL, _array())
    with pytest.raises(TypeError, match="x must hold real numbers"):
        Trainer(x.astype(str), y, SMALL, _array())
    with pytest.raises(ValueError, match="2-D"):
        Trainer(x[0], y, SMALL, _array())
    for kw, match in (({"batch": 0}, "batch"), ({"lr": float("nan")}, "lr"),
                      ({"momentum": 1.0}, "momentum"), ({"hidden": (12, -1)}, "hidden"),
                      ({"lr_decay": 1.5}, "lr_decay"), ({"epochs": 2.5}, "epochs")):
        with pytest.raises(ValueError, match=match):
            TrainOptions(**kw)


def test_a_batch_beyond_memory_is_refused(digits, monkeypatch):
    x, y = digits[:2]
    with pytest.raises(ValueError, match="batch 257: larger than the 256 training samples"):
        Trainer(x, y, TrainOptions(batch=257), _array())
    monkeypatch.setattr(trainer_module, "available_memory", lambda: 1000)
    with pytest.raises(ValueError, match=r"batch 64: a training step's .* GEMM needs about "
                                         r".* GiB of host memory, more than the 0.0 GiB"):
        Trainer(x, y, TrainOptions(batch=64), _array())
    Trainer(x, y, TrainOptions(batch=64), Float32Gemms())     # no accelerator: no estimate


def test_a_nan_loss_stops_the_run_naming_its_step(digits):
    diverging = TrainOptions(hidden=(12,), batch=16, epochs=3, lr=1e30)
    for gemms in (Float32Gemms(), _array()):
        t = Trainer(*digits[:2], diverging, gemms)
        with pytest.raises(LossNotFinite) as e:
            t.fit()
        assert e.value.step == t.steps and e.value.step >= 2
        assert f"at step {e.value.step} (epoch 1, batch {e.value.step})" in str(e.value)
        assert not np.isfinite(e.value.loss)


# --- the command line -------------------------------------------------------------------------
def test_tpugen_train_writes_a_model_infer_runs_bit_exact(tmp_path, capsys):
    model, x, png = tmp_path / "m.tflite", tmp_path / "x.npy", tmp_path / "c.png"
    rc = main(["train", "--train", "256", "--test", "50", "--hidden", "16", "--batch", "32",
               "--epochs", "2", "--rows", "8", "--cols", "8", "--output", str(model),
               "--save-test", str(x), "--plot", str(png)])
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = out.splitlines()
    assert "MLP 784-16-10" in lines[0] and "bf16 operands, fp32 accumulation" in lines[1]
    epochs = [line.split() for line in lines if line[:5].strip() in ("1", "2")]
    assert len(epochs) == 2 and epochs[0][11] == "40"          # 8 steps x 5 GEMMs
    assert "test accuracy bf16" in out and "5 GEMMs per training step" in out
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert np.load(x).shape == (50, 1, 784)
    assert main(["infer", str(model), "--input", str(x), "--check"]) == 0
    assert "check: bit-exact with the TFLite Micro interpreter" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--operand", "int8"], "--operand int8: training needs a float operand type"),
    (["--batch", "300", "--train", "200"], "--batch 300: larger than the 200 training"),
    (["--test", "2000"], "--test 2000: MNIST-5k has 1000"),
    (["--lr", "0"], "--lr: must be a positive number"),
    (["--momentum", "1"], "--momentum: must be a momentum in [0, 1)"),
    (["--hidden", "16,x"], "--hidden: must be a positive integer"),
    (["--plot", "c.jpg"], "--plot c.jpg: the file name must end in .png"),
    (["--output", "m.onnx"], "--output m.onnx: the file name must end in .tflite"),
    (["--port", "/dev/null"], "--port /dev/null: only with --backend board"),
])
def test_train_user_errors_are_one_line(argv, message, capsys):
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_train_reports_a_diverging_run_in_one_line(capsys):
    rc = main(["train", "--train", "64", "--test", "10", "--hidden", "8", "--batch", "16",
               "--lr", "1e30"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err
    assert err.startswith("tpugen: error: the bf16 run on model: the loss is nan at step 2 "
                          "(epoch 1, batch 2)"), err
