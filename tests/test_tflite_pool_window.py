"""AVERAGE_POOL_2D on the window walk (``tflite.pool_lowering``, ``tflite.window_chains``): a
pool between convolutions and the global pool before a flatten and a FULLY_CONNECTED join the
convolutions' one program, bit for bit against the TFLite Micro interpreter; a pool whose
count changes at the edges stays on the host, named so, and stays exact."""

import numpy as np
import pytest
from tflite_random import random_conv, random_layer

import tpugen
from tpugen.fpga.flow.boards import get_board
from tpugen.hdl import isa
from tpugen.tflite import TFLiteModel
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro
from tpugen.tflite.pool_lowering import lower_average_pool
from tpugen.tflite.writer import ModelWriter


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


def pooled_net(rng, size=12, cin=3, mid=6, out=10, pool_activation="NONE") -> bytes:
    """CONV 3x3 SAME (RELU) -> AVERAGE_POOL 2x2 s2 VALID -> CONV 3x3 SAME -> global
    AVERAGE_POOL (VALID, stride 6: the walk takes strides up to 15 and equal, as the MLPerf
    keyword spotter's 25 x 5 pool is not) -> RESHAPE -> FULLY_CONNECTED -> SOFTMAX."""
    mw = ModelWriter()
    x = mw.input((1, size, size, cin), 0.04, int(rng.integers(-128, 128)))
    y = random_conv(mw, x, rng, mid, k=3, stride=1, activation="RELU")
    y = mw.average_pool(y, 2, 2, "VALID", activation=pool_activation)
    y = random_conv(mw, y, rng, mid + 3, k=3, stride=1)
    y = mw.average_pool(y, y.shape[1], y.shape[1], "VALID")     # global; its stride: any
    y = mw.reshape(y, (1, y.shape[3]))
    s_w, bias, s_out, zp = random_layer(rng, out, s_in=y.scale)
    y = mw.fully_connected(y, rng.integers(-127, 128, (out, y.shape[1])), bias, s_w, s_out, zp)
    return mw.build(mw.softmax(y))


def _run(data, x, config):
    model = TFLiteModel(data)
    acc = _Recorder(config)
    got = model.run(x, acc)
    problem = first_mismatch(got, run_tflite_micro(data, x, stacked=True))
    assert problem is None, problem
    return model, acc


CONFIGS = {
    "4x4": tpugen.Config(rows=4, cols=4, window=1),
    "8x4": tpugen.Config(rows=8, cols=4, window=1),
    "ulx3s": get_board("ulx3s").config.replace(window=1),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("pool_activation", ["NONE", "RELU6"])
def test_pools_join_the_program(name, pool_activation):
    rng = np.random.default_rng(len(name) + len(pool_activation))
    data = pooled_net(rng, pool_activation=pool_activation)
    x = rng.integers(-128, 128, (3, 1, 12, 12, 3)).astype(np.int8)
    model, acc = _run(data, x, CONFIGS[name])
    (program,) = acc.programs                  # convolutions, pools and the FC: one program
    ops = {isa.decode(s.word)["op"] for s in program}
    assert isa.Op.MATMUL in ops and isa.Op.WRITE_HOST in ops
    by_name = {}
    for o in model.last.ops:
        by_name.setdefault(o.name, []).append(o.where)
    assert len(by_name["AVERAGE_POOL_2D"]) == 2
    for where in by_name["AVERAGE_POOL_2D"] + by_name["CONV_2D"]:
        assert where.endswith("window walk"), where
    assert by_name["SOFTMAX"] == ["host"]


def test_pools_stay_host_ops_without_the_window_walk():
    rng = np.random.default_rng(3)
    data = pooled_net(rng)
    x = rng.integers(-128, 128, (2, 1, 12, 12, 3)).astype(np.int8)
    model, acc = _run(data, x, tpugen.Config(rows=4, cols=4))
    pools = [o.where for o in model.last.ops if o.name == "AVERAGE_POOL_2D"]
    assert pools == ["host", "host"]


def test_a_pool_padded_at_the_edges_stays_on_the_host():
    """SAME padding over 7 pixels with a 2x2 window: the last window counts 1 or 2 values, so
    the pool is no identity GEMM with one divisor; the host computes it, exactly."""
    rng = np.random.default_rng(5)
    mw = ModelWriter()
    x = mw.input((1, 7, 7, 2), 0.03, 3)
    y = random_conv(mw, x, rng, 5, k=3, stride=1, activation="RELU")
    pooled = mw.average_pool(y, 2, 2, "SAME")
    y = random_conv(mw, pooled, rng, 4, k=1, stride=1)
    data = mw.build(y)
    model = TFLiteModel(data)
    op = next(o for o in model.graph.ops if o.name == "AVERAGE_POOL_2D")
    assert lower_average_pool(model.graph, op, (1, 7, 7, 5)) == \
        "SAME padding changes the count at the edges"
    xs = rng.integers(-128, 128, (2, 1, 7, 7, 2)).astype(np.int8)
    model, _ = _run(data, xs, CONFIGS["4x4"])
    assert [o.where for o in model.last.ops if o.name == "AVERAGE_POOL_2D"] == ["host"]


def test_lowered_pool_is_an_identity_gemm():
    """The lowered pool: K = KH * KW * C rows of a block-diagonal ones matrix, bias 0 and zero
    point 0 in its parameters, the MACs its adds (count * C per output pixel)."""
    rng = np.random.default_rng(8)
    data = pooled_net(rng)
    model = TFLiteModel(data)
    op = next(o for o in model.graph.ops if o.name == "AVERAGE_POOL_2D")
    gemm = lower_average_pool(model.graph, op, (1, 12, 12, 6))
    w = gemm.layer.weights.reshape(4, 6, 6)
    assert all(np.array_equal(w[t], np.eye(6, dtype=np.int8)) for t in range(4))
    assert gemm.out_shape == (1, 6, 6, 6) and gemm.macs == 36 * 4 * 6
    p = gemm.layer.params
    assert np.all(np.asarray(p.bias) == 0) and p.out_zp == 0
    last = [o for o in model.graph.ops if o.name == "AVERAGE_POOL_2D"][1]
    glob = lower_average_pool(model.graph, last, (1, 6, 6, 9))
    assert (glob.wy.stride, glob.wx.stride, glob.out_shape) == (1, 1, (1, 1, 1, 9))
    with pytest.raises(ValueError, match="op must be AVERAGE_POOL_2D, not 'CONV_2D'"):
        lower_average_pool(model.graph, model.graph.ops[0], (1, 12, 12, 3))
