"""The host ops added for real models, each against the TFLite Micro interpreter (the external
oracle) on models written with ``tpugen.tflite.writer``: PAD and PADV2 (on the host, and
folded into a VALID convolution), MEAN, LOGISTIC and TANH (every int8 input, several scales),
MUL, SUB, TRANSPOSE, CONCATENATION, and the Keras reshape idiom (SHAPE, STRIDED_SLICE,
GATHER, PACK folded at load time); every intermediate tensor compared too; ``list_ops`` and
the MACs of a depthwise layer."""

import numpy as np
import pytest
from tflite_random import random_conv, random_layer

import tpugen
from tpugen.tflite import TFLiteModel, UnsupportedModel
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro, tflite_micro_tensors
from tpugen.tflite.tflite_model import list_ops
from tpugen.tflite.writer import ModelWriter

ACC = tpugen.Accelerator(tpugen.Config(rows=4, cols=4), backend="model")


def _check(data: bytes, shape, rng, samples=3, x=None) -> TFLiteModel:
    """Run ``samples`` random int8 inputs (or ``x``) stacked: the output and every tensor
    tpugen materializes for the first input bit-exact with TFLite Micro's."""
    model = TFLiteModel(data)
    if x is None:
        x = rng.integers(-128, 128, (samples,) + tuple(shape)).astype(np.int8)
    env = {}
    got = model.run(x, ACC, tensors=env)
    problem = first_mismatch(got, run_tflite_micro(data, x, stacked=True))
    assert problem is None, problem
    ref = tflite_micro_tensors(data, x[0], env)
    for t, v in env.items():
        problem = first_mismatch(v[0] if v.shape[0] == x.shape[0] else v, ref[t])
        assert problem is None, f"tensor {t}: {problem}"
    return model


@pytest.mark.parametrize("value", [None, -7])
def test_pad_on_the_host(value):
    rng = np.random.default_rng(1)
    mw = ModelWriter()
    x = mw.input((1, 4, 5, 3), 0.04, -3)
    y = mw.pad(x, [(0, 0), (1, 2), (0, 1), (0, 0)], value)
    y = random_conv(mw, y, rng, 2, k=3, padding="SAME")       # SAME: the PAD stays a host op
    model = _check(mw.build(y), (1, 4, 5, 3), rng)
    assert model.folded == {}
    assert model.last.ops[0].where == "host"


@pytest.mark.parametrize("depthwise", [False, True])
def test_pad_folds_into_a_valid_convolution(depthwise):
    rng = np.random.default_rng(2)
    mw = ModelWriter()
    x = mw.input((1, 7, 6, 4), 0.05, 5)
    y = mw.pad(x, [(0, 0), (0, 1), (1, 1), (0, 0)])
    s_w, bias, s_out, zp = random_layer(rng, 4, s_in=x.scale)
    if depthwise:
        y = mw.depthwise_conv2d(y, rng.integers(-127, 128, (1, 3, 3, 4)), bias, s_w, s_out,
                                zp, stride=2, padding="VALID")
    else:
        y = mw.conv2d(y, rng.integers(-127, 128, (4, 3, 3, 4)), bias, s_w, s_out, zp,
                      stride=2, padding="VALID")
    model = _check(mw.build(y), (1, 7, 6, 4), rng)
    assert model.folded == {0: "into op 1"}
    assert model.last.ops[0].where == "folded into op 1"
    lines = list_ops(model.data)
    assert "folded into op 1" in lines[1] and lines[2].split()[1].endswith("CONV_2D")


@pytest.mark.parametrize("axes, keep", [([1, 2], False), ([1, 2], True), ([-1], False),
                                        ([0, 1, 2, 3], True)])
def test_mean(axes, keep):
    rng = np.random.default_rng(3)
    for s_out, zp_out in ((0.05, 3), (0.0123, -100), (0.2, 40)):
        mw = ModelWriter()
        x = mw.input((1, 5, 7, 6), 0.05, -4)
        _check(mw.build(mw.mean(x, axes, s_out, zp_out, keep)), (1, 5, 7, 6), rng)


@pytest.mark.parametrize("op", ["logistic", "tanh"])
@pytest.mark.parametrize("scale, zp", [(0.1, 0), (0.03125, -128), (0.0078, 17), (0.9, 100)])
def test_logistic_and_tanh_every_input(op, scale, zp):
    mw = ModelWriter()
    x = mw.input((1, 256), scale, zp)
    y = getattr(mw, op)(x)
    every = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 256)
    _check(mw.build(y), (1, 256), None, x=every)


@pytest.mark.parametrize("op", ["mul", "sub"])
@pytest.mark.parametrize("activation", ["NONE", "RELU6"])
def test_mul_and_sub(op, activation):
    rng = np.random.default_rng(4)
    mw = ModelWriter()
    x = mw.input((1, 4, 4, 3), 0.07, 6)
    c = mw.constant(rng.integers(-128, 128, (1, 1, 1, 3)), 0.03, -11)
    a = getattr(mw, op)(x, c, 0.05, -2, activation)              # broadcast constant
    b = random_conv(mw, x, rng, 3, k=1)
    y = getattr(mw, op)(a, b, 0.11, 9, activation)               # two activations
    _check(mw.build(y), (1, 4, 4, 3), rng)


