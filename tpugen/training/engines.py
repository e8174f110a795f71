"""Where a training run's GEMMs go: the accelerator (``ArrayGemms``) or float32 NumPy
(``Float32Gemms``, the reference), behind one call, ``gemms(a, b, kind) -> float32``.

``kind`` names the GEMM's role (``GEMM_KINDS``): ``forward`` (X W), ``input_grad`` (dY W^T),
``weight_grad`` (X^T dY), ``eval`` (the test set's forward pass). Both engines keep a
``GemmTally`` per kind: the number of GEMMs, their multiply-accumulates, and on backends that
count cycles the cycles and ideal cycles (``tpugen.sim.ideal_cycles``).

``ArrayGemms`` runs every GEMM through ``Accelerator.matmul``: the float32 operands are rounded
to the operand type with round-to-nearest-even by the compiler (``tpugen.sim.formats``), the
array accumulates in binary32, and the result is compared bit for bit with the golden model (a
difference raises ``tpugen.ResultMismatch``; nothing wrong is returned). fp8 operands are scaled
per tensor by a power of two first (``pow2_scale``), so their largest magnitude sits just under
the format's largest finite value and small gradients are not flushed; the binary32 result is
scaled back exactly (``numpy.ldexp``). bf16 has binary32's exponent range and is not scaled.
"""

from dataclasses import dataclass

import numpy as np

from tpugen.accelerator import Accelerator

__all__ = ["GEMM_KINDS", "GemmTally", "Gemms", "ArrayGemms", "Float32Gemms", "pow2_scale",
           "float_operand"]

#: The roles of a training run's GEMMs.
GEMM_KINDS = ("forward", "input_grad", "weight_grad", "eval")


@dataclass
class GemmTally:
    """GEMMs counted: ``count``, ``macs`` (M K N summed), ``cycles`` and ``ideal`` (summed over
    the GEMMs whose backend counted cycles: ``timed`` of them)."""

    count: int = 0
    macs: int = 0
    cycles: int = 0
    ideal: int = 0
    timed: int = 0

    def add(self, other: "GemmTally") -> "GemmTally":
        return GemmTally(*(getattr(self, f) + getattr(other, f) for f in _FIELDS))

    def minus(self, other: "GemmTally") -> "GemmTally":
        return GemmTally(*(getattr(self, f) - getattr(other, f) for f in _FIELDS))

    @property
    def utilization(self) -> float | None:
        """Ideal cycles / cycles of the timed GEMMs (None when none was timed)."""
        return self.ideal / self.cycles if self.cycles else None


_FIELDS = ("count", "macs", "cycles", "ideal", "timed")


def float_operand(config) -> str:
    """The config's operand type's name; ``TypeError`` unless it is a float type (training needs
    bf16, fp8_e4m3 or fp8_e5m2)."""
    t = config.operand_type
    if not t.is_float:
        raise TypeError(f"training needs a float operand type (bf16, fp8_e4m3 or fp8_e5m2), "
                        f"not {t.name}")
    return t.name


def pow2_scale(x: np.ndarray, top: float) -> int:
    """The exponent k for which ``max |x| * 2**k`` is at most ``top`` and above ``top / 2``
    (0 for an all-zero or non-finite ``x``)."""
    amax = float(np.max(np.abs(x))) if x.size else 0.0
    if not amax > 0 or not np.isfinite(amax):
        return 0
    k = int(np.floor(np.log2(top / amax)))
    while np.ldexp(amax, k) > top:        # log2's rounding, on the edge
        k -= 1
    return k


class Gemms:
    """The tallies every engine keeps (``tally[kind]``; ``total()`` over the training kinds)."""

    def __init__(self):
        self.tally = {k: GemmTally() for k in GEMM_KINDS}

    def _count(self, kind: str, shape, cycles=None, ideal=0) -> None:
        if kind not in self.tally:
            raise ValueError(f"kind must be one of {', '.join(GEMM_KINDS)}, not {kind!r}")
        m, k, n = shape
        timed = cycles is not None
        self.tally[kind] = self.tally[kind].add(
            GemmTally(1, m * k * n, cycles or 0, ideal if timed else 0, int(timed)))

    def total(self, kinds=("forward", "input_grad", "weight_grad")) -> GemmTally:
        """The tallies of ``kinds`` (default: the training GEMMs, not ``eval``) summed."""
        out = GemmTally()
        for k in kinds:
            out = out.add(self.tally[k])
        return out


class ArrayGemms(Gemms):
    """GEMMs on ``accelerator`` (a float operand type: else ``TypeError``), each through
    ``Accelerator.matmul`` and checked by it. ``scale`` (default: fp8 types only) scales each
    operand by a power of two (``pow2_scale``) before it is rounded to the operand type."""

    def __init__(self, accelerator: Accelerator, *, scale: bool | None = None):
        super().__init__()
        if not isinstance(accelerator, Accelerator):
            raise TypeError(f"accelerator must be a tpugen.Accelerator, not {accelerator!r}")
        self.operand = float_operand(accelerator.config)
        self.accelerator = accelerator
        self.scale = self.operand.startswith("fp8") if scale is None else bool(scale)
        self.top = float(accelerator.config.operand_type.max_finite)

    @property
    def name(self) -> str:
        return f"{self.accelerator.backend_name}, {self.operand}"

    def __call__(self, a: np.ndarray, b: np.ndarray, kind: str) -> np.ndarray:
        """``a @ b`` (float32 in, float32 out: the array's binary32 sums of the rounded
        operands), checked against the golden model."""
        ka = kb = 0
        if self.scale:
            ka, kb = pow2_scale(a, self.top), pow2_scale(b, self.top)
            a, b = np.ldexp(a, ka).astype(np.float32), np.ldexp(b, kb).astype(np.float32)
        c = self.accelerator.matmul(a, b)
        report = self.accelerator.last
        self._count(kind, report.shape, report.cycles, report.ideal)
        return np.ldexp(c, -(ka + kb)).astype(np.float32) if ka + kb else c


class Float32Gemms(Gemms):
    """The reference: ``a @ b`` in float32 NumPy (no rounding of the operands, no cycles)."""

    name = "NumPy float32"

    def __call__(self, a: np.ndarray, b: np.ndarray, kind: str) -> np.ndarray:
        self._count(kind, (a.shape[0], a.shape[1], b.shape[1]))
        return np.matmul(a.astype(np.float32), b.astype(np.float32), dtype=np.float32)
