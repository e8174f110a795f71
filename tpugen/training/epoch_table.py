"""The text of a training run's report: a line per epoch with the accelerator run and its
float32 reference side by side, and the totals (``tpugen train`` prints them).

Columns: the epoch; the mean training loss, the training accuracy (the batches' forward passes
during the epoch) and the test accuracy after it, each for the accelerator run and the
reference; the epoch's training GEMMs; the mean cycles of a step's GEMMs and the array's
utilization (ideal / cycles, ``ceil(M K N / (R C))`` per GEMM) on backends that count cycles
("-" on the others); the epoch's wall seconds (the accelerator run's, test pass included).
"""

from tpugen.training.engines import GEMM_KINDS, Gemms
from tpugen.training.trainer import EpochStats

__all__ = ["pct", "epoch_header", "epoch_line", "gemm_lines"]


def pct(v: float | None) -> str:
    """``v`` (a fraction) as a percentage with one decimal, "-" for None."""
    return "-" if v is None else f"{100 * v:.1f} %"


def epoch_header(name: str, ref_name: str = "fp32") -> list[str]:
    """The two header lines of the epoch table; ``name`` labels the accelerator run."""
    pair = f"{name} / {ref_name}"
    return [f"{'epoch':>5}  {'loss':^17}  {'train accuracy':^17}  {'test accuracy':^17}  "
            f"{'GEMMs':>6}  {'cycles/step':>11}  {'util':>7}  {'seconds':>7}",
            f"{'':>5}  {pair:^17}  {pair:^17}  {pair:^17}"]


def _loss(v: float) -> str:
    return f"{v:.4f}" if abs(v) < 1000 else f"{v:.3g}"


def _pair(a: str, b: str) -> str:
    return f"{a:>8} {b:>8}"


def epoch_line(s: EpochStats, ref: EpochStats | None) -> str:
    """One epoch of the run ``s`` beside the same epoch of the reference ``ref`` (or "-")."""
    r_loss = "-" if ref is None else _loss(ref.loss)
    r_train = "-" if ref is None else pct(ref.train_acc)
    r_test = "-" if ref is None else pct(ref.test_acc)
    cyc = s.cycles_per_step
    return (f"{s.epoch:>5}  {_pair(_loss(s.loss), r_loss)}  {_pair(pct(s.train_acc), r_train)}"
            f"  {_pair(pct(s.test_acc), r_test)}  {s.gemms.count:>6}  "
            f"{'-' if cyc is None else f'{cyc:,.0f}':>11}  {pct(s.utilization):>7}  "
            f"{s.seconds:>7.1f}")


def gemm_lines(gemms: Gemms, steps: int, transposed: int) -> list[str]:
    """The GEMMs of the run by kind: count, shape total (multiply-accumulates), cycles and
    utilization when counted; then the elements the host transposed."""
    out = []
    for kind in GEMM_KINDS:
        t = gemms.tally[kind]
        if not t.count:
            continue
        line = f"  {kind:<12} {t.count:>6} GEMMs  {t.macs:>15,} MACs"
        if t.timed == t.count:
            line += f"  {t.cycles:>13,} cycles  utilization {pct(t.utilization)}"
        out.append(line)
    per_step = gemms.total().count / steps if steps else 0
    out.append(f"  {per_step:g} GEMMs per training step; the host transposed {transposed:,} "
               f"elements (W^T for dY W^T, X^T for X^T dY: the array has no transposed read)")
    return out
