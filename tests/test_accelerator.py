"""``Accelerator.matmul``: checked results (a wrong one raises ``ResultMismatch`` with the first
difference), the README's dtypes, and TypeError/ValueError for input it cannot honour."""

import numpy as np
import pytest

from tpugen import Accelerator, Config, ResultMismatch
from tpugen.accelerator import QUANT_OPTIONS, quant_options, result_dtype
from tpugen.sim.requant import QuantParams

RNG = np.random.default_rng(11)
A = RNG.integers(-128, 128, (5, 7))
B = RNG.integers(-128, 128, (7, 3))


def test_results_and_dtypes():
    acc = Accelerator(Config(rows=2, cols=3))
    c = acc.matmul(A, B)
    assert c.dtype == np.int32 and np.array_equal(c, A @ B) and acc.last.passed
    q = acc.matmul(A, B, out="int8", multiplier=1 << 30, shift=-8, act_min=0, bias=[5, -7, 0])
    assert q.dtype == np.int8 and q.min() >= 0
    # TFLite's arithmetic, computed here from its definition: x * 2**30 * 2**-31 = x / 2,
    # then a divide by 2**8 rounding half away from zero; the bias first; ReLU's clamp.
    x = (A @ B + np.array([5, -7, 0])) / 2 / 256
    expect = np.clip(np.sign(x) * np.floor(np.abs(x) + 0.5), 0, 127)
    assert np.array_equal(q, expect)
    params = QuantParams(multiplier=1 << 30, shift=-8, act_min=0, bias=[5, -7, 0])
    assert np.array_equal(acc.matmul(A, B, out="int8", quant=params), q)
    wide = Accelerator(Config(rows=2, cols=3, acc_width=40)).matmul(A, B)
    assert wide.dtype == np.int64 and np.array_equal(wide, A @ B)
    assert result_dtype(Config(acc_width=32), "int32") == np.int32
    assert result_dtype(Config(acc_width=33), "int32") == np.int64


def test_operands_of_any_integer_dtype_in_range():
    acc = Accelerator(Config(rows=3, cols=3))
    a = np.array([[0, 127], [5, 1]], dtype=np.uint64)
    b = np.array([[-128, 3], [2, 1]], dtype=np.int16)
    assert acc.matmul(a, b).tolist() == (a.astype(int) @ b).tolist()
    assert acc.matmul([[1, 2]], [[3], [4]]).tolist() == [[11]]


def test_a_wrong_result_raises_with_the_first_mismatch():
    """The debug fault cell corrupts products: matmul raises instead of returning them, with
    the first wrong element in row-major order."""
    acc = Accelerator(Config(rows=2, cols=2), "amaranth", fault=(0, 1))
    job = acc.prepare(A, B)
    with pytest.raises(ResultMismatch, match="differ from the golden model") as e:
        acc.execute(job)
    report = e.value.report
    assert acc.last is report and not report.passed
    got = job.compiled.decode(report.result.host_out)
    wrong = np.argwhere(got != A @ B)
    assert len(wrong) == report.wrong >= 1
    i, j = wrong[0]
    assert e.value.first == (i, j, got[i, j], (A @ B)[i, j])
    assert report.to_dict()["first_mismatch"] == {"row": i, "col": j, "got": got[i, j],
                                                  "expected": (A @ B)[i, j]}


@pytest.mark.parametrize("a,b,kw,exc,match", [
    (np.array([[2**64 - 1]], dtype=np.uint64), [[1]], {}, ValueError, "18446744073709551615"),
    ([[128]], [[1]], {}, ValueError, r"-128\.\.127"),
    ([[2**70]], [[1]], {}, ValueError, "-128..127"),
    ([[1.5]], [[1]], {}, TypeError, "integers"),
    ([[True]], [[1]], {}, TypeError, "integers"),
    (np.zeros((2, 2, 2), int), [[1]], {}, ValueError, "2-D"),
    ([1, 2], [[1]], {}, ValueError, "2-D"),
    (np.zeros((0, 3), int), np.zeros((3, 1), int), {}, ValueError, "empty"),
    ([[1, 2], [3]], [[1]], {}, ValueError, "2-D"),
    (A[:, :3], B, {}, ValueError, "K differs"),
    (A, B, {"act_min": 0}, ValueError, "act_min=0 would be ignored"),
    (A, B, {"shift": 3}, ValueError, "out='int8' only"),
    (A, B, {"relu": True}, TypeError, "'relu' is not an option"),
    (A, B, {"out": "int8", "quant": {"shift": 3}}, TypeError, "quant must be a QuantParams"),
    (A, B, {"out": "int8", "quant": QuantParams(), "shift": 3}, ValueError, "both given"),
    (A, B, {"out": "int8", "in_zp": 128}, ValueError, "in_zp"),
    (A, B, {"out": "int8", "bias": [1, 2]}, ValueError, "channels"),
    (A, B, {"out": "int16"}, ValueError, "out must be"),
    (A, B, {"scale": 2}, TypeError, "'scale' is not an option"),
    (A, B, {"out": "int8", "shift": 99}, ValueError, "shift"),
    (A, B, {"out": "int8", "act_min": 5, "act_max": 4}, ValueError, "act_min"),
    (A, B, {"waves": "w.vcd"}, ValueError, "model backend has no waveforms"),
    (A, B, {"stalls": (0.1, 0, 0)}, ValueError, "no stall patterns"),
    (A, B, {"seed": 3}, ValueError, "seed"),
])
def test_bad_input_raises(a, b, kw, exc, match):
    with pytest.raises(exc, match=match):
        Accelerator(Config(rows=2, cols=3)).matmul(a, b, **kw)


def test_simulator_options_are_checked():
    acc = Accelerator(Config(rows=2, cols=2), "amaranth")
    for stalls in ((0.5, 0.5), (1.0, 0, 0), ("x", 0, 0)):
        with pytest.raises(ValueError, match="stalls must be"):
            acc.matmul(A, B, stalls=stalls)
    with pytest.raises(ValueError, match="seed must be"):
        acc.matmul(A, B, seed=-1)


def test_quant_options_table():
    """One helper knows the requantization options: defaults pass for int32, all for int8."""
    assert quant_options("int32", {"act_min": -128, "multiplier": 1 << 30, "quant": None}) == {}
    assert quant_options("int8", {"shift": 2}) == {"quant": QuantParams(shift=2), "in_zp": 0}
    assert quant_options("int8", {}) == {"quant": QuantParams(), "in_zp": 0}
    assert set(QUANT_OPTIONS) == {"bias", "multiplier", "shift", "out_zp", "act_min", "act_max",
                                  "in_zp", "quant"}
