"""The golden references (``tpugen.sim.reference``): independent of the compiler, and equal to
a plain NumPy computation written here from TFLite's arithmetic."""

import ast
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tpugen.compiler import fold_input_zero_point
from tpugen.hdl.config import Config
from tpugen.sim.reference import chain_reference, gemm_reference
from tpugen.sim.requant import QuantParams, requantize


def _module_file(name: str) -> Path | None:
    """The source file of module ``name`` (``None`` when it is not a module)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _tpugen_imports(name: str, path: Path) -> set[str]:
    """The ``tpugen`` modules ``path`` (module ``name``) imports, anywhere in it, read with
    ``ast``; ``from package import module`` counts the module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t.startswith("tpugen.") and _module_file(t) is not None:
                found.add(t)
    return found


def test_reference_imports_nothing_of_the_compiler():
    """``tpugen.sim.reference`` and every ``tpugen`` module it imports, transitively, import
    nothing from ``tpugen.compiler`` (a package's ``__init__`` counts once one of its modules
    is imported; the root package ``tpugen``, the front door, is not followed)."""
    seen: dict[str, set[str]] = {}
    todo = ["tpugen.sim.reference"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name)
        assert path is not None, name
        deps = _tpugen_imports(name, path)
        parents = {".".join(name.split(".")[:i]) for i in range(2, name.count(".") + 1)}
        seen[name] = deps
        todo += sorted((deps | parents) - seen.keys())
    bad = {m: sorted(d for d in deps if d == "tpugen.compiler"
                     or d.startswith("tpugen.compiler."))
           for m, deps in seen.items()}
    assert not any(bad.values()), {m: d for m, d in bad.items() if d}
    assert "tpugen.sim.requant" in seen and "tpugen.sim.model" in seen   # the walk works
    assert all(not m.startswith("tpugen.compiler") for m in seen)


def test_the_walker_sees_relative_imports(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from .requant import QuantParams\nfrom tpugen.hdl import isa\n"
                 "def g():\n    import tpugen.compiler.plan\n")
    assert _tpugen_imports("tpugen.sim.x", f) == {"tpugen.sim.requant", "tpugen.hdl",
                                                  "tpugen.hdl.isa", "tpugen.compiler.plan"}


