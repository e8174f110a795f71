"""Convolution chains compiled onto unified-buffer planes (``compiler.planes``, the window
walk) on the golden model, against a direct NumPy convolution and TFLite's requantization
that know nothing of planes or walks."""

import numpy as np
import pytest

from tpugen.compiler import ChainLayer
from tpugen.compiler.planes import ConvLayer, PlaneMisfit, compile_planes
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine
from tpugen.sim.requant import QuantParams, requantize


def _params(rng, n):
    return QuantParams(bias=rng.integers(-3000, 3000, n), multiplier=rng.integers(
        1 << 29, 1 << 31, n), shift=rng.integers(-10, -6, n), out_zp=int(rng.integers(-20, 20)),
        act_min=-128, act_max=127)


def _conv_ref(x, conv: ConvLayer):
    """NHWC convolution with the zero point as padding, then requantization."""
    B, H, W, _ = x.shape
    kh, kw, _, cout = conv.weights.shape
    (sy, sx), (dy, dx), (top, left) = conv.stride, conv.dilation, conv.padding
    oh, ow = conv.out_hw
    big = np.full((B, H + 200, W + 200, x.shape[3]), conv.in_zp, dtype=np.int64)
    big[:, 100:100 + H, 100:100 + W] = x
    acc = np.zeros((B, oh, ow, cout), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = 100 - top + ky * dy, 100 - left + kx * dx
            win = big[:, y0:y0 + (oh - 1) * sy + 1:sy, x0:x0 + (ow - 1) * sx + 1:sx]
            acc += np.einsum("bhwc,co->bhwo", win - conv.in_zp, conv.weights[ky, kx])
    return requantize(acc, conv.params)


def _reference(x, layers):
    for layer in layers:
        if isinstance(layer, ConvLayer):
            x = _conv_ref(x, layer)
        else:
            flat = x.reshape(x.shape[0], -1)
            x = requantize((flat - layer.in_zp) @ layer.weights.astype(np.int64), layer.params)
    return x


def _conv(rng, cin, cout, k, stride, dilation, pad, in_hw, in_zp):
    kh, kw = k
    eh, ew = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    if pad == "SAME":
        oh, ow = -(-in_hw[0] // stride), -(-in_hw[1] // stride)
        top = max((oh - 1) * stride + eh - in_hw[0], 0) // 2
        left = max((ow - 1) * stride + ew - in_hw[1], 0) // 2
    else:
        oh, ow = (in_hw[0] - eh) // stride + 1, (in_hw[1] - ew) // stride + 1
        top = left = 0
    w = rng.integers(-127, 128, (kh, kw, cin, cout))
    return ConvLayer(w, _params(rng, cout), in_zp, (stride, stride), dilation, (top, left),
                     (oh, ow))


def _run(config, x, layers, pack=True):
    compiled = compile_planes(config, x, layers, pack=pack)
    res = Machine(config).run(compiled.program)
    assert res.error == isa.Cause.NONE
    return compiled, compiled.decode(res.host_out)


CFG = Config(rows=4, cols=4, ub_rows=512, acc_rows=128, window=1)
# (cin, cout, kernel, stride, dilation, padding, input h x w)
CASES = {
    "3x3_same": (3, 5, (3, 3), 1, (1, 1), "SAME", (6, 7)),
    "3x3_s2_same": (5, 6, (3, 3), 2, (1, 1), "SAME", (9, 8)),
    "5x3_valid": (2, 3, (5, 3), 1, (1, 1), "VALID", (8, 6)),
    "dilated": (4, 4, (3, 3), 1, (2, 1), "SAME", (7, 9)),
    "1x1": (6, 9, (1, 1), 1, (1, 1), "VALID", (4, 5)),
    "s3_valid": (1, 2, (4, 4), 3, (1, 1), "VALID", (13, 11)),
    "s2_c1_packed": (1, 3, (3, 3), 2, (1, 1), "SAME", (9, 10)),
    "s2_c1_dilated_packed": (1, 5, (3, 2), 2, (2, 3), "SAME", (10, 11)),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape", [(4, 4), (4, 8), (8, 4)])
@pytest.mark.parametrize("pack", [True, False])
def test_one_convolution_equals_numpy(name, shape, pack):
    cfg = CFG.replace(rows=shape[0], cols=shape[1])
    rng = np.random.default_rng(sum(map(ord, name)) + shape[0] * 3 + shape[1])
    cin, cout, k, s, d, pad, hw = CASES[name]
    conv = _conv(rng, cin, cout, k, s, d, pad, hw, int(rng.integers(-128, 128)))
    x = rng.integers(-128, 128, (2, *hw, cin))
    _, got = _run(cfg, x, [conv], pack)
    want = _reference(x, [conv])
    np.testing.assert_array_equal(got, want.reshape(-1, cout))


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("shape", [(4, 4), (8, 4), (4, 8)])
def test_conv_conv_fc_fc_one_program(batch, shape):
    """Two convolutions, a flatten into a fully connected layer and another: one program,
    one READ_HOST of each band of the input, no host round trip."""
    rng = np.random.default_rng(batch)
    cfg = CFG.replace(rows=shape[0], cols=shape[1])
    c1 = _conv(rng, 3, 6, (3, 3), 2, (1, 1), "SAME", (11, 10), -5)
    c2 = _conv(rng, 6, 5, (3, 3), 1, (1, 1), "VALID", c1.out_hw, c1.params.out_zp)
    k = c2.out_hw[0] * c2.out_hw[1] * 5
    f1 = ChainLayer(rng.integers(-127, 128, (k, 7)), _params(rng, 7), c2.params.out_zp)
    f2 = ChainLayer(rng.integers(-127, 128, (7, 6)), _params(rng, 6), f1.params.out_zp)
    x = rng.integers(-128, 128, (batch, 11, 10, 3))
    compiled, got = _run(cfg, x, [c1, c2, f1, f2])
    np.testing.assert_array_equal(got, _reference(x, [c1, c2, f1, f2]))
    ops = [isa.decode(s.word)["op"] for s in compiled.program]
    assert ops.count(isa.Op.WRITE_HOST) >= 1 and isa.Op.READ_HOST in ops


def test_small_buffer_streams_bands_and_refuses_what_cannot_fit():
    rng = np.random.default_rng(7)
    conv = _conv(rng, 1, 4, (3, 3), 1, (1, 1), "SAME", (30, 20), 3)
    x = rng.integers(-128, 128, (1, 30, 20, 1))
    cfg = CFG.replace(ub_rows=200)
    compiled, got = _run(cfg, x, [conv])
    np.testing.assert_array_equal(got, _reference(x, [conv]).reshape(-1, 4))
    assert compiled.plan["walk_px"][0] < 30 * 20
    with pytest.raises(PlaneMisfit, match="unified-buffer rows"):
        compile_planes(CFG.replace(ub_rows=40), x, [conv])
    with pytest.raises(PlaneMisfit, match="window=0"):
        compile_planes(CFG.replace(window=0), x, [conv])
    wide = _conv(rng, 1, 4, (1, 1), 1, (1, 1), "VALID", (1, 300), 0)
    with pytest.raises(PlaneMisfit, match="wide"):
        compile_planes(CFG, np.zeros((1, 1, 300, 1), dtype=np.int64), [wide])


@pytest.mark.parametrize("hw", [(12, 16), (11, 14)])
def test_packed_chain_fills_the_lanes(hw):
    """One channel through two stride-2 convolutions on a 16-row array: the input goes packed
    4 x 4 pixels a row (a fraction of the rows unpacked), the result the same."""
    cfg = Config(rows=16, cols=8, ub_rows=512, acc_rows=256, window=1)
    rng = np.random.default_rng(hw[0])
    c1 = _conv(rng, 1, 5, (3, 3), 2, (1, 1), "SAME", hw, -128)
    c2 = _conv(rng, 5, 7, (3, 3), 2, (1, 1), "SAME", c1.out_hw, c1.params.out_zp)
    f = ChainLayer(rng.integers(-127, 128, (c2.out_hw[0] * c2.out_hw[1] * 7, 9)),
                   _params(rng, 9), c2.params.out_zp)
    x = rng.integers(-128, 128, (3, *hw, 1))
    want = _reference(x, [c1, c2, f])
    beats = {}
    for pack in (True, False):
        compiled, got = _run(cfg, x, [c1, c2, f], pack)
        np.testing.assert_array_equal(got, want)
        beats[pack] = sum(isa.host_in_beats(isa.decode(s.word), cfg) for s in compiled.program
                          if isa.decode(s.word)["op"] == isa.Op.READ_HOST)
    # 12 x 16: both layers packed, 4 x 4 pixels a row; 11 x 14: the first one's output (6 x
    # 7) does not divide into 2 x 2 blocks, so only it is packed, 2 x 2 pixels a row.
    p = 4 if hw == (12, 16) else 2
    assert beats[False] == 3 * hw[0] * hw[1]
    assert beats[True] == 3 * -(-hw[0] // p) * -(-hw[1] // p)


def test_a_flatten_of_planes_over_255_pixels_reads_row_by_row():
    """A 16 x 17 output (272 pixels: no walk over the batch) flattened into a fully
    connected layer, for a batch: MATMULs of one row per image and k-tile."""
    rng = np.random.default_rng(11)
    c = _conv(rng, 2, 3, (3, 3), 1, (1, 1), "SAME", (16, 17), 9)
    f = ChainLayer(rng.integers(-127, 128, (16 * 17 * 3, 5)), _params(rng, 5),
                   c.params.out_zp)
    x = rng.integers(-128, 128, (2, 16, 17, 2))
    cfg = CFG.replace(ub_rows=2048)
    compiled, got = _run(cfg, x, [c, f])
    np.testing.assert_array_equal(got, _reference(x, [c, f]))
    ones = [s for s in compiled.program if isa.decode(s.word)["op"] == isa.Op.MATMUL
            and isa.decode(s.word)["n"] == 1]
    assert len(ones) == 2 * 272 * 2         # images x pixels x n-tiles (5 outputs on 4 columns)


def test_walks_split_output_rows_where_the_accumulators_are_short():
    """16 accumulator rows (walks of at most 8 pixels over one n-tile): the 11-pixel output
    rows split mid-row, the AT register's ox and ix start inside a row."""
    rng = np.random.default_rng(4)
    c1 = _conv(rng, 3, 4, (3, 3), 1, (2, 1), "SAME", (6, 11), 4)
    c2 = _conv(rng, 4, 3, (2, 3), 2, (1, 1), "VALID", c1.out_hw, c1.params.out_zp)
    x = rng.integers(-128, 128, (2, 6, 11, 3))
    compiled, got = _run(CFG.replace(acc_rows=16), x, [c1, c2])
    np.testing.assert_array_equal(got, _reference(x, [c1, c2]).reshape(-1, 3))
    assert compiled.plan["walk_px"][0] <= 8


def test_zero_weight_tiles_take_no_matmul():
    """A depthwise convolution as its block-diagonal kernel (12 channels, 4 x 4 array): per
    walk and kernel offset one MATMUL per plane (the n-tile holding its channels), 9 * 3,
    not 9 * 3 * 3; the result unchanged."""
    rng = np.random.default_rng(12)
    taps = rng.integers(-127, 128, (3, 3, 12))
    w = np.zeros((3, 3, 12, 12), dtype=np.int64)
    w[:, :, np.arange(12), np.arange(12)] = taps
    conv = ConvLayer(w, _params(rng, 12), 3, (1, 1), (1, 1), (1, 1), (5, 6))
    x = rng.integers(-128, 128, (2, 5, 6, 12))
    compiled, got = _run(CFG, x, [conv])
    np.testing.assert_array_equal(got, _reference(x, [conv]).reshape(-1, 12))
    walks = -(-30 // compiled.plan["walk_px"][0])
    assert compiled.plan["matmuls"] == [2 * walks * 9 * 3]
