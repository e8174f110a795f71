"""Imported int8 ``.tflite`` models on the generated hardware, bit-exact with the TFLite Micro
interpreter: small models on Icarus (cocotb) and on the compiled Verilator harness, one in the
Amaranth simulator, and one on the simulated board over its UART link (``tpugen infer
--backend board``).

Every chain's result is also checked against NumPy by ``tpugen.chain.run_layers``. The configs
are those ``test_core_cocotb.py``, ``test_harness.py`` and ``test_board_e2e.py`` build, so
these tests share their simulator builds. (The ``model`` backend, many more models:
``test_tflite_models.py``.)
"""

import numpy as np
import pytest
from tflite_random import random_conv, random_fc, random_layer

import tpugen
from tpugen.cli import main
from tpugen.hdl.config import Config
from tpugen.sim.requant import ACTIVATIONS
from tpugen.tb.simboard import SimulatedBoardTop
from tpugen.tflite import TFLiteModel
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro
from tpugen.tflite.writer import ModelWriter

#: The simulators' configs (each built by the tests named in the module docstring).
CONFIGS = {"icarus": Config(rows=4, cols=4, ub_rows=256, acc_rows=128),
           "verilator": Config(rows=3, cols=5, ub_rows=256, acc_rows=128),
           "amaranth": Config(rows=2, cols=3, ub_rows=64, acc_rows=32)}
#: The simulated board's config and parameters (as in ``test_board_e2e.py``).
BOARD_CFG = Config(rows=4, cols=4, ub_rows=256, acc_rows=128)
BOARD_PARAMS = {"clk_freq": 4e6, "baud": 1e6, "max_payload": 1024, "timeout_bits": 40}


def fc_chain() -> tuple[bytes, tuple]:
    """Four FULLY_CONNECTED layers, one chain on chip: K and N not multiples of R or C,
    per-channel and per-tensor weights, every fused activation, input zero point -7."""
    rng = np.random.default_rng(50)
    mw = ModelWriter()
    y = mw.input((3, 13), 0.04, -7)
    for i, (n, act) in enumerate(zip((9, 7, 6, 5), ACTIVATIONS, strict=True)):
        y = random_fc(mw, y, rng, n, act, per_channel=i != 1)
    return mw.build(y), (3, 13)


def conv_conv_fc(convs: int = 2) -> tuple[bytes, tuple]:
    """CONV_2D 3x3 stride 2 SAME (Cin 3 -> 5, RELU), CONV_2D 3x3 stride 1 VALID (5 -> 6,
    RELU6; left out with ``convs=1``), FULLY_CONNECTED flattening the NHWC output itself (no
    RESHAPE, to 4 outputs); input zero point 9. One chain per op: im2col and the flattening run
    on the host between them."""
    rng = np.random.default_rng(51)
    mw = ModelWriter()
    x = mw.input((1, 7, 7, 3), 0.05, 9)
    y = random_conv(mw, x, rng, 5, stride=2, padding="SAME", activation="RELU")
    if convs == 2:
        y = random_conv(mw, y, rng, 6, stride=1, padding="VALID", activation="RELU6")
    k = int(np.prod(y.shape))
    s_w, bias, s_out, zp = random_layer(rng, 4, s_in=y.scale)
    y = mw.fully_connected(y, rng.integers(-127, 128, (4, k)), bias, s_w, s_out, zp)
    return mw.build(y), (1, 7, 7, 3)


def conv_pool_softmax() -> tuple[bytes, tuple]:
    """CONV_2D 2x2 stride 1 SAME per-tensor (RELU_N1_TO_1), DEPTHWISE_CONV_2D 3x3 stride 2,
    MAX_POOL_2D, a pointwise CONV_2D (a chain of its own: the pool runs on the host), SOFTMAX;
    input zero point -128."""
    rng = np.random.default_rng(52)
    mw = ModelWriter()
    x = mw.input((1, 6, 5, 4), 0.03, -128)
    y = mw.conv2d(x, rng.integers(-127, 128, (7, 2, 2, 4)), rng.integers(-999, 999, 7), 0.004,
                  0.05, 3, stride=1, padding="SAME", activation="RELU_N1_TO_1")
    s_w, bias, s_out, zp = random_layer(rng, 7, s_in=y.scale)
    y = mw.depthwise_conv2d(y, rng.integers(-127, 128, (1, 3, 3, 7)), bias, s_w, s_out, zp,
                            stride=2, padding="SAME", activation="RELU")
    y = mw.max_pool(y, 2, 1, "SAME")
    y = random_conv(mw, y, rng, 6, k=1)
    return mw.build(mw.softmax(y)), (1, 6, 5, 4)