def test_transpose_and_concatenation():
    rng = np.random.default_rng(5)
    mw = ModelWriter()
    x = mw.input((1, 3, 4, 5), 0.05, 2)                          # NCHW
    t = mw.transpose(x, (0, 2, 3, 1))                            # -> NHWC
    c = mw.constant(rng.integers(-128, 128, (1, 4, 5, 2)), 0.05, 2)
    y = mw.concatenation([t, c, t], axis=3)
    y = random_conv(mw, y, rng, 4, k=1)
    _check(mw.build(y), (1, 3, 4, 5), rng)


def test_keras_reshape_idiom_and_a_constant_gather_fold_at_load():
    rng = np.random.default_rng(6)
    mw = ModelWriter()
    x = mw.input((1, 40), 0.05, 1)
    y = random_conv(mw, mw.keras_reshape(x, (5, 8, 1)), rng, 3, k=1)
    table = mw.constant(rng.integers(-128, 128, (4, 3)), 0.04, -6)
    y = mw.add(y, mw.gather(table, [2, 0, 3, 3, 1, 0, 0, 2]), 0.08, 3)
    model = _check(mw.build(y), (1, 40), rng)
    assert list(model.folded.values()) == ["constant"] * 4      # SHAPE, STRIDED_SLICE, PACK,
    assert model.output_shape == (1, 5, 8, 3)                     # GATHER


def test_refusals_name_the_op_and_list_ops_of_a_refused_model():
    mw = ModelWriter()
    x = mw.input((1, 8), 0.05, 4)
    y = mw.op("EXP", [x], (1, 8), 0.05, 4)
    y = mw.op("FLOOR", [y], (1, 8), 0.05, 4)
    data = mw.build(mw.op("EXP", [y], (1, 8), 0.05, 4))
    lines = list_ops(data)
    assert [ln.split()[-1] for ln in lines[1:4]] == ["unsupported"] * 3
    assert lines[-1].startswith("refused: unsupported ops: EXP (2), FLOOR (1); ")
    mw = ModelWriter()
    x = mw.input((1, 8), 0.05, 4)
    with pytest.raises(UnsupportedModel, match="op 0 LOGISTIC: the output zero point must be "
                                               "-128, not 0"):
        TFLiteModel(mw.build(mw.op("LOGISTIC", [x], (1, 8), 1 / 256, 0)))


def test_depthwise_macs_are_the_models_own():
    rng = np.random.default_rng(7)
    mw = ModelWriter()
    x = mw.input((1, 6, 6, 4), 0.05, 0)
    s_w, bias, s_out, zp = random_layer(rng, 8, s_in=x.scale)
    y = mw.depthwise_conv2d(x, rng.integers(-127, 128, (1, 3, 3, 8)), bias, s_w, s_out, zp)
    model = _check(mw.build(y), (1, 6, 6, 4), rng, samples=2)
    (op,) = model.last.ops
    assert op.shape == (72, 36, 8)                               # block-diagonal K = 9 x 4
    assert op.macs == 2 * 36 * 8 * 9 == op.shape[0] * op.shape[1] * op.shape[2] // 4
    assert "total: 2592 model MACs per sample on the array (10368 in its GEMMs" in \
        model.describe()[-1]


def _refused(build, match):
    mw = ModelWriter()
    x = mw.input((1, 4, 4, 2), 0.05, 1)
    with pytest.raises(UnsupportedModel, match=match):
        TFLiteModel(mw.build(build(mw, x)))


def test_what_the_new_ops_refuse():
    rng = np.random.default_rng(8)
    other = lambda mw: mw.constant(rng.integers(-128, 128, (1, 4, 4, 2)), 0.07, 1)  # noqa: E731
    _refused(lambda mw, x: mw.concatenation([x, other(mw)], axis=3),
             "op 0 CONCATENATION: input 1 and the output must have the same quantization")
    _refused(lambda mw, x: mw.transpose(x, (0, 1, 1, 3)),
             r"op 0 TRANSPOSE: \[0, 1, 1, 3\] is no permutation of 4 axes")
    _refused(lambda mw, x: mw._simple("MEAN", [x.tensor, mw._int32([5])], (1, 4, 4, 2), 0.05, 1,
                                      mw._options("Reducer", keepDims=True)),
             r"op 0 MEAN: axes \[5\] out of range")
    _refused(lambda mw, x: mw.pad(x, [(0, 0), (-1, 0), (0, 0), (0, 0)]),
             "op 0 PAD: negative padding")
    _refused(lambda mw, x: mw._simple("MUL", [x.tensor, mw.constant(np.ones(3), 0.1, 0).tensor],
                                      (1, 4, 4, 2), 0.1, 0),
             r"op 0 MUL: shapes \(1, 4, 4, 2\) and \(3,\) do not broadcast")
    _refused(lambda mw, x: mw._simple("STRIDED_SLICE", [x.tensor] + [mw._int32([0, 0, 0, 0])]
                                      + [mw._int32([1, 2, 2, 2])] * 2, (1, 2, 2, 2), 0.05, 1),
             r"op 0 STRIDED_SLICE: only constant inputs are supported \(folded at load time\)")
