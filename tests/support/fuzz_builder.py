"""The instruction builder of the program fuzzers (``support.random_programs``,
``support.error_programs``): valid instructions with random junk in everything they ignore, and the
state that validity depends on.

Junk (``junk=True``): the body fields an op does not use (``hdl.isa.OpSpec.fields``) and the
flag bits it does not use (``OpSpec.flags``) are often random, and so are the host-in lanes an
instruction does not read. The builder tracks the weight tiles requested but not yet taken,
whether a tile was ever taken, and the rows the latest instructions touched
(``hdl.isa.accesses``), from which ``hazard_rows`` picks rows that conflict with them.
"""

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.layouts import host_lanes
from tpugen.sim.program import Program
from tpugen.sim.quant_beats import raw_set_beats
from tpugen.sim.random_data import int8_data

__all__ = ["FuzzBuilder", "QUANT_EDGES"]

Op, Flag = isa.Op, isa.Flag

#: Requantization parameters worth hitting (READ_QUANT), mixed at random with random values:
#: per lane bias, multiplier and shift; per set zero point and bounds (lo > hi too).
QUANT_EDGES = {
    "bias": [0, -1, 1, (1 << 31) - 1, -(1 << 31), 12345],
    "mult": [1, -1, 0, 2, (1 << 31) - 1, -(1 << 31), (1 << 30), -(1 << 30) - 1, 3 << 29, -77],
    "shift": [0, 0, -1, 1, -2, 7, -15, 30, 31, -31, -32],
    "zp": [0, -128, 127, -1, 1, 5, -100],
    "bound": [-128, 127, 0, -1, 1, 50],
}


