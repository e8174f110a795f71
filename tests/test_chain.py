"""Chains of layers (``compile_chain``, ``chain_reference``, ``tpugen.chain.run_layers``) on the
golden model against NumPy: activations stay on chip for any R x C, host round trips only
where the unified buffer cannot hold them."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpugen import Accelerator, ResultMismatch
from tpugen.chain import run_layers
from tpugen.compiler import ChainLayer, compile_chain
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.ideal_cycles import ideal_cycles
from tpugen.sim.machine import Machine
from tpugen.sim.model import wrap
from tpugen.sim.reference import chain_reference
from tpugen.sim.requant import QuantParams, requantize
from tpugen.tflite.lowering import GemmLayer

CONFIGS = [
    Config(rows=1, cols=1),
    Config(rows=4, cols=4, weight_fifo_depth=1),
    Config(rows=3, cols=5, ub_rows=64, acc_rows=16),
    Config(rows=5, cols=3, acc_width=20),
    Config(rows=8, cols=2, ub_rows=40, acc_rows=8, quant_sets=2),
    Config(rows=2, cols=7, ub_rows=48, acc_rows=6, weight_fifo_depth=2),
]


def numpy_chain(config, X, layers, in_zp=0):
    """The chain by the formula, independent of the compiler's code: each layer
    ``requantize(wrap((x - zp) @ W))`` (TFLite's int32 arithmetic when acc_width >= 32), the
    zero point the previous layer's ``out_zp``; the last layer's raw sums when it has no
    parameters."""
    x = np.asarray(X, np.int64)
    zp = in_zp
    for W, q in layers:
        W = np.asarray(W, np.int64)
        acc = wrap(x @ W, config.acc_width)
        if q is None:
            return acc
        x = requantize(wrap(acc - zp * W.sum(axis=0), 32), q)
        zp = q.out_zp
    return x


def random_layers(rng, sizes, last_int8=True):
    """Layers K_i x K_{i+1} with per-channel parameters that spread their sums over int8."""
    layers = []
    for i, (k, n) in enumerate(zip(sizes, sizes[1:], strict=False)):
        W = rng.integers(-128, 128, (k, n))
        last = i == len(sizes) - 2
        if last and not last_int8:
            layers.append((W, None))
            continue
        e = -int(np.ceil(np.log2(k * 128 * 128 / 127)))
        q = QuantParams(bias=rng.integers(-999, 999, n), multiplier=rng.integers(1 << 30, 1 << 31,
                                                                                n),
                        shift=rng.integers(e - 1, e + 3, n), out_zp=int(rng.integers(-20, 20)),
                        act_min=int(rng.choice([-128, -20])))
        layers.append((W, q))
    return layers


def run(config, compiled):
    r = Machine(config).run(compiled.program)
    assert r.error == isa.Cause.NONE and r.host_in_left == 0
    return compiled.decode(r)


def ops(program):
    return [isa.Op(s.fields["op"]).name for s in program]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(CONFIGS), M=st.integers(1, 20),
       sizes=st.lists(st.integers(1, 24), min_size=2, max_size=5),
       last_int8=st.booleans(), seed=st.integers(0, 2**32 - 1), in_zp=st.integers(-128, 127))
def test_chain_random(config, M, sizes, last_int8, seed, in_zp):
    rng = np.random.default_rng(seed)
    X = rng.integers(-128, 128, (M, sizes[0]))
    layers = random_layers(rng, sizes, last_int8)
    c = compile_chain(config, X, layers, in_zp)
    got, _ = c.run(lambda p: Machine(config).run(p))
    expect = numpy_chain(config, X, layers, in_zp)
    assert np.array_equal(got, expect)
    assert np.array_equal(got, chain_reference(config, X, layers, in_zp))
    assert [p.shape for p in c.layers] == [(M, k, n) for k, n in zip(sizes, sizes[1:],
                                                                     strict=False)]


def _layer_of_matmuls(c, M):
    """Per MATMUL of a one-stage chain program, the layer it belongs to."""
    mb = c.stage(0).plan["mb"]
    per_block = []
    for li, p in enumerate(c.layers):
        per_block += [li] * (p.kt * p.nt)
    return per_block * -(-M // mb)


@pytest.mark.parametrize("config", [Config(rows=4, cols=4), Config(rows=3, cols=5),
                                    Config(rows=8, cols=2)], ids=lambda c: c.name)
@pytest.mark.parametrize("depth", [2, 3])
def test_no_host_traffic_between_layers(config, depth):
    """One m-block: the program reads X and the weights, writes only the last layer's output,
    and between the first layer's last MATMUL and the last layer's first MATMUL there is no
    READ_HOST or WRITE_HOST at all."""
    rng = np.random.default_rng(depth)
    sizes = [19, 23, 13, 9][:depth + 1]
    X = rng.integers(-128, 128, (6, sizes[0]))
    layers = random_layers(rng, sizes)
    c = compile_chain(config, X, layers, 3)
    assert c.stages == 1
    assert [(p.input, p.output) for p in c.layers] == \
        [("host", "chip")] + [("chip", "chip")] * (depth - 2) + [("chip", "host")]
    got = run(config, c)
    assert np.array_equal(got, numpy_chain(config, X, layers, 3))
    names = ops(c.program)
    mm = [i for i, n in enumerate(names) if n == "MATMUL"]
    owner = _layer_of_matmuls(c, 6)
    last_of_first = mm[max(j for j, li in enumerate(owner) if li == 0)]
    first_of_last = mm[min(j for j, li in enumerate(owner) if li == depth - 1)]
    between = names[last_of_first:first_of_last]
    assert "READ_HOST" not in between and "WRITE_HOST" not in between
    P = -(-config.cols // config.rows)
    assert names.count("ACTIVATE") >= P * sum(p.nt for p in c.layers[:-1])
    # host-in: X (once), weights and parameter sets; host-out: the output and SYNC only
    fields = [s.fields for s in c.program]
    x_rows = sum(f["n"] for f in fields if f["op"] == isa.Op.READ_HOST)
    assert x_rows == 6 * -(-sizes[0] // config.rows)
    n_last = -(-sizes[-1] // config.cols)
    assert c.host_out_beats == 6 * n_last * P + 1


def test_many_m_blocks_keep_activations_on_chip():
    """Small buffers: several m-blocks, each through all three layers; still no hidden value
    goes to the host (host-out = the output) or comes from it (host-in = X, weights, sets)."""
    config = Config(rows=4, cols=4, ub_rows=40, acc_rows=8)
    rng = np.random.default_rng(8)
    sizes = [9, 10, 7, 6]
    X = rng.integers(-128, 128, (30, 9))
    layers = random_layers(rng, sizes)
    c = compile_chain(config, X, layers)
    plan = c.stage(0).plan
    assert plan["mb"] < 30 and c.stages == 1
    got = run(config, c)
    assert np.array_equal(got, numpy_chain(config, X, layers))
    host_in = sum(s.beats for s in c.program)
    fields = [s.fields for s in c.program]
    tiles = sum(f["n"] for f in fields if f["op"] == isa.Op.READ_WEIGHTS)
    x_rows = sum(f["n"] for f in fields if f["op"] == isa.Op.READ_HOST)
    sets = sum(f["n"] for f in fields if f["op"] == isa.Op.READ_QUANT)
    assert host_in == tiles * 4 + x_rows + sets * isa.QUANT_BEATS
    assert x_rows % (30 * 3) == 0                   # X, perhaps streamed more than once
    assert c.host_out_beats == 30 * 2 + 1


@pytest.mark.parametrize("config", [Config(rows=3, cols=5), Config(rows=2, cols=7),
                                    Config(rows=8, cols=2), Config(rows=5, cols=3)],
                         ids=lambda c: c.name)
def test_non_square_relayout(config):
    """With R != C a hidden n-tile is ceil(C/R) k-tiles of the next layer (R < C) or one
    k-tile with C of its R lanes used (R > C)."""
    rng = np.random.default_rng(config.rows * 10 + config.cols)
    X = rng.integers(-128, 128, (7, 11))
    layers = random_layers(rng, [11, 17, 5])
    c = compile_chain(config, X, layers, -4)
    R, C = config.rows, config.cols
    nt = -(-17 // C)
    assert c.layers[1].kt == nt * -(-C // R)
    assert np.array_equal(run(config, c), numpy_chain(config, X, layers, -4))


def test_host_round_trip_when_a_hidden_layer_does_not_fit():
    """A hidden layer of 40 channels on a 2 x 2 array needs 20 UB rows per row of X: with 8
    there is no room, so the chain is cut after it; the second program takes the first one's
    output."""
    config = Config(rows=2, cols=2, ub_rows=8, acc_rows=4)
    rng = np.random.default_rng(3)
    X = rng.integers(-128, 128, (5, 6))
    layers = random_layers(rng, [6, 3, 40, 4])
    c = compile_chain(config, X, layers)
    assert c.stages == 2
    assert [(p.input, p.output, p.stage) for p in c.layers] == \
        [("host", "chip", 0), ("chip", "host", 0), ("host", "host", 1)]
    with pytest.raises(ValueError, match="2 programs .* use run"):
        c.decode(np.zeros((1, 2)))
    assert c.stage(1) is None
    got, results = c.run(lambda p: Machine(config).run(p))
    assert len(results) == 2 and c.stage(1) is not None
    assert np.array_equal(got, numpy_chain(config, X, layers))


def test_layer_forms_and_zero_points():
    """Tuples and ChainLayer (the importer's GemmLayer is the same type) give the same chain;
    a layer's own in_zp overrides the previous out_zp."""
    assert GemmLayer is ChainLayer
    rng = np.random.default_rng(4)
    config = Config(rows=4, cols=4)
    X = rng.integers(-128, 128, (5, 8))
    (W1, q1), (W2, q2) = random_layers(rng, [8, 6, 3])
    a = compile_chain(config, X, [(W1, q1), (W2, q2)], 7)
    b = compile_chain(config, X, [ChainLayer(W1, q1, 7), ChainLayer(W2, q2)])
    g = compile_chain(config, X, [GemmLayer(W1.astype(np.int8), q1, 7),
                                  GemmLayer(W2.astype(np.int8), q2, q1.out_zp)])
    assert a.program == b.program == g.program
    other = compile_chain(config, X, [(W1, q1, 7), (W2, q2, q1.out_zp + 1)])
    got = run(config, other)
    h = numpy_chain(config, X, [(W1, q1)], 7)
    assert np.array_equal(got, numpy_chain(config, h, [(W2, q2)], q1.out_zp + 1))


@pytest.mark.parametrize("layers, kw, exc, match", [
    ("W", {}, TypeError, "layers must be a list"),
    ([], {}, ValueError, "at least one layer"),
    ([(np.ones((3, 2), int),)], {}, ValueError, r"layers\[0\] must be \(weights, params\)"),
    ([object()], {}, TypeError, r"layers\[0\] must be a ChainLayer"),
    ([(np.ones((3, 2), int), None), (np.ones((2, 2), int), None)], {}, ValueError,
     r"layers\[0\].params must be QuantParams"),
    ([(np.ones((3, 2), int), "q")], {}, TypeError, r"layers\[0\].params must be QuantParams"),
    ([(np.ones((3, 2), int), QuantParams(bias=[1, 2, 3]))], {}, ValueError, "3 channels"),
    ([(np.ones((3, 2), int), QuantParams()), (np.ones((3, 2), int), None)], {}, ValueError,
     r"layers\[0\] gives 2 columns but layers\[1\].weights has 3 rows"),
    ([(np.ones((3, 2), int), None, 5)], {}, ValueError, r"in_zp must be 0 for int32"),
    ([(np.ones((3, 2), int), QuantParams(), 300)], {}, ValueError, r"layers\[0\].in_zp"),
    ([(np.ones((3, 2), int), QuantParams())], dict(in_zp=-129), ValueError, "in_zp"),
    ([(np.full((3, 2), 200), QuantParams())], {}, ValueError, r"layers\[0\].weights values"),
    ([(np.ones((4, 2), int), QuantParams())], {}, ValueError, "X's columns"),
])
def test_chain_validation(layers, kw, exc, match):
    with pytest.raises(exc, match=match):
        compile_chain(Config(rows=2, cols=2), np.ones((2, 3), int), layers, **kw)


def test_run_layers_on_the_model():
    rng = np.random.default_rng(5)
    acc = Accelerator(Config(rows=4, cols=4, ub_rows=64, acc_rows=16), "model")
    X = rng.integers(-128, 128, (9, 12)).astype(np.int8)
    layers = [GemmLayer(W.astype(np.int8), q, zp) for (W, q), zp in
              zip(random_layers(rng, [12, 10, 6]), (3, -2), strict=True)]
    y, report = run_layers(acc, X, layers)
    assert y.dtype == np.int8
    assert np.array_equal(y, chain_reference(acc.config, X, layers))
    assert report.passed and report.backend == "model" and report.cycles is None
    assert [r.shape for r in report.layers] == [(9, 12, 10), (9, 10, 6)]
    assert [r.ideal for r in report.layers] == [ideal_cycles(acc.config, 9, 12, 10),
                                                ideal_cycles(acc.config, 9, 10, 6)]
    assert all(r.cycles is None and r.matmuls > 0 for r in report.layers)
    assert report.lines()[-1] == "PASS"
    # int32 sums from a last layer without parameters
    y, _ = run_layers(acc, X, [(layers[0].weights, layers[0].params, 3),
                               (rng.integers(-128, 128, (10, 3)), None)])
    assert y.dtype == np.int32


class _Faulty:
    """An accelerator whose backend flips one output value, and counts cycles."""

    def __init__(self, config):
        self.config = config
        self.backend_name = "faulty"
        self.inner = Accelerator(config, "model")

    def run(self, program):
        r = self.inner.run(program)
        r.host_out = r.host_out.copy()
        r.host_out[0, 0] += 1
        r.cycles = 1000
        return r


def test_run_layers_raises_on_a_wrong_result():
    rng = np.random.default_rng(6)
    X = rng.integers(-128, 128, (3, 5))
    layers = random_layers(rng, [5, 4, 3])
    with pytest.raises(ResultMismatch, match="differ from the golden model") as e:
        run_layers(_Faulty(Config(rows=2, cols=2)), X, layers)
    assert e.value.first[:2] == (0, 0)
    assert e.value.report.cycles == 1000 and not e.value.report.passed
    with pytest.raises(TypeError, match="accelerator must be an Accelerator"):
        run_layers(Config(rows=2, cols=2), X, layers)


def test_run_layers_with_a_round_trip_gives_per_program_cycles():
    """Cycles per layer only where a layer ran alone in its program."""
    config = Config(rows=2, cols=2, ub_rows=8, acc_rows=4)
    rng = np.random.default_rng(3)
    X = rng.integers(-128, 128, (5, 6))
    layers = random_layers(rng, [6, 3, 40, 4])

    class Counting(_Faulty):
        def run(self, program):
            r = self.inner.run(program)
            r.cycles = len(program)
            return r

    acc = Counting(config)
    y, report = run_layers(acc, X, layers)
    assert np.array_equal(y, numpy_chain(config, X, layers))
    assert len(report.results) == 2
    assert [r.cycles is None for r in report.layers] == [True, True, False]
    assert report.layers[2].cycles == report.results[1].cycles
    assert report.cycles == sum(r.cycles for r in report.results)


@pytest.mark.parametrize("args, exc, match", [
    ((np.ones((3, 2), float), QuantParams()), ValueError, "weights must be an integer"),
    ((np.full((3, 2), 128), QuantParams()), ValueError, "weights values must be in"),
    ((np.ones((3, 2), int), "q"), TypeError, "params must be QuantParams or None"),
    ((np.ones((3, 2), int), QuantParams(bias=[1, 2, 3])), ValueError, "3 channels"),
    ((np.ones((3, 2), int), QuantParams(), 128), ValueError, "in_zp must be in -128..127"),
    ((np.ones((3, 2), int), None, 4), ValueError, "in_zp must be 0 for int32 sums"),
])
def test_chain_layer_checks_its_fields(args, exc, match):
    """A ChainLayer is checked when made (the importer's layers included)."""
    with pytest.raises(exc, match=match):
        ChainLayer(*args)
