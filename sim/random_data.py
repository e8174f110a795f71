"""Random data for tests and fuzzing: a generator from a seed, and int8 operands with the edge
values over-represented."""

import numpy as np

__all__ = ["as_rng", "int8_data"]


def as_rng(rng) -> np.random.Generator:
    """``rng`` itself when it is a ``numpy.random.Generator``, else a new one seeded with it."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def int8_data(rng: np.random.Generator, shape, *, edge: float = 0.25) -> np.ndarray:
    """Full-range int8 values (int64 array) with -128, 127 and 0 over-represented (``edge`` of
    them)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, not {rng!r}")
    if not 0 <= edge <= 1:
        raise ValueError(f"edge must be in 0..1, not {edge!r}")
    x = rng.integers(-128, 128, shape)
    pick = rng.random(shape)
    x = np.where(pick < edge * 0.5, -128, x)
    x = np.where((pick >= edge * 0.5) & (pick < edge * 0.8), 127, x)
    x = np.where((pick >= edge * 0.8) & (pick < edge), 0, x)
    return x.astype(np.int64)
