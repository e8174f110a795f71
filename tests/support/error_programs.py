"""Error programs for the core: each triggers exactly one error cause (``hdl.isa.Cause``), in
its middle.

``error_program(config, cause, rng, variant=None)`` builds a program whose first error is
``cause``, recorded by an instruction in its middle (``ERROR_VARIANTS`` lists the ways; the
default picks one at random). A prologue writes known rows; after the failing instruction come
correct ones whose results show that the dropped instruction wrote nothing, that its host-in
data was discarded (or, for HOST_FRAMING, exactly the specified beats were used), and that the
next instructions work (READ_HOST, READ_WEIGHTS, MATMUL, ACTIVATE, WRITE_HOST, SYNC). A SYNC
comes right before the failing instruction and at the end: their beats report the error cause
as it was at each SYNC.
"""

import numpy as np

from support.fuzz_builder import FuzzBuilder
from tpugen.hdl import isa
from tpugen.hdl.config import Config, check_config
from tpugen.sim.program import Program
from tpugen.sim.random_data import as_rng, int8_data

__all__ = ["error_program", "ERROR_VARIANTS"]

Op, Flag, Cause = isa.Op, isa.Flag, isa.Cause

#: The ways ``error_program`` triggers each cause.
ERROR_VARIANTS: dict[Cause, tuple[str, ...]] = {
    Cause.BAD_OPCODE: ("host_data_op",),
    Cause.OUT_OF_RANGE: (
        "matmul_n0", "matmul_src", "matmul_dst", "activate_n0", "activate_src", "activate_dst",
        "activate_part", "write_ub_src", "write_ub_part", "write_acc_src", "write_acc_part",
        "write_n0", "read_host_dst", "read_host_n0", "read_weights_n0", "activate_qset",
        "read_quant_n0", "read_quant_dst"),
    Cause.NO_TILE: ("new_tile_empty", "new_tile_at_start", "reuse_before_take"),
    Cause.WEIGHT_OVERFLOW: ("overflow", "overflow_short_data"),
    Cause.HOST_FRAMING: ("host_early", "host_missing", "weights_early", "weights_missing",
                         "quant_early", "quant_missing"),
}


def error_program(config: Config, cause, rng, *, variant: str | None = None) -> Program:
    """A program whose only recorded error is ``cause``, from an instruction in its middle,
    followed by correct instructions whose results show the error's effects (see the module
    docstring). ``variant`` is one of ``ERROR_VARIANTS[cause]`` (default: random); ``rng``: a
    ``numpy.random.Generator`` or a seed.

    Needs ``ub_rows >= 4`` and ``acc_rows >= 4``; some variants need more (``ValueError``).
    """
    check_config(config)
    cause = Cause(cause)
    if cause == Cause.NONE:
        raise ValueError("cause must be an error cause, not NONE")
    rng = as_rng(rng)
    variants = ERROR_VARIANTS[cause]
    if variant is None:
        variant = str(rng.choice(variants))
    if variant not in variants:
        raise ValueError(f"variant of {cause.name} must be one of {variants}, not {variant!r}")
    if config.ub_rows < 4 or config.acc_rows < 4:
        raise ValueError("error_program needs ub_rows >= 4 and acc_rows >= 4")
    c = _Case(config, rng, variant)
    c.prologue()
    qcheck = _FAILING[variant](c, variant)
    c.epilogue(qcheck)
    return c.p