class FuzzBuilder:
    """Appends instructions to ``self.p`` (a ``Program``) and tracks what validity depends on:
    ``untaken`` (tiles requested, not taken), ``taken`` (a tile was ever taken), ``loaded``
    (the parameter sets a READ_QUANT wrote: an ACTIVATE uses one of them, since the sets keep
    their values across a reset and the golden model's start from zero) and ``recent`` (per
    op, buffer and read / write: the rows ``(lo, n)`` its latest instruction touched).

    The instruction methods append valid instructions when their rows are in the buffers; they
    assert the weight-FIFO rules.
    """

    def __init__(self, config: Config, rng: np.random.Generator, *, junk: bool = True):
        check_config(config)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, not {rng!r}")
        self.cfg = config
        self.rng = rng
        self.junk = junk
        self.p = Program(config)
        self.untaken = 0
        self.taken = False
        self.loaded: set[int] = set()
        self.recent: dict[tuple[int, isa.Buffer, bool], tuple[int, int]] = {}
        self.lanes = host_lanes(config)

    # --- encoding ----------------------------------------------------------------------------
    def _junk_flags(self, used: int) -> int:
        """Random values in the flag bits outside ``used``."""
        if not self.junk or self.rng.random() < 0.6:
            return 0
        return int(self.rng.integers(0, 16)) & ~used & 0xF

    def _junk_field(self, field: isa.Field) -> int:
        if not self.junk or self.rng.random() < 0.6:
            return 0
        v = int(self.rng.choice([0, 1, 0xFF, 0xFFFF, int(self.rng.integers(0, 0x10000))]))
        return v & field.mask

    def word(self, op: Op, flags: int = 0, **fields) -> int:
        """The word of a valid ``op`` with ``flags`` and the fields it uses (``fields``); junk in
        the fields and flag bits it ignores."""
        spec = isa.OPS[op]
        values = {}
        for f in isa.body_fields(op):
            # (a field the op uses only with some flags, MATMUL's part, NOP's body: junk when
            # not given)
            values[f.name] = fields[f.name] if f.name in fields else self._junk_field(f)
        return isa.encode(op, int(flags) | self._junk_flags(spec.flag_mask), **values)

    def beats(self, rows: np.ndarray, used: int) -> np.ndarray:
        """Host-in beats with ``rows`` in lanes 0..used-1 and junk (or 0) in the lanes above."""
        data = int8_data(self.rng, (len(rows), self.lanes))
        if not self.junk:
            data[:, used:] = 0
        data[:, :used] = rows
        return data

    def append(self, word: int, data=None) -> None:
        """Append a valid instruction (and its host-in beats) and note the rows it touches."""
        self.p.raw(word, data)
        f = self.p[-1].fields
        for buffer, lo, hi, write in isa.accesses(f, self.cfg):
            self.recent[f["op"], buffer, write] = (lo, hi - lo)

    def hazard_rows(self, buffer: isa.Buffer, write: bool) -> list[tuple[int, int]]:
        """The ``(lo, n)`` rows of recent instructions that an access of ``buffer`` (a write when
        ``write``) conflicts with: same buffer, one of the two writing."""
        return [rows for (_, buf, w), rows in self.recent.items()
                if buf == buffer and (write or w)]

    # --- instructions --------------------------------------------------------------------------
    def read_host(self, dst: int, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        self.append(self.word(Op.READ_HOST, dst=dst, n=len(rows)), self.beats(rows, self.cfg.rows))
        return rows

    def read_weights(self, n: int) -> np.ndarray:
        R, C = self.cfg.rows, self.cfg.cols
        assert self.untaken + n <= self.cfg.weight_fifo_depth
        tiles = int8_data(self.rng, (n, R, C))
        self.append(self.word(Op.READ_WEIGHTS, n=n), self.beats(tiles.reshape(n * R, C), C))
        self.untaken += n
        return tiles

    def matmul(self, src: int, dst: int, n: int, *, accumulate: bool, new_tile: bool) -> None:
        if new_tile:
            assert self.untaken > 0
            self.untaken -= 1
            self.taken = True
        else:
            assert self.taken
        flags = (Flag.ACCUMULATE if accumulate else 0) | (Flag.NEW_TILE if new_tile else 0)
        self.append(self.word(Op.MATMUL, flags, src=src, dst=dst, n=n))

    def activate(self, src: int, dst: int, n: int, part: int = 0, qset=None) -> None:
        """ACTIVATE with parameter set ``qset`` (default: a loaded one at random)."""
        if qset is None:
            qset = int(self.rng.choice(sorted(self.loaded)))
        assert qset in self.loaded
        self.append(self.word(Op.ACTIVATE, qset, src=src, dst=dst, n=n, part=part))

    def write_ub(self, src: int, n: int, part: int = 0) -> None:
        self.append(self.word(Op.WRITE_HOST, 0, src=src, n=n, part=part))

    def write_acc(self, src: int, n: int) -> None:
        self.append(self.word(Op.WRITE_HOST, Flag.FROM_ACC, src=src, n=n, part=0))

    def quant_set(self, *, tame: bool = False) -> np.ndarray:
        """The beats of one random parameter set: values from ``QUANT_EDGES`` or random
        (``tame``: multipliers in 2**15..2**16, right shifts 4..11, bounds -128..127, so that
        results spread over int8)."""
        rng, e, c = self.rng, QUANT_EDGES, self.cfg.cols

        def lanes(name, lo, hi):
            edge = rng.choice(e[name], c)
            return np.where(rng.random(c) < 0.5, edge, rng.integers(lo, hi, c, endpoint=True))

        if tame:
            return raw_set_beats(rng.integers(-999, 1000, c), rng.integers(1 << 15, 1 << 16, c),
                                 rng.integers(-11, -3, c, endpoint=True), 0, -128, 127)
        zp = int(rng.choice(e["zp"])) if rng.random() < 0.7 else int(rng.integers(-128, 128))
        lo, hi = (int(rng.choice(e["bound"])) if rng.random() < 0.5
                  else int(rng.integers(-128, 128)) for _ in range(2))
        if rng.random() < 0.8:
            lo, hi = min(lo, hi), max(lo, hi)
        return raw_set_beats(lanes("bias", -(1 << 31), (1 << 31) - 1),
                             lanes("mult", -(1 << 31), (1 << 31) - 1),
                             lanes("shift", -32, 31), zp, lo, hi)

    def read_quant(self, dst: int, n: int, *, tame: bool = False) -> None:
        """READ_QUANT of ``n`` random sets (``quant_set``) into sets ``dst..``."""
        rows = np.concatenate([self.quant_set(tame=tame) for _ in range(n)])
        self.append(self.word(Op.READ_QUANT, dst=dst, n=n), self.beats(rows, self.cfg.cols))
        self.loaded.update(range(dst, dst + n))

    def store_weights(self, dst: int, n: int) -> None:
        R, C = self.cfg.rows, self.cfg.cols
        tiles = int8_data(self.rng, (n, R, C))
        self.append(self.word(Op.STORE_WEIGHTS, dst=dst, n=n),
                    self.beats(tiles.reshape(n * R, C), C))

    def load_weights(self, src: int, n: int) -> None:
        assert self.untaken + n <= self.cfg.weight_fifo_depth
        self.append(self.word(Op.LOAD_WEIGHTS, src=src, n=n))
        self.untaken += n

    def tag(self, tag: int, *, check: bool) -> None:
        """SET_TAG, or CHECK_TAG (of the tag set: no error)."""
        flags = Flag.TAG | (0 if check else Flag.STORE)
        self.append(isa.encode(Op.PROGRAM, flags, src=tag & 0xFFFF, dst=tag >> 16 & 0xFFFF,
                               n=tag >> 32 & 0xFFFF, part=tag >> 48))

    def store_program(self, dst: int, words: list[int]) -> None:
        self.append(self.word(Op.PROGRAM, Flag.STORE, src=0, dst=dst, n=len(words), part=0))
        for w in words:
            self.p.raw(w)

    def call(self, src: int, n: int) -> None:
        self.append(self.word(Op.PROGRAM, src=src, dst=0, n=n, part=0))

    def nop(self) -> None:
        self.append(self.word(Op.NOP))

    def sync(self) -> None:
        self.append(self.word(Op.SYNC))

    def read_counters(self) -> None:
        self.append(self.word(Op.READ_COUNTERS))

    def ensure_tile(self) -> bool:
        """Make a MATMUL possible; return whether it may take NEW_TILE."""
        if self.untaken == 0 and not self.taken:
            self.read_weights(1)
        return self.untaken > 0

    def matmul_any(self, src, dst, n, *, accumulate, p_new=0.5) -> None:
        """A MATMUL that takes a new tile (when one is waiting) with probability ``p_new``."""
        can_new = self.ensure_tile()
        new = can_new and (not self.taken or self.rng.random() < p_new)
        self.matmul(src, dst, n, accumulate=accumulate, new_tile=new)