def _inputs(shape, samples, seed):
    x = np.random.default_rng(seed).integers(-128, 128, (samples,) + shape).astype(np.int8)
    x[0].flat[0] = -128
    return x


def _run(backend, make, samples=2):
    data, shape = make()
    model = TFLiteModel(data)
    x = _inputs(shape, samples, 7)
    got = model.run(x, tpugen.Accelerator(CONFIGS[backend], backend))
    problem = first_mismatch(got, run_tflite_micro(data, x, stacked=True))
    assert problem is None, problem
    report = model.last
    assert report.backend == backend and report.cycles > 0
    gemms = [o for o in report.ops if o.shape is not None]
    assert all(o.where.startswith(f"{backend}, chain ") for o in gemms)
    # a layer alone in its program has that program's cycles
    for c in report.chains:
        if len(c.ops) == 1:
            (op,) = [o for o in gemms if o.index == c.ops[0]]
            assert op.cycles == c.cycles > 0 and 0 < op.utilization <= 1
    return model


@pytest.mark.parametrize("backend", ["amaranth", "icarus", "verilator"])
def test_fc_chain_on_chip(backend):
    model = _run(backend, fc_chain)
    (chain,) = model.last.chains
    assert chain.ops == [0, 1, 2, 3] and chain.programs == 1
    assert [o.where.endswith("on chip") for o in model.last.ops] == [False, True, True, True]
    assert [o.shape for o in model.last.ops] == [(6, 13, 9), (6, 9, 7), (6, 7, 6), (6, 6, 5)]


@pytest.mark.parametrize("backend", ["icarus", "verilator"])
def test_conv_conv_fc_without_reshape(backend):
    """On Icarus (a few seconds per program) one convolution, on Verilator two."""
    convs = 1 if backend == "icarus" else 2
    model = _run(backend, lambda: conv_conv_fc(convs), samples=3)
    assert [len(c.ops) for c in model.last.chains] == [1] * (convs + 1)


@pytest.mark.parametrize("backend", ["verilator"])
def test_depthwise_pool_pointwise_softmax(backend):
    _run(backend, conv_pool_softmax, samples=3)


@pytest.mark.parametrize("backend", ["verilator"])
def test_infer_command_on_verilator(backend, tmp_path, capsys):
    data, shape = conv_conv_fc()
    (tmp_path / "m.tflite").write_bytes(data)
    np.save(tmp_path / "x.npy", _inputs(shape, 4, 8))
    (tmp_path / "cfg.json").write_text(CONFIGS[backend].to_json())
    rc = main(["infer", str(tmp_path / "m.tflite"), "--input", str(tmp_path / "x.npy"),
               "--backend", backend, "--config", str(tmp_path / "cfg.json"), "--check",
               "--output", str(tmp_path / "y.npy")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "check: bit-exact with the TFLite Micro interpreter" in out
    assert "CONV_2D            verilator, chain 1" in out
    assert "accelerator: verilator backend, 3 x 5 array, 4 sample(s), " in out
    assert np.load(tmp_path / "y.npy").shape == (4, 1, 4)


def test_infer_on_the_simulated_board(tmp_path, capsys):
    """``tpugen infer --backend board --check`` against the board top's RTL behind a pty; the
    config comes from the board's ID reply. Board cycles include the waits for the UART."""
    data, shape = conv_conv_fc()
    (tmp_path / "m.tflite").write_bytes(data)
    np.save(tmp_path / "x.npy", _inputs(shape, 2, 9))
    with SimulatedBoardTop(BOARD_CFG, sim="verilator", **BOARD_PARAMS) as board:
        rc = main(["infer", str(tmp_path / "m.tflite"), "--input", str(tmp_path / "x.npy"),
                   "--backend", "board", "--port", board.port, "--timeout", "120", "--check"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "check: bit-exact with the TFLite Micro interpreter" in out
    assert "CONV_2D            board, chain 1" in out
    assert "accelerator: board backend, 4 x 4 array, 2 sample(s), " in out
