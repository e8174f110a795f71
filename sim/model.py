"""NumPy golden model of the systolic array (bit-exact, two's-complement wrap)."""

import numpy as np

from tpugen.hdl.config import Config

__all__ = ["wrap", "array_outputs", "schedule_outputs"]


def wrap(x, bits: int) -> np.ndarray:
    """Wrap integers to ``bits``-bit two's complement (int64 result)."""
    x = np.asarray(x, dtype=np.int64)
    if bits >= 64:
        return x
    half = np.int64(1) << np.int64(bits - 1)
    mask = (np.int64(1) << np.int64(bits)) - 1
    return ((x + half) & mask) - half


def array_outputs(config: Config, weights, acts) -> np.ndarray:
    """Output vectors of one tile: ``acts`` (M x R) times ``weights`` (R x C), wrapped.

    Products are exact in int64; the column sums wrap to ``acc_width`` as the hardware's
    partial-sum chain does (wrapping once at the end equals wrapping at every addition).
    """
    w = np.asarray(weights, dtype=np.int64)
    x = np.asarray(acts, dtype=np.int64)
    r, c = config.rows, config.cols
    if w.shape != (r, c):
        raise ValueError(f"weights must have shape {(r, c)}, not {w.shape}")
    if x.ndim != 2 or x.shape[1] != r:
        raise ValueError(f"acts must have shape (M, {r}), not {x.shape}")
    lo, hi = config.operand_type.min, config.operand_type.max
    for name, v in (("weights", w), ("acts", x)):
        if v.size and (v.min() < lo or v.max() > hi):
            raise ValueError(f"{name} must be in {lo}..{hi}")
    return wrap(x @ w, config.acc_width)


def schedule_outputs(config: Config, tiles) -> np.ndarray:
    """Expected output vectors of a sequence of ``(weights, acts)`` tiles, in order."""
    outs = [array_outputs(config, w, x) for w, x in tiles]
    return np.concatenate(outs) if outs else np.zeros((0, config.cols), dtype=np.int64)