class _Case:
    """An error program being built: its builder ``b`` (program ``p``), the rows the prologue
    writes (the UB's first ``U`` and last ``E`` rows from ``hi_ub``, the ACC's first ``A`` and
    last ``E`` rows from ``hi_acc``) and the helpers of the failing instructions."""

    def __init__(self, cfg: Config, rng, variant: str):
        self.cfg, self.rng = cfg, rng
        self.R, self.C, self.depth = cfg.rows, cfg.cols, cfg.weight_fifo_depth
        self.UB, self.AC, self.sets = cfg.ub_rows, cfg.acc_rows, cfg.quant_sets
        self.b = FuzzBuilder(cfg, rng)
        self.p = self.b.p
        self.ub_parts = isa.parts(Op.WRITE_HOST, 0, cfg)
        self.act_parts = isa.parts(Op.ACTIVATE, 0, cfg)
        self.U = U = min(8, self.UB // 2)
        self.E = E = min(4, self.UB // 2, self.AC // 2)
        self.A = min(U, self.AC // 2)
        self.hi_ub, self.hi_acc = self.UB - E, self.AC - E
        # reuse_before_take must meet no taken tile: its prologue takes none.
        self.takes = variant not in ("reuse_before_take", "new_tile_at_start")

    def prologue(self) -> None:
        """Known rows (and a taken tile, an activation, unless the variant must not)."""
        b, rng, R, U, E, A = self.b, self.rng, self.R, self.U, self.E, self.A
        b.read_quant(0, self.sets)
        b.read_host(0, int8_data(rng, (U, R)))
        b.read_host(self.hi_ub, int8_data(rng, (E, R)))
        if self.takes:
            b.read_weights(1)
            b.matmul(0, 0, A, accumulate=False, new_tile=True)
            b.matmul(U - E, self.hi_acc, E, accumulate=False, new_tile=False)
            b.activate(0, U - 1, 1, int(rng.integers(0, self.act_parts)))
        b.sync()

    def epilogue(self, qcheck) -> None:
        """After the failing instruction: the known rows are unchanged (and the parameter set
        ``qcheck`` as the failing READ_QUANT left it, unless ``None``), the next instructions
        work."""
        b, rng, R, U, E, A = self.b, self.rng, self.R, self.U, self.E, self.A
        hi_ub, hi_acc = self.hi_ub, self.hi_acc
        b.sync()
        for part in range(self.ub_parts):
            b.write_ub(0, U, part)
            b.write_ub(hi_ub, E, part)
        if self.takes:
            b.write_acc(0, A)
            b.write_acc(hi_acc, E)
            if qcheck is not None:
                b.activate(0, 0, A, 0, qset=qcheck)
                for part in range(self.ub_parts):
                    b.write_ub(0, A, part)
        # Use every queued tile (the failing instruction must not have queued or taken any),
        # then a fresh one.
        n2 = int(rng.integers(1, min(U, A) + 1))
        b.read_host(0, int8_data(rng, (n2, R)))
        dst = 0
        while b.untaken:
            b.matmul(0, dst, n2, accumulate=False, new_tile=True)
            b.write_acc(dst, n2)
            dst = A - n2 if dst == 0 else 0
        b.read_weights(1)
        b.matmul(0, hi_acc, min(n2, E), accumulate=False, new_tile=True)
        b.matmul(1 if U > n2 else 0, hi_acc, min(n2, E), accumulate=True, new_tile=False)
        b.read_quant(0, 1, tame=True)
        b.activate(hi_acc, hi_ub, min(n2, E), int(rng.integers(0, self.act_parts)), qset=0)
        b.write_acc(hi_acc, min(n2, E))
        for part in range(self.ub_parts):
            b.write_ub(hi_ub, E, part)
        b.sync()

    @staticmethod
    def word(op, flags=0, **f) -> int:
        f = {"src": 0, "dst": 0, "n": 1, "part": 0, **f}
        return isa.encode(op, flags, **f)

    def junk(self, beats: int) -> np.ndarray:
        return int8_data(self.rng, (beats, self.b.lanes))

    def over(self, rows: int, n: int) -> int:
        """A start so that start + n > rows (just over, or far over, or at 0xFFFF)."""
        rng = self.rng
        k = rng.random()
        if k < 0.5:
            if n > rows:
                return 0
            return min(rows - n + int(rng.integers(1, min(n, 4) + 1)), 0xFFFF)
        if k < 0.8:
            return int(rng.integers(rows, 0x10000))
        return 0xFFFF

    def big_n(self, rows: int) -> int:
        """n with 0 + n > rows (so src/dst 0 is over)."""
        rng = self.rng
        return int(rng.choice([rows + 1, 0xFFFF, int(rng.integers(rows + 1, 0x10000))]))

    def misframed(self, data: np.ndarray, early: bool) -> tuple[np.ndarray, np.ndarray]:
        """``data`` (all the beats an instruction specifies) with ``last`` early (on a beat
        before the final one, the rest dropped) or missing (1..3 junk beats more, ``last`` on
        the final junk beat): ``(data, last)``."""
        last = np.zeros(len(data), dtype=bool)
        if early:
            k = int(self.rng.integers(0, len(data) - 1))
            data, last = data[:k + 1], last[:k + 1]
            last[k] = True
        else:
            extra = int(self.rng.integers(1, 4))
            data = np.concatenate([data, self.junk(extra)])
            last = np.concatenate([last, np.zeros(extra, dtype=bool)])
            last[-1] = True
        return data, last


# --- the failing instruction ---------------------------------------------------------------
# Each function appends it for its variants and returns the parameter set it addressed (shown
# afterwards), or None.

def _bad_word(c: _Case, variant: str):
    """BAD_OPCODE and the OUT_OF_RANGE instructions without host-in data."""
    rng, word, over, p = c.rng, c.word, c.over, c.p
    E, A, UB, AC, hi_ub, hi_acc = c.E, c.A, c.UB, c.AC, c.hi_ub, c.hi_acc
    if variant == "host_data_op":     # every opcode without host data is an instruction
        op = int(rng.choice([8, 13, 14, 15]))
        p.raw((int(rng.integers(0, 1 << 60)) << 4) | op, c.junk(int(rng.integers(1, 5))))
    elif variant == "matmul_n0":
        p.raw(word(Op.MATMUL, Flag.NEW_TILE | Flag.ACCUMULATE, src=0, dst=hi_acc, n=0))
    elif variant == "matmul_src":
        n = int(rng.integers(1, E + 1))
        p.raw(word(Op.MATMUL, Flag.ACCUMULATE, src=over(UB, n), dst=hi_acc, n=n))
    elif variant == "matmul_dst":
        n = int(rng.integers(2, E + 2))
        if rng.random() < 0.3:
            p.raw(word(Op.MATMUL, 0, src=0, dst=0, n=c.big_n(AC)))
        else:
            p.raw(word(Op.MATMUL, 0, src=0, dst=over(AC, n), n=n))
    elif variant == "activate_n0":
        p.raw(word(Op.ACTIVATE, src=0, dst=hi_ub, n=0))
    elif variant == "activate_src":
        n = int(rng.integers(1, E + 1))
        p.raw(word(Op.ACTIVATE, src=over(AC, n), dst=hi_ub, n=n))
    elif variant == "activate_dst":
        n = min(int(rng.integers(2, E + 2)), A)
        p.raw(word(Op.ACTIVATE, src=0, dst=over(UB, n), n=n))
    elif variant == "activate_part":
        part = c.act_parts + int(rng.choice([0, 0, 1, 254 - c.act_parts]))
        p.raw(word(Op.ACTIVATE, src=0, dst=hi_ub, n=E, part=min(part, 0xFF)))
    elif variant == "activate_qset":
        if c.sets == 16:
            raise ValueError("activate_qset needs quant_sets < 16")
        p.raw(word(Op.ACTIVATE, int(rng.integers(c.sets, 16)), src=0, dst=hi_ub, n=E))
    elif variant == "write_ub_src":
        n = int(rng.integers(1, E + 2))
        p.raw(word(Op.WRITE_HOST, src=over(UB, n), n=n))
    elif variant == "write_ub_part":
        part = c.ub_parts + int(rng.choice([0, 0, 1, 200]))
        p.raw(word(Op.WRITE_HOST, src=0, n=2, part=min(part, 0xFF)))
    elif variant == "write_acc_src":
        n = int(rng.integers(1, E + 2))
        p.raw(word(Op.WRITE_HOST, Flag.FROM_ACC, src=over(AC, n), n=n))
    elif variant == "write_acc_part":
        p.raw(word(Op.WRITE_HOST, Flag.FROM_ACC, src=0, n=2, part=int(rng.integers(1, 256))))
    else:
        assert variant == "write_n0", variant
        p.raw(word(Op.WRITE_HOST, int(rng.integers(0, 2)), src=0, n=0))
    return None


def _bad_read(c: _Case, variant: str):
    """The OUT_OF_RANGE instructions with host-in data (which is discarded)."""
    rng, word, p, sets = c.rng, c.word, c.p, c.sets
    if variant == "read_host_dst":
        n = int(rng.integers(2, c.E + 2))
        p.raw(word(Op.READ_HOST, dst=c.over(c.UB, n), n=n), c.junk(n))
    elif variant == "read_host_n0":
        p.raw(word(Op.READ_HOST, dst=0, n=0), c.junk(int(rng.integers(1, 4))))
    elif variant == "read_weights_n0":
        p.raw(word(Op.READ_WEIGHTS, n=0), c.junk(int(rng.integers(1, 4))))
    elif variant == "read_quant_n0":
        p.raw(word(Op.READ_QUANT, dst=0, n=0), c.junk(int(rng.integers(1, 4))))
    else:
        assert variant == "read_quant_dst", variant
        n = int(rng.integers(1, sets + 1))
        dst = c.over(sets, n) if rng.random() < 0.7 else sets - n + 1
        p.raw(word(Op.READ_QUANT, dst=dst, n=n), c.junk(n * isa.QUANT_BEATS))
        return min(dst, sets - 1)
    return None


def _bad_tile(c: _Case, variant: str):
    """NO_TILE and WEIGHT_OVERFLOW."""
    rng, word, p, b, depth = c.rng, c.word, c.p, c.b, c.depth
    if variant in ("new_tile_empty", "new_tile_at_start"):
        p.raw(word(Op.MATMUL, Flag.NEW_TILE | int(rng.integers(0, 2)), src=0, dst=c.hi_acc,
                   n=c.E))
    elif variant == "reuse_before_take":
        b.read_weights(int(rng.integers(1, depth + 1)))
        p.raw(word(Op.MATMUL, int(rng.integers(0, 2)), src=0, dst=c.hi_acc, n=c.E))
    else:
        assert variant in ("overflow", "overflow_short_data"), variant
        if depth > 1 and rng.random() < 0.7:
            b.read_weights(int(rng.integers(1, depth)))
        n = depth - b.untaken + int(rng.integers(1, 3))
        beats = n * c.R if variant == "overflow" else int(rng.integers(1, 3))
        p.raw(word(Op.READ_WEIGHTS, n=n), c.junk(beats))
    return None


def _bad_framing(c: _Case, variant: str):
    """HOST_FRAMING: ``last`` early or missing on READ_QUANT, READ_HOST or READ_WEIGHTS."""
    rng, word, p, b = c.rng, c.word, c.p, c.b
    early = variant.endswith("_early")
    qcheck = None
    if variant.startswith("quant_"):
        n = int(rng.integers(1, c.sets + 1))
        dst = qcheck = int(rng.integers(0, c.sets - n + 1))
        data = b.beats(np.concatenate([b.quant_set() for _ in range(n)]), c.C)
        p.raw(word(Op.READ_QUANT, dst=dst, n=n), *c.misframed(data, early))
    elif variant.startswith("host_"):
        n = int(rng.integers(2, c.U + 1))
        dst = int(rng.integers(0, c.U - n + 1))
        p.raw(word(Op.READ_HOST, dst=dst, n=n), *c.misframed(c.junk(n), early))
    else:
        assert variant.startswith("weights_"), variant
        n = min(c.depth - b.untaken, 2)
        if n < 1 or n * c.R < 2 and early:
            raise ValueError(f"{variant} needs a free FIFO slot and 2 weight beats "
                             f"(rows={c.R}, weight_fifo_depth={c.depth})")
        data = b.beats(int8_data(rng, (n * c.R, c.C)), c.C)
        p.raw(word(Op.READ_WEIGHTS, n=n), *c.misframed(data, early))
        b.untaken += n        # the tiles are queued anyway (missing rows as zeros)
    return qcheck


#: The OUT_OF_RANGE variants with host-in data (``_bad_read``).
_READS = ("read_host_dst", "read_host_n0", "read_weights_n0", "read_quant_n0", "read_quant_dst")

#: Variant -> the function that appends its failing instruction.
_FAILING = {
    **dict.fromkeys(ERROR_VARIANTS[Cause.BAD_OPCODE], _bad_word),
    **{v: _bad_read if v in _READS else _bad_word for v in ERROR_VARIANTS[Cause.OUT_OF_RANGE]},
    **dict.fromkeys(ERROR_VARIANTS[Cause.NO_TILE] + ERROR_VARIANTS[Cause.WEIGHT_OVERFLOW],
                    _bad_tile),
    **dict.fromkeys(ERROR_VARIANTS[Cause.HOST_FRAMING], _bad_framing),
}
assert set(_FAILING) == {v for vs in ERROR_VARIANTS.values() for v in vs}
