"""Imported int8 ``.tflite`` models against the TFLite Micro interpreter (the external oracle):
random models written with ``tpugen.tflite.writer``, run by ``tpugen.tflite`` on the ``model``
backend (the golden model executing the compiled programs, each checked against NumPy by
``tpugen.chain.run_layers``), compared bit for bit. The RTL backends:
``test_tflite_backends.py``."""

import numpy as np
import pytest
from tflite_random import random_conv, random_fc, random_layer, random_zp

import tpugen
from tpugen.sim.requant import ACTIVATIONS, INT32_MAX
from tpugen.tflite import TFLiteModel, UnsupportedModel
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro
from tpugen.tflite.writer import ModelWriter

ACC = tpugen.Accelerator(tpugen.Config(rows=4, cols=4), backend="model")
#: A non-square array whose small buffers make chains of wide layers take host round trips.
ACC_3X5 = tpugen.Accelerator(tpugen.Config(rows=3, cols=5, ub_rows=24, acc_rows=8),
                             backend="model")


def _check(data: bytes, shape, rng, samples=4, dtype=np.int8, acc=ACC) -> TFLiteModel:
    """Run ``samples`` random inputs stacked and one alone on ``acc``; both bit-exact."""
    model = TFLiteModel(data)
    if dtype == np.int8:
        x = rng.integers(-128, 128, (samples,) + tuple(shape)).astype(np.int8)
        x[0] = -128
    else:
        x = rng.normal(0, 4, (samples,) + tuple(shape)).astype(np.float32)
    got = model.run(x, acc)
    expected = run_tflite_micro(data, x, stacked=True)
    assert first_mismatch(got, expected) is None, first_mismatch(got, expected)
    one = model.run(x[1], acc)
    assert first_mismatch(one, expected[1]) is None
    return model


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected(activation, per_channel):
    rng = np.random.default_rng(ACTIVATIONS.index(activation) * 2 + per_channel)
    for m, k, n in ((5, 13, 9), (3, 17, 7), (1, 6, 1)):
        mw = ModelWriter()
        x = mw.input((m, k), float(rng.uniform(0.01, 0.1)), random_zp(rng))
        y = random_fc(mw, x, rng, n, activation, per_channel)
        _check(mw.build(y), (m, k), rng)


def test_fully_connected_bias_wraps_and_no_bias():
    rng = np.random.default_rng(10)
    mw = ModelWriter()
    x = mw.input((3, 11), 0.05, -7)
    s_w = rng.uniform(0.001, 0.01, 5)
    bias = rng.integers(-100, 100, 5)
    bias[0] = INT32_MAX - 3                  # acc + bias wraps at 32 bits
    y = mw.fully_connected(x, rng.integers(-127, 128, (5, 11)), bias, s_w, 0.1, 3)
    y = mw.fully_connected(y, rng.integers(-127, 128, (4, 5)), None, 0.02, 0.1, -2)
    _check(mw.build(y), (3, 11), rng)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d(stride, padding, activation):
    rng = np.random.default_rng(stride * 100 + len(padding) * 10 + ACTIVATIONS.index(activation))
    mw = ModelWriter()
    x = mw.input((2, 9, 7, 3), float(rng.uniform(0.01, 0.1)), random_zp(rng))
    y = random_conv(mw, x, rng, 5, stride=stride, padding=padding, activation=activation)
    _check(mw.build(y), (2, 9, 7, 3), rng)


@pytest.mark.parametrize("k, stride, dilation", [(1, 1, 1), (1, 2, 1), (2, 1, 1), (5, 3, 1),
                                                 (3, 1, 2)])
def test_conv2d_kernel_sizes(k, stride, dilation):
    rng = np.random.default_rng(k * 10 + stride + 7 * dilation)
    for padding in ("SAME", "VALID"):
        mw = ModelWriter()
        x = mw.input((1, 10, 8, 6), 0.04, 11)
        y = random_conv(mw, x, rng, 7, k=k, stride=stride, padding=padding, dilation=dilation)
        _check(mw.build(y), (1, 10, 8, 6), rng)