def wrap(x, bits):
    x = np.asarray(x, dtype=object)
    return np.array([[((int(v) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
                      for v in row] for row in x], dtype=np.int64)


def plain_int8(A, B, quant, in_zp, acc_width=32):
    """TFLite's int8 layer by its definition, in Python integers: acc = sum (a - in_zp) * b
    (32-bit; an accelerator with a narrower accumulator sums the raw products in acc_width
    bits and subtracts in_zp * colsum(B) after), then the requantization."""
    A = np.asarray(A, dtype=object)
    B = np.asarray(B, dtype=object)
    if acc_width >= 32:
        acc = (A - in_zp).dot(B)
    else:
        acc = wrap(A.dot(B), acc_width).astype(object) - in_zp * B.sum(axis=0)
    return requantize(wrap(acc, 32), quant)


@pytest.mark.parametrize("config", [Config(rows=4, cols=4), Config(rows=3, cols=5, acc_width=40),
                                    Config(rows=5, cols=3, acc_width=18)],
                         ids=lambda c: c.name)
def test_gemm_reference_int32(config):
    rng = np.random.default_rng(1)
    A, B = rng.integers(-128, 128, (7, 300)), rng.integers(-128, 128, (300, 5))
    A[0], B[:, 0] = -128, -128                       # 300 * 2**14: wraps below 23 bits
    exact = np.asarray(A, dtype=object).dot(np.asarray(B, dtype=object))
    assert np.array_equal(gemm_reference(config, A, B), wrap(exact, config.acc_width))


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("in_zp", [0, -128, 37, 127])
@pytest.mark.parametrize("acc_width", [32, 20, 48])
def test_gemm_reference_int8(per_channel, in_zp, acc_width):
    config = Config(rows=4, cols=4, acc_width=acc_width)
    rng = np.random.default_rng([in_zp + 128, per_channel, acc_width])
    M, K, N = 6, 70, 9
    A, B = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
    n = N if per_channel else None
    quant = QuantParams(bias=rng.integers(-(1 << 20), 1 << 20, n),
                        multiplier=rng.integers(1 << 29, 1 << 31, n),
                        shift=rng.integers(-20, -10, n) if per_channel else -15,
                        out_zp=-3, act_min=-100, act_max=120)
    got = gemm_reference(config, A, B, out="int8", quant=quant, in_zp=in_zp)
    assert np.array_equal(got, plain_int8(A, B, quant, in_zp, acc_width))
    assert np.ptp(got) > 0


def test_int8_narrow_and_wide_accumulators_agree_without_overflow():
    """The acc_width < 32 semantics is TFLite's whenever no raw sum leaves acc_width bits."""
    rng = np.random.default_rng(3)
    A, B = rng.integers(-128, 128, (5, 3)), rng.integers(-128, 128, (3, 4))   # |sums| < 2**16
    quant = QuantParams(bias=rng.integers(-999, 999, 4), multiplier=1 << 30, shift=-6)
    narrow = gemm_reference(Config(rows=2, cols=2, acc_width=18), A, B, out="int8",
                            quant=quant, in_zp=-77)
    assert np.array_equal(narrow, gemm_reference(Config(rows=2, cols=2), A, B, out="int8",
                                                 quant=quant, in_zp=-77))


def test_int4_clamps_to_its_range():
    config = Config(rows=2, cols=2, operand="int4")
    A, B = np.full((2, 3), 7), np.full((3, 2), 7)
    got = gemm_reference(config, A, B, out="int8", quant=QuantParams(multiplier=1 << 30,
                                                                    shift=1))
    assert (got == 7).all()
    with pytest.raises(ValueError, match="-8..7"):
        gemm_reference(config, np.full((2, 3), 8), B)


def test_chain_reference_layer_by_layer():
    """Zero points: the chain's in_zp, then each layer's out_zp, unless a layer gives its own;
    the last layer may give int32 sums."""
    rng = np.random.default_rng(4)
    config = Config(rows=4, cols=4)
    X = rng.integers(-128, 128, (5, 11))
    W1, W2, W3 = (rng.integers(-128, 128, s) for s in ((11, 8), (8, 6), (6, 3)))
    q1 = QuantParams(bias=rng.integers(-999, 999, 8), multiplier=rng.integers(1 << 30, 1 << 31,
                                                                              8),
                     shift=-12, out_zp=-9)
    q2 = QuantParams(multiplier=3 << 28, shift=-11, out_zp=4, act_min=-20)
    h1 = plain_int8(X, W1, q1, 13)
    h2 = plain_int8(h1, W2, q2, -9)
    assert np.array_equal(chain_reference(config, X, [(W1, q1), (W2, q2)], 13), h2)
    h2_own = plain_int8(h1, W2, q2, 50)
    assert np.array_equal(chain_reference(config, X, [(W1, q1, 13), (W2, q2, 50)]), h2_own)
    sums = wrap(np.asarray(h2, dtype=object).dot(np.asarray(W3, dtype=object)), 32)
    assert np.array_equal(chain_reference(config, X, [(W1, q1), (W2, q2), (W3, None)], 13),
                          sums)


def test_float_reference_is_binary32():
    config = Config(rows=2, cols=2, operand="bf16")
    A = np.array([[1.0, 2.0, 0.5]])
    B = np.array([[1.0], [0.25], [4.0]])
    got = gemm_reference(config, A, B)
    assert got.dtype == np.float32 and got.tolist() == [[3.5]]


@pytest.mark.parametrize("acc_width", [18, 24, 32, 33, 64])
def test_the_compilers_folded_bias_gives_the_same(acc_width):
    """The compiler folds in_zp into the bias (mod 2**32) and the array sums the raw products:
    with acc_width >= 32 that is TFLite's arithmetic exactly, and with a narrower accumulator
    it is what the reference specifies (module docstring of ``tpugen.sim.reference``)."""
    config = Config(rows=4, cols=4, acc_width=acc_width)
    rng = np.random.default_rng(acc_width)
    for in_zp in (-128, -1, 90, 127):
        A, B = rng.integers(-128, 128, (9, 40)), rng.integers(-128, 128, (40, 7))
        A[0], B[:, 0] = -128, -128                      # wraps below 20 bits
        quant = QuantParams(bias=rng.integers(-(1 << 31), 1 << 31, 7),
                            multiplier=rng.integers(1 << 29, 1 << 31, 7),
                            shift=rng.integers(-20, -5, 7), out_zp=5)
        folded = fold_input_zero_point(quant, B, in_zp)
        hardware = requantize(wrap(A @ B, acc_width) if acc_width < 64 else A @ B, folded)
        assert np.array_equal(gemm_reference(config, A, B, out="int8", quant=quant,
                                             in_zp=in_zp), hardware)
