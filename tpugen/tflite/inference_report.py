"""The report of a model run (``TFLiteModel.last``): per op where it ran, its GEMM, its own
multiply-accumulates, cycles and utilization; per chain its cycles; the totals.

Two utilizations are given. **Model utilization** counts the model's own MACs: ``macs / (R *
C * cycles)``, where a depthwise convolution's MACs are its taps (``KH * KW`` per output
value), not the block-diagonal GEMM's ``KH * KW * Cin``. **GEMM utilization** is ``ideal /
cycles`` with ``ideal = ceil(M * K * N / (R * C))`` of the GEMM the array ran, zeros
included: for a depthwise layer it is ``Cin`` times the model's.
"""

from dataclasses import dataclass, field

__all__ = ["OpRun", "ChainRun", "InferenceReport"]


def _pct(part, whole) -> str:
    return "n/a" if not whole else f"{100 * part / whole:.1f} %"


@dataclass
class OpRun:
    """One op of a run: ``where`` it ran (``"host"``, or ``"<backend>, chain <n>"``, with
    ``", on chip"`` when its input came from the previous layer on chip); for a GEMM op its
    ``shape`` (M, K, N), ``ideal`` cycles (``ceil(M*K*N / (R*C))``), ``macs`` (the model's own
    multiply-accumulates, every sample), ``chain`` number and ``cycles``: its program's cycles
    when it ran alone in one, else ``None`` (the layers of one program overlap: their cycles
    are the ``ChainRun``'s; and the ``model`` backend counts none). Host ops have ``shape``,
    ``ideal``, ``macs`` and ``chain`` ``None``."""

    index: int
    name: str
    where: str
    shape: tuple | None = None
    ideal: int | None = None
    chain: int | None = None
    cycles: int | None = None
    macs: int | None = None

    @property
    def utilization(self) -> float | None:
        """GEMM utilization, ``ideal / cycles`` (``None`` without cycles)."""
        return None if not self.cycles or self.ideal is None else self.ideal / self.cycles


@dataclass
class ChainRun:
    """One chain of a run: its ``number``, its ops' indices, ``programs`` (one, or more after
    host round trips inside the chain), ``cycles`` (every program's; ``None`` when the backend
    counts none), ``ideal`` cycles and the model's ``macs``."""

    number: int
    ops: list
    programs: int
    ideal: int
    cycles: int | None = None
    macs: int = 0

    @property
    def utilization(self) -> float | None:
        return None if not self.cycles else self.ideal / self.cycles


@dataclass
class InferenceReport:
    """A model run: ``ops`` (one ``OpRun`` per op, model order), ``chains`` (one ``ChainRun``
    each), the array's ``rows`` x ``cols``, the ``backend`` and the number of ``samples``."""

    backend: str
    rows: int
    cols: int
    samples: int
    ops: list = field(default_factory=list)
    chains: list = field(default_factory=list)

    @property
    def cycles(self) -> int | None:
        """Accelerator cycles of the whole run (every chain's programs; ``None`` when the
        backend counts none, or the model has no GEMM op)."""
        runs = [c.cycles for c in self.chains]
        return sum(runs) if runs and all(c is not None for c in runs) else None

    @property
    def ideal(self) -> int:
        return sum(c.ideal for c in self.chains)

    @property
    def macs(self) -> int:
        """The model's own multiply-accumulates in this run (every sample)."""
        return sum(c.macs for c in self.chains)

    @property
    def utilization(self) -> float | None:
        """GEMM utilization of the whole run (``ideal / cycles``)."""
        total = self.cycles
        return None if not total else self.ideal / total

    @property
    def model_utilization(self) -> float | None:
        """Utilization in the model's MACs: ``macs / (rows * cols * cycles)``."""
        total = self.cycles
        return None if not total else self.macs / (self.rows * self.cols * total)

    def lines(self) -> list[str]:
        """The report as text: a table of the ops, a line per chain of more than one layer,
        the totals."""
        cells = self.rows * self.cols
        out = [f"{'op':>3}  {'name':<18} {'ran on':<30} {'GEMM M x K x N':<20} {'MACs':>11} "
               f"{'cycles':>10} {'util':>7} {'ideal':>10} {'GEMM util':>9}"]
        for o in self.ops:
            if o.shape is None:
                out.append(f"{o.index:>3}  {o.name:<18} {o.where}")
                continue
            shape = " x ".join(str(v) for v in o.shape)
            cycles = "-" if o.cycles is None else str(o.cycles)
            util = "" if o.cycles is None else _pct(o.macs, cells * o.cycles)
            gemm = "" if o.cycles is None else _pct(o.ideal, o.cycles)
            out.append(f"{o.index:>3}  {o.name:<18} {o.where:<30} {shape:<20} {o.macs:>11} "
                       f"{cycles:>10} {util:>7} {o.ideal:>10} {gemm:>9}")
        for c in self.chains:
            if len(c.ops) > 1:
                programs = "one program" if c.programs == 1 else f"{c.programs} programs"
                cycles = ("cycles not counted" if c.cycles is None else
                          f"{c.cycles} cycles, utilization {_pct(c.macs, cells * c.cycles)} "
                          f"(GEMM {_pct(c.ideal, c.cycles)})")
                out.append(f"chain {c.number}: ops {', '.join(map(str, c.ops))} in "
                           f"{programs}: {c.macs} MACs, {cycles} (ideal {c.ideal})")
        total = self.cycles
        n = self.samples
        counted = (f"cycles not counted by the {self.backend} backend" if total is None else
                   f"{total} cycles ({total / n:.0f} per sample), utilization "
                   f"{_pct(self.macs, cells * total)} in model MACs (GEMM "
                   f"{_pct(self.ideal, total)})")
        out.append(f"accelerator: {self.backend} backend, {self.rows} x {self.cols} array, "
                   f"{n} sample(s), {self.macs} model MACs ({self.macs // n} per sample): "
                   f"{counted}; ideal {self.ideal} ({self.ideal / n:.0f} per sample)")
        return out
