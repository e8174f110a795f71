"""The number formats (int4, bf16, fp8_e4m3, fp8_e5m2) on the generated core, bit-exact with
the golden models on every simulator.

GEMMs whose shapes are not multiples of the array (3 x 5: non-square), with the specials of
each float format in the operands (+-0, subnormals, the largest finite values, +-inf, NaN,
values whose products flush or overflow), go through ``Accelerator.matmul`` (which compares
with ``sim.float_golden.gemm``, itself checked against an exact reference in
``test_float_golden.py``). A hand-written program checks ACTIVATE (ReLU and the conversion to
the operand type, int4's clamp) and WRITE_HOST from the unified buffer against the golden
model ``sim.machine``, and the float results against ``ml_dtypes`` directly.
"""

import ml_dtypes
import numpy as np
import pytest

from tpugen import Accelerator, Config
from tpugen.cli import main
from tpugen.hdl.config import OPERAND_TYPES
from tpugen.sim.float_golden import same_bits
from tpugen.sim.formats import decode, encode
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.requant import QuantParams

FORMATS = ("int4", "bf16", "fp8_e4m3", "fp8_e5m2")
FLOATS = FORMATS[1:]
SIMULATORS = ("amaranth", "icarus", "verilator")


def config(operand: str) -> Config:
    return Config(rows=3, cols=5, operand=operand, ub_rows=64, acc_rows=64)


def special_values(operand: str) -> list[float]:
    """Values that exercise the format's corners (converted to it with RNE / satfinite)."""
    t = OPERAND_TYPES[operand]
    top = t.max_finite
    tiny = 2.0 ** (1 - t.bias)                     # smallest normal
    sub = tiny * 2.0 ** -t.mantissa                # smallest subnormal
    return [0.0, -0.0, top, -top, tiny, -tiny, sub, -sub, np.inf, -np.inf, np.nan,
            1.5 * tiny, 3.0, -0.375]


def operands(operand: str, m: int, k: int, n: int, seed: int):
    """Random operands with a few specials in A and B (most rows and columns stay finite)."""
    rng = np.random.default_rng(seed)
    if not OPERAND_TYPES[operand].is_float:
        return rng.integers(-8, 8, (m, k)), rng.integers(-8, 8, (k, n))
    a = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-4, 5, (m, k)))).astype(np.float32)
    b = (rng.standard_normal((k, n)) * np.exp2(rng.integers(-4, 5, (k, n)))).astype(np.float32)
    sp = special_values(operand)
    for i, v in enumerate(sp):
        a[i % m, (3 * i) % k] = v
        b[(5 * i + 1) % k, (2 * i) % n] = v
    if operand == "fp8_e5m2":
        # Given as the ml_dtypes type, B keeps its infinities (a float conversion saturates).
        b = b.astype(ml_dtypes.float8_e5m2)
    return a, b


@pytest.fixture(scope="module", params=SIMULATORS)
def simulator(request):
    return request.param


@pytest.mark.parametrize("operand", FORMATS)
def test_gemm_is_bit_exact(simulator, operand):
    cfg = config(operand)
    a, b = operands(operand, 11, 10, 12, seed=FORMATS.index(operand))
    acc = Accelerator(cfg, simulator)
    got = acc.matmul(a, b)      # raises ResultMismatch on any difference from the golden model
    assert acc.last.passed and acc.last.wrong == 0
    if OPERAND_TYPES[operand].is_float:
        assert got.dtype == np.float32
        bits = got.view(np.uint32)
        # The specials reached the results: NaNs, infinities (fp8_e4m3 has none: its inputs
        # saturate), and finite values.
        assert np.isnan(got).any() and np.isfinite(got).sum() > 60
        assert np.isinf(got).any() == (cfg.operand_type.specials == "ieee")
        # Where the exact sum is finite, the result is within the bound of K binary32 adds
        # (each rounding by at most 2**-24 of the partial sum) and the flushed products.
        da, db = (decode(encode(x, operand), operand).astype(np.float64) for x in (a, b))
        with np.errstate(invalid="ignore", over="ignore"):
            exact, scale = da @ db, np.abs(da) @ np.abs(db)
        clean = np.isfinite(scale) & (scale < 1e37)
        bound = (a.shape[1] + 2) * 2.0 ** -23 * scale + a.shape[1] * 2.0 ** -126
        assert clean.sum() > 40
        assert (np.abs(got[clean] - exact[clean]) <= bound[clean]).all()
        assert bits.shape == (11, 12)
    else:
        assert np.array_equal(got, a @ b)


