"""``tpugen sim``: a random GEMM on a backend, checked against NumPy, with a cycle report."""

from pathlib import Path

import numpy as np

from tpugen.hdl.config import Config
from tpugen.sim.requant import QuantParams, quantize_multiplier

from .accelerator import Accelerator

__all__ = ["run_sim", "relu_quant"]


def relu_quant(k: int) -> QuantParams:
    """TFLite requantization with ReLU that maps the int8 x int8 sums of depth ``k`` into the
    int8 range (a real multiplier of 4 * 127 / (k * 128 * 128): typical sums of random data
    spread over it, the largest saturate)."""
    q, e = quantize_multiplier(4 * 127 / (max(1, k) * 128 * 128))
    return QuantParams(multiplier=q, shift=e, act_min=0)


def _check_dim(name, v):
    if not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive integer, not {v!r}")


def run_sim(config: Config, *, m, k, n, relu=False, backend="verilator", seed=1, waves=None,
            fault=None, out=print) -> int:
    """Run the GEMM, print the report, return 0 on PASS and 1 on FAIL."""
    for name, v in (("m", m), ("k", k), ("n", n)):
        _check_dim(name, v)
    if waves and backend == "model":
        raise ValueError("waves: the model backend has no waveforms; choose another --backend")
    if waves:
        want = {"icarus": ".fst", "verilator": ".vcd", "amaranth": ".vcd"}[backend]
        if Path(waves).suffix != want:
            raise ValueError(f"waves: the {backend} backend writes {want[1:].upper()}; name "
                             f"the file *{want}, not {waves!r}")
    rng = np.random.default_rng(seed)
    lo, hi = config.operand_type.min, config.operand_type.max
    a = rng.integers(lo, hi + 1, (m, k))
    b = rng.integers(lo, hi + 1, (k, n))
    acc = Accelerator(config, backend, fault=fault)
    quant = {"out": "int8", "quant": relu_quant(k)} if relu else {}
    out(f"tpugen sim: {m} x {k} x {n} GEMM ({'int8 ReLU' if relu else 'int32'} results), "
        f"{config.rows} x {config.cols} array, backend {backend}")
    try:
        acc.matmul(a, b, waves=waves, seed=seed, **quant)
    except RuntimeError as e:
        out(f"  {e}")
    report = acc.last
    if report is None:
        out("FAIL")
        return 1
    for line in report.lines():
        out(("  " + line) if line not in ("PASS", "FAIL") else line)
    if waves:
        out(f"  waves        {waves}")
    return 0 if report.passed else 1
