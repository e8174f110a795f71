"""Training on the generated Verilog: 20 steps of an MLP on the compiled Verilator harness
(16 x 16 array, bf16) give weights bitwise identical to the ``model`` backend's after the same
steps, with cycles per step and utilization counted; and ``tpugen train --backend verilator``
prints them. Small on purpose (a 49-16-10 MLP, batch 4): the harness build (1-2 minutes the
first time, cached after) is most of the time."""

import numpy as np
import pytest

from tpugen import Accelerator, Config
from tpugen.cli import main
from tpugen.training import ArrayGemms, TrainOptions, mnist_split, train

CONFIG = Config(rows=16, cols=16, operand="bf16")
STEPS = 20


@pytest.fixture(scope="module")
def digits():
    """80 training digits, 4 x 4 average-pooled (49 features): 20 steps of 4."""
    d = mnist_split(0, 4 * STEPS, 10)
    return d.x_train.reshape(-1, 7, 4, 7, 4).mean(axis=(2, 4)).reshape(-1, 49), d.y_train


@pytest.mark.slow
def test_20_steps_on_verilator_equal_the_model_backend_bit_for_bit(digits):
    opts = TrainOptions(hidden=(16,), batch=4, epochs=1, lr=0.1)
    runs = {b: train(*digits, opts, ArrayGemms(Accelerator(CONFIG, b)), max_steps=STEPS)
            for b in ("model", "verilator")}
    model, rtl = runs["model"], runs["verilator"]
    assert model.steps == rtl.steps == STEPS
    for a, b in zip(model.mlp.params(), rtl.mlp.params(), strict=True):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert model.history[0].loss == rtl.history[0].loss
    (stats,) = rtl.history
    t = rtl.gemms.total()
    assert t.count == t.timed == 5 * STEPS                 # every GEMM timed on the RTL
    assert stats.cycles_per_step == t.cycles / STEPS > 0
    assert 0 < stats.utilization <= 1
    assert model.history[0].cycles_per_step is None       # the model counts no cycles
    print(f"verilator {CONFIG.rows} x {CONFIG.cols} bf16, MLP 49-16-10, batch 4: "
          f"{stats.cycles_per_step:.0f} cycles per step, utilization "
          f"{100 * stats.utilization:.1f} %")


def test_tpugen_train_on_verilator_prints_cycles(capsys):
    rc = main(["train", "--backend", "verilator", "--train", "32", "--test", "16", "--hidden",
               "16", "--batch", "8", "--epochs", "1"])
    out = capsys.readouterr().out
    assert rc == 0, out
    (line,) = [ln.split() for ln in out.splitlines() if ln[:5].strip() == "1"]
    assert line[11] == "20"                                  # 4 steps x 5 GEMMs
    assert int(line[12].replace(",", "")) > 0 and line[14] == "%"
    assert "cycles  utilization" in out
