"""How much memory a GEMM needs on the host, checked before anything large is allocated.

``gemm_bytes(config, m, k, n)`` estimates the host memory of an M x K x N GEMM: the operands as
int64, the program's host-in lanes (each operand row padded to ``max(R, C)`` lanes, with the
copies the compiler and the backends make) and the results (the golden model's and the
backend's). ``check_gemm_memory`` raises ``GemmTooLarge`` (a ``MemoryError``) naming the shape,
the estimate and the memory available when the estimate is larger; ``Accelerator.matmul`` and
the command line both call it before they allocate.
"""

from pathlib import Path

from tpugen.hdl.config import Config, check_config

__all__ = ["GemmTooLarge", "available_memory", "gemm_bytes", "check_gemm_memory"]


class GemmTooLarge(MemoryError):
    """A GEMM whose host memory estimate exceeds the memory available."""


def available_memory() -> int | None:
    """Bytes of memory available (Linux ``MemAvailable``), or None when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def gemm_bytes(config: Config, m: int, k: int, n: int) -> int:
    """The estimated host memory of an ``m x k x n`` GEMM on ``config`` (bytes)."""
    check_config(config)
    lanes = max(config.rows, config.cols)
    return 8 * (m * k + k * n + 3 * (m * k * lanes // config.rows + k * n * lanes // config.cols
                                     + 2 * m * n))


def check_gemm_memory(config: Config, m: int, k: int, n: int, what: str = "the GEMM") -> None:
    """Raise ``GemmTooLarge`` when ``gemm_bytes`` exceeds ``available_memory`` (``what`` names
    the operands in the message)."""
    need = gemm_bytes(config, m, k, n)
    avail = available_memory()
    if avail is not None and need > avail:
        raise GemmTooLarge(f"{what}: a {m} x {k} x {n} GEMM needs about {need / 2**30:.1f} GiB "
                           f"of memory (operands, program, results), more than the "
                           f"{avail / 2**30:.1f} GiB available")