@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_conv2d(multiplier, stride):
    rng = np.random.default_rng(multiplier * 10 + stride)
    for padding, activation in (("SAME", "RELU"), ("VALID", "RELU6")):
        mw = ModelWriter()
        x = mw.input((1, 7, 6, 3), 0.05, -20)
        cout = 3 * multiplier
        s_w, bias, s_out, zp = random_layer(rng, cout, s_in=x.scale)
        y = mw.depthwise_conv2d(x, rng.integers(-127, 128, (1, 3, 3, cout)), bias, s_w, s_out,
                                zp, stride=stride, padding=padding, activation=activation)
        _check(mw.build(y), (1, 7, 6, 3), rng)


def _chain_numbers(model):
    return [line.split("chain")[1].split()[0].rstrip(",") for line in model.describe()
            if "chain" in line]


def test_two_and_three_layer_fc_chains():
    rng = np.random.default_rng(20)
    for layers in (2, 3):
        mw = ModelWriter()
        y = mw.input((6, 19), 0.03, 5)
        for i, n in enumerate((11, 9, 5)[:layers]):
            y = random_fc(mw, y, rng, n, ACTIVATIONS[i % 4])
        model = _check(mw.build(y), (6, 19), rng)
        assert _chain_numbers(model) == ["1"] * layers      # activations stay on chip


def test_chain_with_a_host_round_trip_on_small_buffers():
    """A hidden layer too wide for the unified buffer: the chain runs as two programs (the
    compiler's host round trip), still bit-exact; on a non-square array."""
    rng = np.random.default_rng(23)
    mw = ModelWriter()
    y = mw.input((7, 10), 0.03, -3)
    for n, act in ((70, "RELU"), (6, "RELU6"), (4, "NONE")):
        y = random_fc(mw, y, rng, n, act)
    model = _check(mw.build(y), (7, 10), rng, acc=ACC_3X5)
    (chain,) = model.last.chains
    assert chain.ops == [0, 1, 2] and chain.programs == 2
    assert [o.where for o in model.last.ops] == ["model, chain 1", "model, chain 1",
                                                  "model, chain 1, on chip"]


def test_conv_conv_fc_without_reshape():
    """FULLY_CONNECTED flattens the NHWC conv output itself ([prod / K, K])."""
    rng = np.random.default_rng(21)
    mw = ModelWriter()
    x = mw.input((1, 9, 9, 3), 0.05, -9)
    y = random_conv(mw, x, rng, 5, stride=2, padding="SAME", activation="RELU")
    y = random_conv(mw, y, rng, 6, stride=1, padding="VALID", activation="RELU6")
    k = int(np.prod(y.shape))
    s_w, bias, s_out, zp = random_layer(rng, 4, s_in=y.scale)
    y = mw.fully_connected(y, rng.integers(-127, 128, (4, k)), bias, s_w, s_out, zp)
    model = _check(mw.build(y), (1, 9, 9, 3), rng)
    assert _chain_numbers(model) == ["1", "2", "3"]         # im2col on the host between


def test_pointwise_convs_and_fc_chain_on_chip():
    """1x1 stride-1 convolutions and a per-pixel FULLY_CONNECTED read the previous GEMM's
    output matrix unchanged: one chain."""
    rng = np.random.default_rng(22)
    mw = ModelWriter()
    x = mw.input((1, 5, 4, 6), 0.05, 3)
    y = random_conv(mw, x, rng, 7, k=3, stride=1, padding="SAME", activation="RELU")
    y = random_conv(mw, y, rng, 9, k=1, activation="RELU6")
    y = random_fc(mw, y, rng, 5, keep_num_dims=True)
    model = _check(mw.build(y), (1, 5, 4, 6), rng)
    assert _chain_numbers(model) == ["1", "1", "1"]
    model.run(np.zeros((1, 5, 4, 6), np.int8), ACC)
    assert [o.where for o in model.last.ops] == ["model, chain 1", "model, chain 1, on chip",
                                                  "model, chain 1, on chip"]
    assert [o.shape for o in model.last.ops] == [(20, 54, 7), (20, 7, 9), (20, 9, 5)]