def activate_program(cfg: Config, a_bits: np.ndarray, w_bits: np.ndarray) -> Program:
    """A 4 x 3 by 3 x 5 product into ACC rows 0..3, ACTIVATE with set 0 into UB rows 8.. and
    with set 1 into UB rows 16.. (parts 0 and 1: the C = 5 lanes over R = 3), written back from
    the unified buffer and the accumulators, then SYNC."""
    p = Program(cfg)
    if not cfg.operand_type.is_float:
        p.read_quant(0, QuantParams(bias=3, multiplier=1 << 30, shift=-2))
        p.read_quant(1, QuantParams(multiplier=1 << 30, shift=1, out_zp=-1, act_min=-5,
                                    act_max=100))
    p.read_host(0, a_bits).read_weights(w_bits).matmul(0, 0, len(a_bits))
    for qset, base in ((0, 8), (1, 16)):
        for part in (0, 1):
            p.activate(0, base + 4 * part, len(a_bits), part=part, qset=qset)
    for base in (8, 16):
        for part in (0, 1):
            p.write_host(base + 4 * part, 4)
    p.write_host(0, 4, from_acc=True)
    return p.sync()


def signed_bits(bits: np.ndarray, width: int) -> np.ndarray:
    bits = bits.astype(np.int64) & ((1 << width) - 1)
    return np.where(bits >= 1 << (width - 1), bits - (1 << width), bits)


@pytest.mark.parametrize("operand", FORMATS)
def test_activate_and_write_host(simulator, operand):
    cfg = config(operand)
    t = cfg.operand_type
    a, w = operands(operand, 4, 3, 5, seed=7 + FORMATS.index(operand))
    if t.is_float:
        a_bits, w_bits = (signed_bits(encode(x, operand), t.width) for x in (a, w))
    else:
        a_bits, w_bits = a, w
    program = activate_program(cfg, a_bits, w_bits)
    expected = Machine(cfg).run(program)
    result = Accelerator(cfg, simulator).run(program)
    assert result.error == 0 and int(expected.error) == 0
    assert expected.mismatches(result.host_out, result.last) == []
    out = np.asarray(result.host_out, dtype=np.int64)
    acc = out[16:20, :5]
    # ACTIVATE's lanes: 8 result rows (sets 0 and 1) of 5 lanes, from parts 0 (lanes 0..2) and
    # 1 (lanes 3, 4), sign-extended operand bits.
    acts = [np.concatenate([out[8 * s + 0:8 * s + 4, :3], out[8 * s + 4:8 * s + 8, :2]], axis=1)
            for s in (0, 1)]
    if t.is_float:
        x = (acc & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
        want = []
        for relu in (False, True):
            y = np.where(x > 0, x, np.float32(0)) if relu else x
            y = np.where(np.isnan(x), x, y).astype(np.float32)
            # An external oracle: ml_dtypes' RNE conversion, saturating fp8, flushing bf16.
            if t.width == 8:
                y = np.clip(y, -t.max_finite, t.max_finite)
            else:
                y = np.where(np.abs(y) < np.float32(2.0 ** -126), np.copysign(0, y), y)
            dt = {"bf16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
                  "fp8_e5m2": ml_dtypes.float8_e5m2}[operand]
            want.append(y.astype(dt).view(np.uint16 if t.width == 16 else np.uint8))
        for got, exp in zip(acts, want, strict=True):
            assert same_bits(got & ((1 << t.width) - 1), exp.astype(np.int64), fmt=t).all()
    else:
        assert np.array_equal(acc, a_bits @ w_bits)
        assert acts[0].min() >= -8 and acts[0].max() <= 7 and acts[1].max() <= 7
        assert (acts[1] >= -5).all() and ((acts[0] == 7) | (acts[0] == -8)).any()


@pytest.mark.slow
@pytest.mark.parametrize("operand", FORMATS)
def test_sim_command_on_verilator(operand, capsys):
    """The issue's command: an 8 x 8 array, a 100 x 70 x 50 GEMM, PASS with its cycles."""
    code = main(["sim", "--operand", operand, "--rows", "8", "--cols", "8", "--m", "100",
                 "--k", "70", "--n", "50", "--backend", "verilator"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "cycles       6594" in out and out.strip().endswith("PASS")
