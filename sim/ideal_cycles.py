"""Reference cycle counts of a GEMM on an R x C array, to measure runs against.

``ideal_cycles``: every cell busy every cycle, ``ceil(M*K*N / (R*C))`` (the target a large GEMM
should come within a few percent of, counted from the first command beat to the last result).
``scalesim_cycles``: SCALE-Sim's weight-stationary estimate for the same array,
``ceil(K/R) * ceil(N/C) * (2R + C + M - 2) - 1`` (an outside model of what such an array does
without overlapping weight loads and compute).
"""

from tpugen.hdl.config import Config

__all__ = ["ideal_cycles", "scalesim_cycles"]


def _dims(m, k, n):
    for name, v in (("m", m), ("k", k), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")


def ideal_cycles(config: Config, m: int, k: int, n: int) -> int:
    """``ceil(M*K*N / (R*C))``: every cell of ``config``'s array busy every cycle."""
    _dims(m, k, n)
    return -(-m * k * n // (config.rows * config.cols))


def scalesim_cycles(config: Config, m: int, k: int, n: int) -> int:
    """SCALE-Sim's weight-stationary cycle estimate (see the module docstring)."""
    _dims(m, k, n)
    r, c = config.rows, config.cols
    return -(-k // r) * -(-n // c) * (2 * r + c + m - 2) - 1
