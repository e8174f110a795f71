"""The emitter: instructions appended as columns, output instructions deferred until due.

An output instruction (ACTIVATE, WRITE_HOST) waits until the MATMULs it is due after have been
emitted (``OutputAction.due``), and is emitted earlier than that when a later instruction
touches the buffer rows it uses (``isa.conflict``), so the program's sequential meaning never
changes. ``Emitter.flush_due`` emits the due ones as far as an interval's host-out and
activation time allows (at least one each).

READ_QUANT: the requantization parameters of every (layer, n-tile) go up front when they fit
the parameter sets (``Config.quant_sets``). Else, after each ACTIVATE, the next key's set is
prefetched into another set (when it fits an interval's host-in time), and an ACTIVATE whose
set no set holds loads it right before, into the sets in turn.

The host-out stream is the output WRITE_HOSTs' beats in program order (``OutputBlock``: where each
one's beats go in the result), then the SYNC beat.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.program import Program

__all__ = ["OutputBlock", "OutputAction", "Emitter", "InstructionWords"]


@dataclass(frozen=True)
class OutputBlock:
    """Where one output WRITE_HOST's beats go in the result: ``parts * rows`` beats; beat
    p*rows + i holds result row m0 + i, columns col0 + p*width + (0..width-1)."""

    m0: int
    rows: int
    col0: int
    width: int
    parts: int
    cols_end: int   # first column past this n-tile


@dataclass
class OutputAction:
    """An output instruction waiting until ``due`` MATMULs have been emitted. ``engine``: "ho"
    or "av"; ``cost``: its cycles on that engine."""

    word: int
    due: int
    engine: str
    cost: int
    quant: tuple | None = None      # the key (layer, n-tile) of an ACTIVATE's parameters
    block: OutputBlock | None = None


class Emitter:
    """Appends instructions as columns (words, host-in beats, where the beats come from);
    defers output instructions until due, hazards permitting.

    Host-in data is not copied per instruction: each instruction that carries data records
    runs (start, count) of rows of a source table (``schedule.host_in_table``: A's k-tiles,
    the weight tiles and the parameter sets); ``program(table)`` gathers them once.
    ``output_blocks``: the output WRITE_HOSTs' ``OutputBlock`` in program order.

    ``quant_rows``: the table row of each parameter set's beats, by key (layer, n-tile). When
    they all fit ``Config.quant_sets``, one READ_QUANT loads them up front. Else an ACTIVATE's
    set is loaded before it when no set holds it, into the sets in turn; and after an ACTIVATE,
    ``prefetch_set`` loads the set of the next key in ``quant_order`` (the keys of the
    ACTIVATEs in program order) into another set, so that its READ_QUANT is long done when
    that ACTIVATE comes."""

    def __init__(self, config: Config, quant_rows: dict | None = None, quant_order=()):
        self.config = config
        self.words: list[int] = []
        self.beats: list[int] = []
        self.run_start: list[int] = []
        self.run_count: list[int] = []
        self.pending: deque[OutputAction] = deque()
        self.quant_rows = quant_rows or {}
        self.quant_order = list(quant_order)
        self.activates = 0                     # ACTIVATEs emitted so far
        self.in_set: dict = {}                 # key -> the parameter set holding it
        self.turn = 0                          # the next set to load into, in turn
        self.quant_sets_fit = len(self.quant_rows) <= config.quant_sets
        self.matmuls = 0                       # MATMULs emitted so far
        self.output_blocks: list[OutputBlock] = []
        self._accesses: dict[int, list] = {}
        self._conflicts: dict[tuple[int, int], bool] = {}

    def _conflict(self, a: int, b: int) -> bool:
        """Whether the instructions ``a`` and ``b`` (words) touch a common buffer row, one
        writing it (``isa.conflict``; cached per pair of words)."""
        key = (a, b)
        hit = self._conflicts.get(key)
        if hit is None:
            rows = []
            for w in key:
                acc = self._accesses.get(w)
                if acc is None:
                    acc = self._accesses[w] = isa.accesses(isa.decode(w), self.config)
                rows.append(acc)
            hit = self._conflicts[key] = isa.conflict(*rows)
        return hit

    def _append(self, word: int, data=()) -> None:
        self.words.append(word)
        beats = 0
        for start, count in data:
            self.run_start.append(start)
            self.run_count.append(count)
            beats += count
        self.beats.append(beats)

    def load_all_quant(self) -> None:
        """READ_QUANT of every parameter set up front, when they all fit."""
        keys = list(self.quant_rows)
        if keys and self.quant_sets_fit:
            self._append(isa.encode(isa.Op.READ_QUANT, dst=0, n=len(keys)),
                         [(self.quant_rows[k], isa.QUANT_BEATS) for k in keys])
            self.in_set = {k: s for s, k in enumerate(keys)}

    def _load_set(self, key, keep=None) -> int:
        """READ_QUANT of ``key``'s parameters into the next set in turn that does not hold
        ``keep``; the set."""
        s = self.turn
        if self.in_set.get(keep) == s:
            s = (s + 1) % self.config.quant_sets
        self.turn = (s + 1) % self.config.quant_sets
        self.in_set = {k: v for k, v in self.in_set.items() if v != s}
        self._append(isa.encode(isa.Op.READ_QUANT, dst=s, n=1),
                     [(self.quant_rows[key], isa.QUANT_BEATS)])
        self.in_set[key] = s
        return s

    def _quant_set(self, key) -> int:
        """The parameter set holding ``key``'s parameters, loaded now if none does."""
        s = self.in_set.get(key)
        return self._load_set(key) if s is None else s

    def prefetch_set(self, budget: int) -> int:
        """Load the set of the next ACTIVATE's key that no set holds, into a set that does
        not hold the last ACTIVATE's key (when there is one and its beats fit ``budget``);
        the host-in beats it took."""
        if (self.quant_sets_fit or self.config.quant_sets < 2 or not self.activates
                or budget < isa.QUANT_BEATS):
            return 0
        last = self.quant_order[self.activates - 1]
        for nxt in self.quant_order[self.activates:]:
            if nxt != last:
                if nxt in self.in_set:
                    return 0
                self._load_set(nxt, keep=last)
                return isa.QUANT_BEATS
        return 0

    def _emit_action(self, action: OutputAction) -> None:
        word = action.word
        if action.quant is not None:
            f = isa.decode(word)
            word = isa.encode(isa.Op.ACTIVATE, self._quant_set(action.quant), src=f["src"],
                              dst=f["dst"], n=f["n"], part=f["part"])
        if action.block is not None:
            self.output_blocks.append(action.block)
        self._append(word)
        if action.quant is not None:
            self.activates += 1

    def emit(self, word: int, data=(), *, matmul: bool = False) -> None:
        """Emit an instruction now, after any pending output it conflicts with; ``data``: its
        host-in beats, as runs (start, count) of rows of the source table."""
        if self.pending:
            last = -1
            for i, a in enumerate(self.pending):
                if self._conflict(word, a.word):
                    last = i
            for _ in range(last + 1):
                self._emit_action(self.pending.popleft())
        self._append(word, data)
        if matmul:
            self.matmuls += 1

    def defer(self, action: OutputAction) -> None:
        """Emit ``action`` once ``action.due`` MATMULs have been emitted (``flush_due``), or
        earlier, before an instruction that touches its rows."""
        self.pending.append(action)

    def flush_due(self, budget: int) -> None:
        """Emit the due outputs, in order, while each engine's work in this interval stays
        within ``budget`` cycles (at least one instruction per engine)."""
        used = {"ho": 0, "av": 0}
        while self.pending and self.pending[0].due <= self.matmuls:
            a = self.pending[0]
            if used[a.engine] and used[a.engine] + a.cost > budget:
                break
            used[a.engine] += a.cost
            self._emit_action(self.pending.popleft())

    def flush_all(self) -> None:
        while self.pending:
            self._emit_action(self.pending.popleft())

    def program(self, table: np.ndarray) -> Program:
        """The program, its host-in beats gathered from the rows of ``table`` (int8, lanes
        wide) named by the recorded runs."""
        counts = np.asarray(self.run_count, dtype=np.int64)
        starts = np.asarray(self.run_start, dtype=np.int64)
        total = int(counts.sum())
        # Row k of the stream: starts[s] + (k - first row of run s).
        offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        data = table[offsets + np.arange(total)] if total else table[:0]
        beats = np.asarray(self.beats, dtype=np.int64)
        last = np.zeros(total, dtype=bool)
        last[np.cumsum(beats)[beats > 0] - 1] = True
        return Program.from_arrays(self.config, np.asarray(self.words, dtype=np.uint64), beats,
                                   data, last)


class InstructionWords:
    """``isa.encode``, memoized: a program repeats a few words many times.
    ``words(op, flags, **fields)`` is ``isa.encode(op, flags, **fields)``."""

    def __init__(self):
        self._words: dict[tuple, int] = {}

    def __call__(self, op, flags=0, **fields) -> int:
        key = (op, flags, *fields.items())
        word = self._words.get(key)
        if word is None:
            word = self._words[key] = isa.encode(op, flags, **fields)
        return word
