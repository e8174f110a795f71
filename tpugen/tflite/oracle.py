"""The TFLite Micro interpreter as the oracle of ``tpugen infer --check`` and the tests.

``tflite-micro`` (from PyPI, a CPython 3.11 x86-64 wheel) is an optional dependency
(``pip install 'tpugen[dev]'``): it is imported when ``run_tflite_micro`` (or
``tflite_micro_runtime``) is called.
"""

import numpy as np

__all__ = ["run_tflite_micro", "tflite_micro_tensors", "first_mismatch", "tflite_micro_runtime"]


def tflite_micro_runtime():
    """The interpreter's ``runtime`` module; ``RuntimeError`` (one line saying how to install
    it) when the ``tflite-micro`` wheel is missing."""
    try:
        # Deferred: tflite-micro is optional, and only this oracle needs it.
        from tflite_micro.python.tflite_micro import runtime
    except ImportError as e:
        raise RuntimeError("the TFLite Micro interpreter is missing: pip install tflite-micro "
                           "(a CPython 3.11 x86-64 wheel; in tpugen's dev extra)") from e
    return runtime


def run_tflite_micro(data: bytes, x: np.ndarray, *, stacked: bool) -> np.ndarray:
    """The interpreter's output for input ``x`` (one input, or ``stacked`` inputs along the
    first axis: run one at a time, the outputs stacked); ``RuntimeError`` without the
    interpreter (``tflite_micro_runtime``)."""
    runtime = tflite_micro_runtime()
    ip = runtime.Interpreter.from_bytes(bytes(data), arena_size=max(1 << 20, 16 * len(data)))
    outs = []
    for sample in (x if stacked else [x]):
        ip.set_input(np.ascontiguousarray(sample), 0)
        ip.invoke()
        outs.append(np.array(ip.get_output(0)))
    return np.stack(outs) if stacked else outs[0]


def tflite_micro_tensors(data: bytes, x: np.ndarray, indices) -> dict:
    """Every tensor of ``indices`` after the interpreter ran the one input ``x``, as TFLite
    Micro holds it (``InterpreterConfig.kPreserveAllTensors``, ``GetTensor``): index ->
    array (copied; ``indices`` must be tensors of the model: the interpreter does not check).
    ``RuntimeError`` without the interpreter."""
    runtime = tflite_micro_runtime()
    ip = runtime.Interpreter.from_bytes(bytes(data), arena_size=max(1 << 22, 64 * len(data)),
                                        intrepreter_config=runtime.InterpreterConfig
                                        .kPreserveAllTensors)
    ip.set_input(np.ascontiguousarray(x), 0)
    ip.invoke()
    return {int(t): np.array(ip.GetTensor(int(t), 0)["tensor_data"]) for t in indices}


def first_mismatch(got: np.ndarray, expected: np.ndarray) -> str | None:
    """``None`` if the arrays are bitwise equal (shape, dtype, values), else one line naming
    the first difference."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return f"shape {got.shape} differs from TFLite Micro's {expected.shape}"
    if got.dtype != expected.dtype:
        return f"dtype {got.dtype} differs from TFLite Micro's {expected.dtype}"
    if got.dtype.kind == "f":             # bit patterns: -0.0 and NaNs count too
        diff = got.view(f"u{got.itemsize}") != expected.view(f"u{got.itemsize}")
    else:
        diff = got != expected
    if not diff.any():
        return None
    where = tuple(int(i) for i in np.argwhere(diff)[0])
    return (f"first mismatch at index {where}: tpugen {got[where]!r}, TFLite Micro "
            f"{expected[where]!r} ({int(diff.sum())} of {diff.size} values differ)")