@pytest.mark.parametrize("kind", ["max", "average"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pools(kind, padding):
    rng = np.random.default_rng(len(kind) + len(padding))
    for k, stride, activation in ((2, 2, "NONE"), (3, 2, "RELU"), (3, 1, "RELU6")):
        mw = ModelWriter()
        x = mw.input((2, 7, 9, 3), 0.05, -7)
        pool = mw.max_pool if kind == "max" else mw.average_pool
        y = pool(x, k, stride, padding, activation)
        _check(mw.build(y), (2, 7, 9, 3), rng)


@pytest.mark.parametrize("s_in, beta", [(0.01, 1.0), (0.05, 1.0), (0.2, 1.0), (1.0, 1.0),
                                        (4.0, 1.0), (0.1, 0.3)])
def test_softmax(s_in, beta):
    rng = np.random.default_rng(int(s_in * 100) + int(beta * 10))
    mw = ModelWriter()
    x = mw.input((100, 10), s_in, 3)
    _check(mw.build(mw.softmax(x, beta)), (100, 10), rng, samples=30)


@pytest.mark.parametrize("activation", ["NONE", "RELU", "RELU_N1_TO_1"])
def test_add_broadcast_constant_and_two_branches(activation):
    rng = np.random.default_rng(len(activation))
    mw = ModelWriter()
    x = mw.input((1, 5, 5, 4), 0.03, 3)
    c = mw.constant(rng.integers(-128, 128, (1, 1, 1, 4)), 0.07, -9)
    a = mw.add(x, c, 0.05, 2, activation)
    b = random_conv(mw, x, rng, 4, k=1)
    y = mw.add(a, b, 0.09, -5, activation)                  # two activations, one shape
    _check(mw.build(y), (1, 5, 5, 4), rng)


def test_quantize_dequantize_reshape_softmax_classifier():
    """A float-in, float-out classifier: QUANTIZE, CONV_2D, MAX_POOL_2D, RESHAPE,
    FULLY_CONNECTED, SOFTMAX, DEQUANTIZE; and an int8 -> int8 QUANTIZE."""
    rng = np.random.default_rng(30)
    mw = ModelWriter()
    x = mw.input((1, 8, 8, 1))
    q = mw.quantize(x, 0.03, -1)
    y = random_conv(mw, q, rng, 4, stride=1, activation="RELU")
    y = mw.max_pool(y, 2, 2)
    y = mw.reshape(y, (1, 64))
    y = random_fc(mw, y, rng, 10)
    y = mw.quantize(y, 0.11, 6)
    y = mw.softmax(y)
    y = mw.dequantize(y)
    model = _check(mw.build(y), (1, 8, 8, 1), rng, samples=8, dtype=np.float32)
    assert model.output_shape == (1, 10)


def test_unsupported_op_refused_in_one_line():
    mw = ModelWriter()
    x = mw.input((1, 8), 0.05, 4)
    y = mw.fully_connected(x, np.ones((3, 8)), None, 0.01, 0.1, 0)
    y = mw.op("EXP", [y], (1, 3), 1 / 128, 0)
    y = mw.op("SQRT", [y], (1, 3), 1 / 128, 0)
    y = mw.op("EXP", [y], (1, 3), 1 / 128, 0)
    with pytest.raises(UnsupportedModel) as e:
        TFLiteModel(mw.build(y))
    assert str(e.value).startswith("unsupported ops: EXP (2), SQRT (1); tpugen runs ")
    assert "\n" not in str(e.value)


def test_stride_zero_and_bad_inputs_refused():
    rng = np.random.default_rng(31)
    mw = ModelWriter()
    x = mw.input((1, 6, 6, 2), 0.05, 0)
    y = random_conv(mw, x, rng, 3)
    mw._ops[-1]._fb.builtinOptions.strideW = 0              # as hand-built models leave it
    with pytest.raises(UnsupportedModel, match="stride must be at least 1"):
        TFLiteModel(mw.build(y))
    mw = ModelWriter()
    x = mw.input((2, 5), 0.05, 0)
    model = TFLiteModel(mw.build(random_fc(mw, x, rng, 3)))
    with pytest.raises(ValueError, match=r"shape \(2, 5\)"):
        model.run(np.zeros((5, 2), np.int8), ACC)
    with pytest.raises(ValueError, match="dtype int8"):
        model.run(np.zeros((2, 5), np.int16), ACC)


def test_first_mismatch_finds_a_difference():
    a = np.zeros((2, 3), np.int8)
    b = a.copy()
    b[1, 2] = 5
    assert "index (1, 2)" in first_mismatch(a, b)
    assert "dtype" in first_mismatch(a, b.astype(np.int16))
    f = np.zeros(3, np.float32)
    assert first_mismatch(f, -f) is not None                # -0.0 is another bit pattern


@pytest.mark.parametrize("seed", range(12))
def test_random_models(seed):
    """Random stacks of 1-3 GEMM ops (FC, CONV_2D, DEPTHWISE_CONV_2D with random sizes,
    strides, paddings, activations, zero points), sometimes a pool, ADD or SOFTMAX; on a 4 x 4
    and a 3 x 5 array."""
    rng = np.random.default_rng(1000 + seed)
    mw = ModelWriter()
    shape = (int(rng.integers(1, 3)), int(rng.integers(3, 10)), int(rng.integers(3, 10)),
             int(rng.integers(1, 6)))
    y = mw.input(shape, float(rng.uniform(0.005, 0.2)), random_zp(rng))
    for _ in range(int(rng.integers(1, 4))):
        act = str(rng.choice(ACTIVATIONS))
        kind = rng.choice(["fc", "conv", "dw"] if len(y.shape) == 4 else ["fc"])
        if kind == "fc":
            y = random_fc(mw, y, rng, int(rng.integers(1, 12)), act, bool(rng.integers(2)))
        elif kind == "conv":
            k = int(rng.integers(1, 4))
            padding = "SAME" if k > min(y.shape[1:3]) else str(rng.choice(["SAME", "VALID"]))
            y = random_conv(mw, y, rng, int(rng.integers(1, 10)), k=k,
                      stride=int(rng.integers(1, 3)), padding=padding, activation=act)
        else:
            cout = y.shape[3] * int(rng.integers(1, 3))
            s_w, bias, s_out, zp = random_layer(rng, cout, s_in=y.scale)
            y = mw.depthwise_conv2d(y, rng.integers(-127, 128, (1, 3, 3, cout)), bias, s_w,
                                    s_out, zp, stride=int(rng.integers(1, 3)), padding="SAME",
                                    activation=act)
        if len(y.shape) == 4 and rng.random() < 0.3:
            y = mw.average_pool(y, 2, 1, "SAME") if rng.random() < 0.5 else \
                mw.add(y, y, float(rng.uniform(0.02, 0.2)), random_zp(rng), act)
    if rng.random() < 0.4:
        y = mw.softmax(y, float(rng.uniform(0.5, 2)))
    _check(mw.build(y), shape, rng, acc=ACC_3X5 if seed % 2 else ACC)


class _Counting:
    """The ``model`` backend with a cycle count per program (its instruction count)."""

    def __init__(self, config):
        self.config = config
        self.backend_name = "counting"
        self.inner = tpugen.Accelerator(config, "model")

    def run(self, program):
        result = self.inner.run(program)
        result.cycles = 10 * len(program)
        return result


def test_cycles_and_utilization_per_op_and_chain():
    """A layer alone in its program gets that program's cycles and utilization ideal / cycles;
    the layers of one program share the chain's cycles; the total is every chain's."""
    rng = np.random.default_rng(3)
    mw = ModelWriter()
    x = mw.input((1, 6, 6, 2), 0.05, 1)
    y = random_conv(mw, x, rng, 4, stride=2, activation="RELU")            # chain 1, alone
    s_w, bias, s_out, zp = random_layer(rng, 16, s_in=y.scale)
    y = mw.fully_connected(y, rng.integers(-127, 128, (16, 36)), bias, s_w, s_out, zp)
    y = random_fc(mw, y, rng, 8)                                           # chain 2, on chip
    y = mw.softmax(y)
    data = mw.build(y)
    model = TFLiteModel(data)
    acc = _Counting(ACC.config)
    x = rng.integers(-128, 128, (3, 1, 6, 6, 2)).astype(np.int8)
    got = model.run(x, acc)
    assert first_mismatch(got, run_tflite_micro(data, x, stacked=True)) is None
    report = model.last
    ops = report.ops
    assert [o.where for o in ops] == ["counting, chain 1", "counting, chain 2",
                                      "counting, chain 2, on chip", "host"]
    assert [o.shape for o in ops] == [(27, 18, 4), (3, 36, 16), (3, 16, 8), None]
    assert [o.ideal for o in ops[:3]] == [122, 108, 24]              # ceil(M*K*N / 16)
    assert ops[0].cycles is not None and ops[1].cycles is ops[2].cycles is None
    assert ops[0].utilization == 122 / ops[0].cycles
    assert [o.macs for o in ops] == [27 * 18 * 4, 3 * 36 * 16, 3 * 16 * 8, None]
    chains = report.chains
    assert [(c.number, c.ops, c.programs) for c in chains] == [(1, [0], 1), (2, [1, 2], 1)]
    assert chains[0].cycles == ops[0].cycles and chains[1].ideal == 132
    assert report.cycles == chains[0].cycles + chains[1].cycles
    lines = report.lines()
    assert f"{100 * 1944 / (16 * ops[0].cycles):.1f} %" in lines[1]      # model MACs
    assert f"{100 * 122 / ops[0].cycles:.1f} %" in lines[1]              # the GEMM's
    assert lines[2].split()[-3:] == ["1728", "-", "108"]
    assert lines[5].startswith(f"chain 2: ops 1, 2 in one program: 2112 MACs, "
                               f"{chains[1].cycles} cycles")
    assert report.macs == 4056
    assert report.model_utilization == 4056 / (16 * report.cycles)
    assert lines[-1].startswith(f"accelerator: counting backend, 4 x 4 array, 3 sample(s), "
                                f"4056 model MACs (1352 per sample): {report.cycles} cycles "
                                f"({report.cycles / 3:.0f} per sample)")
    model.run(x, ACC)
    assert model.last.cycles is None and model.last.ideal == 254
    assert "cycles not counted by the model backend" in model.last.lines()[-1]


@pytest.mark.parametrize("zp", [3, -5])
def test_quantize_ties_and_out_of_range(zp):
    """Halves round away from zero; values beyond int32 convert as the wheel's C cast does."""
    rng = np.random.default_rng(40)
    mw = ModelWriter()
    x = mw.input((1, 8))
    data = mw.build(mw.dequantize(mw.quantize(x, 0.02, zp)))
    edges = np.array([[[0.01, -0.01, 0.03, -0.03, 0.05, 1e9, -1e9, 2.55]]], np.float32)
    xs = np.concatenate([edges, rng.normal(0, 2, (30, 1, 8)).astype(np.float32)])
    got = TFLiteModel(data).run(xs, ACC)
    expected = run_tflite_micro(data, xs, stacked=True)
    assert first_mismatch(got, expected) is None, first_mismatch(got, expected)


def test_conv_without_bias_dilated_depthwise_and_keep_num_dims():
    rng = np.random.default_rng(41)
    mw = ModelWriter()
    x = mw.input((1, 9, 9, 3), 0.05, 2)
    y = mw.conv2d(x, rng.integers(-127, 128, (4, 3, 3, 3)), None, rng.uniform(0.001, 0.02, 4),
                  0.1, -3, stride=2, padding="VALID")
    y = mw.depthwise_conv2d(y, rng.integers(-127, 128, (1, 3, 3, 8)), rng.integers(-99, 99, 8),
                            0.01, 0.1, 1, padding="SAME", dilation=2)
    _check(mw.build(y), (1, 9, 9, 3), rng)
    mw = ModelWriter()
    x = mw.input((2, 3, 7), 0.05, 2)
    y = mw.fully_connected(x, rng.integers(-127, 128, (5, 7)), None, 0.01, 0.1, 3,
                           keep_num_dims=True)
    model = _check(mw.build(y), (2, 3, 7), rng)
    assert model.output_shape == (2, 3, 5)


def test_model_edges_must_be_int8_or_float32():
    mw = ModelWriter()
    x = mw.input((1, 4), 0.05, 0)
    x.tensor.dtype = mw._tfl.TensorType.INT32
    with pytest.raises(UnsupportedModel, match="the model input is INT32"):
        TFLiteModel(mw.build(mw.fully_connected(x, np.ones((2, 4)), None, 0.01, 0.1, 0)))
