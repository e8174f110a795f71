"""Golden model of the accelerator core: executes a ``Program`` sequentially, bit-exactly.

The hardware dispatches instructions to parallel engines but must produce exactly the results
of this sequential interpretation for every program. ``hdl.isa`` is the specification (its
module docstring and ``OPS``: what each op reads, writes and sends, the error causes, the
fields and flags each op ignores); this docstring says only what the model adds to it.

State: the unified buffer UB (``ub_rows`` x R operands, each the signed ``operand_width``-bit
value of its bits), the accumulator buffer ACC (``acc_rows`` x C, ``acc_width``-bit two's
complement; binary32 bits for float operand types), the weight FIFO (a queue of R x C tiles
requested but not yet taken), the current tile (none until the first NEW_TILE MATMUL), the
``quant_sets`` requantization parameter sets (``sim.quant_beats.RawSet``: all zero at
power-up, so every result is 0 until a READ_QUANT loads the set), the sticky error cause and
the retired count. ACTIVATE requantizes as ``sim.requant.requantize_lanes`` says; float
operand types follow ``sim.float_golden`` (a MATMUL sums in binary32 in the array's order).

Host-out beats are C lanes, each the *signed* value of an ``acc_width``-bit lane (SYNC's and
the counters' unsigned fields read negative when their top bit is set at ``acc_width == 16``);
lanes that do not exist (SYNC lanes 1 and 2 when C < 3) are omitted.

Errors are checked before an instruction executes, one cause per instruction in this order:
``isa.static_cause`` (BAD_OPCODE, OUT_OF_RANGE), a window MATMUL's OUT_OF_RANGE at issue
(``sim.window_walk``), NO_TILE (a NEW_TILE MATMUL with an empty weight FIFO, a reusing one with no
current tile), WEIGHT_OVERFLOW (READ_WEIGHTS with ``len(fifo) + n > weight_fifo_depth``); the
first cause since reset is kept. A dropped instruction changes
nothing else (``isa.has_host_data``: its host-in data is consumed up to its ``last`` beat).

HOST_FRAMING is found while READ_HOST / READ_WEIGHTS / READ_QUANT run (T =
``isa.host_in_beats`` expected):

  * early last: beat b < T-1 has last=1. Beats 0..b-1 have been written; beat b itself is
    discarded and the instruction takes no more host-in data (the next instruction's data
    starts with beat b+1). READ_HOST leaves UB rows dst+b.. unchanged, READ_QUANT the beats
    b.. of its sets (a set's earlier beats are written). READ_WEIGHTS still
    queues all n tiles, rows b.. being zeros: the FIFO stays tile-aligned and the number of
    tiles requested is what the dispatcher counted when it checked later MATMULs.
  * missing last: beat T-1 has last=0. All T beats are written as usual; the beats after them
    are discarded up to and including the next beat with last=1.

Every instruction counts as retired, dropped ones too. SYNC reports the count of instructions
retired before it; READ_COUNTERS likewise reports RETIRED as the count before it. Its other
counters (cycles, stalls) are unknown to the model: their beats are zeros flagged in
``Result.unknown`` (all READ_COUNTERS beats are flagged in ``Result.counter_beat``).

If the program runs out of host-in data while an instruction still needs some, the hardware
would wait forever: ``run`` raises ``ProgramHang``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.config import Config, check_config
from tpugen.sim import float_golden
from tpugen.sim.model import wrap
from tpugen.sim.program import Program
from tpugen.sim.quant_beats import RawSet
from tpugen.sim.window_walk import WindowWalk

__all__ = ["Machine", "Result", "ProgramHang"]

# Plain ints for the interpreter's hot loop (enum members are slow to look up and compare).
_MATMUL = int(isa.Op.MATMUL)
_NEW_TILE = isa.Flag.NEW_TILE.value
_ACCUMULATE = isa.Flag.ACCUMULATE.value
_WINDOW = isa.Flag.WINDOW.value
_NONE = isa.Cause.NONE
_OP = {op.name: int(op) for op in isa.Op}
_PROGRAM = int(isa.Op.PROGRAM)
_STORE, _TAG = isa.Flag.STORE.value, isa.Flag.TAG.value


class ProgramHang(RuntimeError):
    """The program needs host-in data it does not supply (the hardware would wait forever)."""


@dataclass
class Result:
    """What one ``Machine.run`` produced.

    host_out     (beats, C) int64: host-out lanes (signed acc_width values).
    last         (beats,) bool: the host-out ``last`` flags.
    counter_beat (beats,) bool: beats sent by READ_COUNTERS.
    unknown      (beats,) bool: beats whose value the model cannot know (cycle/stall counters;
                 their ``host_out`` rows are zero). Compare the count, skip the values.
    error        ``isa.Cause``: the sticky cause at the end of the run.
    error_step   index of the step (in this run) that recorded it, or None (none, or recorded
                 by an earlier run with ``reset=False``).
    retired      instructions retired since reset.
    ub, acc      final UB (ub_rows x R) and ACC (acc_rows x C) contents, int64.
    host_in_left host-in beats the program supplied that were never consumed.
    """

    host_out: np.ndarray
    last: np.ndarray
    counter_beat: np.ndarray
    unknown: np.ndarray
    error: isa.Cause
    retired: int
    ub: np.ndarray
    acc: np.ndarray
    host_in_left: int = 0
    error_step: int | None = None

    def mismatches(self, host_out, last=None, *, limit: int = 10) -> list[str]:
        """Differences between this (expected) result and a hardware host-out stream.

        ``host_out`` is (beats, C); beats flagged ``unknown`` are compared by count only.
        Returns at most ``limit`` descriptions; empty when they match.
        """
        got = np.asarray(host_out, dtype=np.int64).reshape(-1, self.host_out.shape[1])
        out = []
        if len(got) != len(self.host_out):
            out.append(f"expected {len(self.host_out)} host-out beats, got {len(got)}")
        for b in range(min(len(got), len(self.host_out))):
            if len(out) >= limit:
                break
            if not self.unknown[b] and not np.array_equal(got[b], self.host_out[b]):
                out.append(f"beat {b}: expected {self.host_out[b].tolist()}, "
                           f"got {got[b].tolist()}")
            if last is not None and bool(last[b]) != bool(self.last[b]):
                out.append(f"beat {b}: expected last={int(self.last[b])}, got {int(last[b])}")
        return out[:limit]


class Machine:
    """Sequential golden model of the core for one ``Config``.

    ``run(program)`` starts from reset (zeroed buffers, empty FIFO, default quant parameters, no
    error, zero retired) unless ``reset=False``, which continues from the state the previous run
    left (as the hardware does for back-to-back programs).
    """

    def __init__(self, config: Config):
        check_config(config)
        self.config = config
        self.window = WindowWalk(config)
        self.reset()

    def reset(self) -> None:
        """Power-up: every memory zero, then ``core_reset``."""
        c = self.config
        self.ub = np.zeros((c.ub_rows, c.rows), dtype=np.int64)
        self.acc = np.zeros((c.acc_rows, c.cols), dtype=np.int64)
        self.quant = [RawSet.zeros(c.cols) for _ in range(c.quant_sets)]
        self.wmem = np.zeros((c.weight_tiles, c.rows, c.cols), dtype=np.int64)
        self.pmem = [0] * c.program_words
        self.core_reset()

    def core_reset(self) -> None:
        """What the core's reset does: the weight FIFO, the current tile, the error, the
        retired count, the tag and the command source return to their start; the memories
        (UB, ACC, parameter sets, weight and program memories) keep their contents."""
        self.fifo: deque[np.ndarray] = deque()
        self.tile: np.ndarray | None = None
        self.error = isa.Cause.NONE
        self.retired = 0
        self.tag = 0
        self._refused = False     # a CHECK_TAG failed (CALLs are dropped)
        self._store_left = 0      # words a STORE still takes from the command stream
        self._store_at = 0        # where the next one goes (past the memory: dropped)
        self.window.reset()

    # --- running ---------------------------------------------------------------------------
    # The interpreter keeps to the sequential meaning above, but does not pay a NumPy call per
    # MATMUL: MATMULs wait in ``_pending`` until an instruction touches rows they write (ACC)
    # or read (UB), or the program ends, and then run as one batched product per row count
    # (``_flush``). Words are decoded and checked once per distinct word; the host-in stream is
    # consumed by slicing, with the framing found from the positions of its ``last`` flags.
    def run(self, program: Program, *, reset: bool = True) -> Result:
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, not {program!r}")
        if not program.config.same_hardware(self.config):
            raise ValueError(f"program is for config {program.config.name}, "
                             f"machine is {self.config.name}")
        if program.isa_version != isa.ISA_VERSION:
            raise ValueError(f"program is for ISA version {program.isa_version}, "
                             f"machine implements {isa.ISA_VERSION}")
        if reset:
            self.reset()
        self._error_step = None
        self._in_data, self._in_last = program.host_in_arrays()
        self._lasts = np.flatnonzero(self._in_last)
        self._in_pos = 0
        self._out: list[np.ndarray] = []       # blocks of beats
        self._out_last: list[np.ndarray] = []
        self._out_kind: list[np.ndarray] = []  # 0 data, 1 known counter, 2 unknown counter
        self._pending: list[tuple[int, int, int, object, bool]] = []
        self._ub_reads: set[tuple[int, int]] = set()     # (start, n) read by pending MATMULs
        self._acc_writes: set[tuple[int, int]] = set()   # (start, n) they write
        self._lasts_list = self._lasts.tolist()
        self._last_k = 0
        words = program.word_array()
        uniq, inverse = np.unique(words, return_inverse=True)
        self._decoded = dict(zip(uniq.tolist(), (self._decode(int(w)) for w in uniq.tolist()),
                                 strict=True))
        decoded = [self._decoded[w] for w in uniq.tolist()]
        word_list = words.tolist() if self._store_left or _PROGRAM in {
            d[2] for d in decoded} else None
        seq = inverse.tolist()
        pending, ub_reads, acc_writes = self._pending, self._ub_reads, self._acc_writes
        fifo = self.fifo
        i = 0
        while i < len(seq):
            if self._store_left:            # a STORE's words: stored, not run
                i = self._store_words(word_list, i)
                continue
            f, cause, op, flags = decoded[seq[i]]
            if op == _MATMUL and cause == _NONE and not flags & _WINDOW and (
                    fifo if flags & _NEW_TILE else self.tile is not None):
                # MATMUL, the hot path (the checks of ``_check``, inline).
                if flags & _NEW_TILE:
                    self.tile = fifo.popleft()
                src, dst, n = f["src"], f["dst"], f["n"]
                pending.append((src, dst, n, self.tile, bool(flags & _ACCUMULATE)))
                ub_reads.add((src, n))
                acc_writes.add((dst, n))
            else:
                self._index = i
                self._execute(f, cause, op, flags)
                pending = self._pending
            self.retired += 1
            i += 1
        self._flush()
        # Tiles still held refer to this program's host-in stream: keep them as arrays.
        self.fifo = deque(self._tile(t) for t in self.fifo)
        if self.tile is not None:
            self.tile = self._tile(self.tile)
        C = self.config.cols
        if self._out:
            host_out = np.concatenate(self._out)
            last = np.concatenate(self._out_last)
            kind = np.concatenate(self._out_kind)
        else:
            host_out = np.zeros((0, C), dtype=np.int64)
            last = np.zeros(0, dtype=bool)
            kind = np.zeros(0, dtype=np.int8)
        return Result(host_out=host_out, last=last, counter_beat=kind > 0, unknown=kind == 2,
                      error=isa.Cause(self.error), retired=self.retired, ub=self.ub.copy(),
                      acc=self.acc.copy(), host_in_left=len(self._in_data) - self._in_pos,
                      error_step=self._error_step)

    def _decode(self, word: int) -> tuple:
        """(fields, static cause, op, flags) of a word."""
        f = isa.decode(word)
        return f, isa.static_cause(f, self.config), f["op"], f["flags"]

    # --- host streams ----------------------------------------------------------------------
    def _hang(self, what: str):
        return ProgramHang(f"step {self._index}: {what} needs a host-in beat but the "
                           f"program's host-in data ended after {len(self._in_data)} beats")

    def _next_last(self, pos: int) -> int:
        """The position of the first beat at or after ``pos`` with last=1 (-1: none). The
        stream is consumed in order, so the search only moves forward."""
        lasts, k = self._lasts_list, self._last_k
        while k < len(lasts) and lasts[k] < pos:
            k += 1
        self._last_k = k
        return lasts[k] if k < len(lasts) else -1

    def _took(self, beats: int) -> None:
        """Hook: the instruction being executed (step ``_index``) consumed ``beats`` host-in
        beats (``fpga.host.frame_plan`` counts them per step)."""

    def _discard_to_last(self, what: str) -> None:
        end = self._next_last(self._in_pos)
        if end < 0:
            raise self._hang(what)
        self._took(end + 1 - self._in_pos)
        self._in_pos = end + 1

    def _emit(self, beats: np.ndarray, kind=0) -> None:
        """Send host-out beats (last on the final one); ``kind`` per beat: 0 data, 1 known
        counter, 2 unknown counter."""
        beats = wrap(beats, self.config.acc_width)
        last = np.zeros(len(beats), dtype=bool)
        last[-1] = True
        self._out.append(beats)
        self._out_last.append(last)
        self._out_kind.append(np.broadcast_to(np.asarray(kind, dtype=np.int8), len(beats)))

    def _fail(self, cause: isa.Cause) -> None:
        if self.error == isa.Cause.NONE:
            self.error = cause
            self._error_step = self._index

    # --- checks ----------------------------------------------------------------------------
    def _check(self, op: int, flags: int, f: dict) -> isa.Cause:
        # Flags as ints (``.value``): ``int & Flag`` would build a Flag each time (slow).
        if op == isa.Op.MATMUL:
            if flags & _WINDOW and self.window.cause(f) != isa.Cause.NONE:
                return isa.Cause.OUT_OF_RANGE
            if flags & isa.Flag.NEW_TILE.value:
                if not self.fifo:
                    return isa.Cause.NO_TILE
            elif self.tile is None:
                return isa.Cause.NO_TILE
        elif op == _OP["READ_WEIGHTS"] or op == _OP["LOAD_WEIGHTS"]:
            if len(self.fifo) + f["n"] > self.config.weight_fifo_depth:
                return isa.Cause.WEIGHT_OVERFLOW
        return isa.Cause.NONE

    # --- execution -------------------------------------------------------------------------
    def _execute(self, f: dict, cause: isa.Cause, op: int, flags: int) -> None:
        if cause == isa.Cause.NONE:
            cause = self._check(op, flags, f)
        if cause != isa.Cause.NONE:
            self._fail(cause)
            if isa.has_host_data(op):
                self._discard_to_last(f"dropped op {op}")
            if (op == _PROGRAM and flags & (_STORE | _TAG) == _STORE and not self._nested
                    and self.config.program_words):
                self._store_left, self._store_at = f["n"], self.config.program_words
            return
        c = self.config
        R, C = c.rows, c.cols
        if op == _MATMUL:
            src, dst, n = f["src"], f["dst"], f["n"]
            if flags & isa.Flag.NEW_TILE.value:
                self.tile = self.fifo.popleft()
            accumulate = bool(flags & isa.Flag.ACCUMULATE.value)
            if flags & _WINDOW:
                self._flush()
                self._product(self.window.vectors(self.ub, src, n), self.tile, dst, accumulate)
                return
            self._pending.append((src, dst, n, self.tile, accumulate))
            self._ub_reads.add((src, n))
            self._acc_writes.add((dst, n))
        elif op == _OP["ACTIVATE"]:
            src, dst, n, part = f["src"], f["dst"], f["n"], f["part"]
            self._touch(ub=(dst, n), acc=(src, n))
            q = self._activate(self.acc[src:src + n], f["flags"])
            lanes = np.zeros((n, R), dtype=np.int64)
            lo = part * R
            width = max(0, min(R, C - lo))
            lanes[:, :width] = q[:, lo:lo + width]
            self.ub[dst:dst + n] = lanes
        elif op == _OP["WRITE_HOST"]:
            src, n, part = f["src"], f["n"], f["part"]
            if flags & isa.Flag.FROM_ACC.value:
                self._touch(acc=(src, n))
                beats = self.acc[src:src + n].copy()
            else:
                beats = np.zeros((n, C), dtype=np.int64)
                lo = part * C
                width = max(0, min(C, R - lo))
                beats[:, :width] = self.ub[src:src + n, lo:lo + width]
            self._emit(beats)
        elif op == _OP["SYNC"]:
            beat = np.zeros((1, C), dtype=np.int64)
            fields = [isa.SYNC_MAGIC, int(self.error), self.retired & 0xFFFF]
            for lane, v in enumerate(fields[:C]):
                beat[0, lane] = v
            self._emit(beat)
        elif op == _OP["READ_COUNTERS"]:
            total = isa.host_out_beats(f, c)
            beats = np.zeros((total, C), dtype=np.int64)
            kind = np.full(total, 2, dtype=np.int8)
            first = isa.COUNTER_CHUNKS * int(isa.Counter.RETIRED)
            for chunk in range(isa.COUNTER_CHUNKS):
                beats[first + chunk, 0] = (self.retired >> (16 * chunk)) & 0xFFFF
                kind[first + chunk] = 1
            self._emit(beats, kind)
        elif op == _OP["READ_HOST"]:
            self._read_host(f["dst"], isa.host_in_beats(f, c))
        elif op == _OP["READ_WEIGHTS"]:
            self._read_weights(f["n"], isa.host_in_beats(f, c))
        elif op == _OP["READ_QUANT"]:
            self._read_quant(f["dst"], isa.host_in_beats(f, c))
        elif op == _OP["LOAD_WEIGHTS"]:
            self.fifo.extend(self.wmem[t].copy() for t in range(f["src"], f["src"] + f["n"]))
        elif op == _OP["STORE_WEIGHTS"]:
            self._store_weights(f["dst"], f["n"], isa.host_in_beats(f, c))
        elif op == _PROGRAM:
            self._program(f, flags)
        else:       # NOP
            self.window.nop(flags, f)

    # --- the weight memory, the program memory and the tag ----------------------------------
    _nested = False      # the instruction being executed came from program memory

    def _store_weights(self, dst: int, n: int, total: int) -> None:
        R, C = self.config.rows, self.config.cols
        first, written, ok = self._read_beats(total, "STORE_WEIGHTS")
        rows = self.wmem[dst:dst + n].reshape(n * R, C)
        rows[:written] = self._in_data[first:first + written, :C]
        self.wmem[dst:dst + n] = rows.reshape(n, R, C)
        if not ok:
            self._fail(isa.Cause.HOST_FRAMING)

    def _program(self, f: dict, flags: int) -> None:
        """PROGRAM (``hdl.isa``): CALL, STORE, SET_TAG, CHECK_TAG."""
        kind = flags & (_STORE | _TAG)
        body = f["src"] | f["dst"] << 16 | f["n"] << 32 | f["part"] << 48
        if kind == _STORE | _TAG:
            self.tag, self._refused = body, False
        elif kind == _TAG:
            self._refused = self.tag != body
            if self._refused:
                self._fail(isa.Cause.WRONG_MODEL)
        elif kind == _STORE:
            self._store_left, self._store_at = f["n"], f["dst"]
        elif self._refused:      # a CHECK_TAG failed: no CALL runs until the tag is right
            self._fail(isa.Cause.WRONG_MODEL)
        else:
            self._call(f["src"], f["n"])

    def _store_words(self, words: list, i: int) -> int:
        """Store the command words from ``i`` on that a STORE still takes; the next index."""
        take = min(self._store_left, len(words) - i)
        at, end = self._store_at, min(self._store_at + take, self.config.program_words)
        if at < end:
            self.pmem[at:end] = words[i:i + end - at]
        self._store_at, self._store_left = self._store_at + take, self._store_left - take
        return i + take

    def _call(self, src: int, n: int) -> None:
        """Run program-memory words ``src..src+n-1`` as if they came from the command stream
        (a CALL or STORE among them is dropped with BAD_PROGRAM)."""
        self._nested = True
        self.retired += 1       # the CALL retires before its words (the caller counts it)
        try:
            for word in self.pmem[src:src + n]:
                f, cause, op, flags = self._decoded.get(word) or self._decoded.setdefault(
                    word, self._decode(word))
                if op == _PROGRAM and flags & _TAG == 0 and cause == _NONE:
                    cause = isa.Cause.BAD_PROGRAM
                self._execute(f, cause, op, flags)
                self.retired += 1
        finally:
            self._nested = False
            self.retired -= 1

    def _activate(self, rows: np.ndarray, qset: int) -> np.ndarray:
        """ACTIVATE's results (signed operand-width values) of accumulator ``rows``: TFLite's
        requantization with set ``qset`` (int4: the result clamped to -8..7 as well); float
        types: ReLU when ``qset`` is odd, then the conversion (``sim.float_golden.activate``)."""
        ot = self.config.operand_type
        if ot.is_float:
            bits = float_golden.activate(rows & 0xFFFFFFFF, ot, relu=bool(qset & 1))
            return wrap(bits.astype(np.int64), ot.width)
        return np.clip(self.quant[qset].apply(rows), ot.min, ot.max)

    def _read_beats(self, total: int, what: str) -> tuple[int, int, bool]:
        """Consume an instruction's ``total`` host-in beats: ``(first, written, framing ok)``,
        the written beats being ``first .. first + written - 1`` of the stream."""
        pos = self._in_pos
        end = self._next_last(pos)
        if 0 <= end < pos + total - 1:       # early last at beat end - pos: it is discarded
            self._took(end + 1 - pos)
            self._in_pos = end + 1
            return pos, end - pos, False
        if pos + total > len(self._in_data):
            raise self._hang(what)
        self._took(total)
        self._in_pos = pos + total
        if end == pos + total - 1:
            return pos, total, True
        self._discard_to_last(what)          # missing last: discard up to the next last
        return pos, total, False

    def _read_host(self, dst: int, n: int) -> None:
        first, written, ok = self._read_beats(n, "READ_HOST")
        if written:
            self._touch(ub=(dst, written))
            self.ub[dst:dst + written] = self._in_data[first:first + written, :self.config.rows]
        if not ok:
            self._fail(isa.Cause.HOST_FRAMING)

    def _read_weights(self, n: int, total: int) -> None:
        R, C = self.config.rows, self.config.cols
        first, written, ok = self._read_beats(total, "READ_WEIGHTS")
        if ok:
            # A tile in the FIFO is the position of its first row in the host-in stream.
            self.fifo.extend(range(first, first + total, R))
        else:
            rows = np.zeros((total, C), dtype=np.int64)   # an early last leaves zero rows
            rows[:written] = self._in_data[first:first + written, :C]
            for t in range(n):
                self.fifo.append(rows[t * R:(t + 1) * R].copy())
            self._fail(isa.Cause.HOST_FRAMING)

    def _read_quant(self, dst: int, total: int) -> None:
        first, written, ok = self._read_beats(total, "READ_QUANT")
        for b in range(written):
            self.quant[dst + b // isa.QUANT_BEATS].write_beat(b % isa.QUANT_BEATS,
                                                              self._in_data[first + b])
        if not ok:
            self._fail(isa.Cause.HOST_FRAMING)

    def _tile(self, tile) -> np.ndarray:
        """A FIFO entry as an R x C int64 array."""
        if isinstance(tile, np.ndarray):
            return tile
        R, C = self.config.rows, self.config.cols
        return self._in_data[tile:tile + R, :C].astype(np.int64)

    # --- the pending MATMULs ----------------------------------------------------------------
    def _touch(self, *, ub=None, acc=None) -> None:
        """Run the pending MATMULs if an instruction is about to write UB rows ``ub`` (start,
        n) that they read, or to read ACC rows ``acc`` that they write."""
        if not self._pending:
            return
        for rng, held in ((ub, self._ub_reads), (acc, self._acc_writes)):
            if rng is not None and any(lo < rng[0] + rng[1] and rng[0] < lo + n
                                       for lo, n in held):
                self._flush()
                return

    def _product(self, x: np.ndarray, tile, dst: int, accumulate: bool) -> None:
        """ACC rows ``dst..`` (+)= ``x`` times ``tile``, at once (float sums in binary32, in
        the array's order: ``sim.float_golden``)."""
        n, ot = len(x), self.config.operand_type
        w = self._tile(tile)
        if ot.is_float:
            mask = (1 << ot.width) - 1
            y = float_golden.tile_sums(x & mask, w & mask, ot)
            if accumulate:
                y = float_golden.fp32_add(self.acc[dst:dst + n] & 0xFFFFFFFF, y)
            self.acc[dst:dst + n] = wrap(y.astype(np.int64), 32)
            return
        y = np.matmul(x, w[:, :self.config.cols].astype(np.int64))
        if accumulate:
            y = y + self.acc[dst:dst + n]
        self.acc[dst:dst + n] = wrap(y, self.config.acc_width)

    def _flush(self) -> None:
        """Run the pending MATMULs, with the meaning of running them one by one."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._ub_reads.clear()
        self._acc_writes.clear()
        R, C = self.config.rows, self.config.cols
        if self.config.operand_type.is_float:      # one MATMUL at a time
            for src, dst, n, tile, accumulate in pending:
                self._product(self.ub[src:src + n], tile, dst, accumulate)
            return
        src, dst, ns, tile, accum = (list(col) for col in zip(*pending, strict=True))
        # Tiles: positions in the host-in stream (READ_WEIGHTS), or arrays (LOAD_WEIGHTS, a
        # READ_WEIGHTS with a framing error): as an index into one stack of them.
        if all(not isinstance(t, np.ndarray) for t in tile):
            tiles = self._in_data
        else:
            tiles = np.concatenate([self._tile(t) for t in tile])
            tile = [k * R for k in range(len(tile))]
        intervals = sorted(set(zip(dst, ns, strict=True)))
        if len(set(ns)) == 1 and all(a[0] + a[1] <= b[0]
                                     for a, b in zip(intervals, intervals[1:], strict=False)):
            # The common case (compiled GEMMs): equal row counts, each MATMUL writing one of a
            # few disjoint row ranges. A range ends as the sum of its MATMULs' products since
            # the last that overwrote it.
            n = ns[0]
            x = self.ub[np.add.outer(src, np.arange(n))]
            w = tiles[np.add.outer(tile, np.arange(R)), :C].astype(np.int64)
            y = np.matmul(x, w)
            for d, _ in intervals:
                ks = [k for k in range(len(pending)) if dst[k] == d]
                ow = [i for i, k in enumerate(ks) if not accum[k]]
                total = y[ks[ow[-1]:] if ow else ks].sum(axis=0)
                if not ow:
                    total += self.acc[d:d + n]
                self.acc[d:d + n] = wrap(total, self.config.acc_width)
            return
        src, dst, ns, tile, accum = (np.array(c, dtype=np.int64)
                                     for c in (src, dst, ns, tile, accum))
        # Each MATMUL's product rows, batched by row count (exact in int64), as events
        # (ACC row, MATMUL index, accumulate, value).
        ev_rows, ev_k, ev_acc, ev_vals = [], [], [], []
        for n in np.unique(ns).tolist():
            ks = np.flatnonzero(ns == n)
            rn = np.arange(n)
            x = self.ub[src[ks, None] + rn]
            w = tiles[tile[ks, None] + np.arange(R), :C].astype(np.int64)
            ev_vals.append(np.matmul(x, w).reshape(-1, C))
            ev_rows.append((dst[ks, None] + rn).ravel())
            ev_k.append(np.repeat(ks, n))
            ev_acc.append(np.repeat(accum[ks], n))
        rows, ks, acc, vals = (np.concatenate(e) for e in (ev_rows, ev_k, ev_acc, ev_vals))
        # Apply them in order: a row ends as the sum of the products since its last
        # overwrite (plus its old value when none overwrote it), wrapped.
        order = np.lexsort((ks, rows))
        rows, acc, vals = rows[order], acc[order], vals[order]
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        ends = np.r_[starts[1:], len(rows)] - 1
        sums = np.zeros((len(rows) + 1, C), dtype=np.int64)
        np.cumsum(vals, axis=0, out=sums[1:])
        last_ow = np.maximum.accumulate(np.where(acc != 0, -1, np.arange(len(rows))))[ends]
        has_ow = last_ow >= starts
        base = np.where(has_ow, last_ow, starts)
        total = sums[ends + 1] - sums[base]
        rows = rows[starts]
        old = np.where(has_ow[:, None], 0, self.acc[rows])
        self.acc[rows] = wrap(old + total, self.config.acc_width)
