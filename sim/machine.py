"""Golden model of the accelerator core: executes a ``Program`` sequentially, bit-exactly.

The hardware dispatches instructions to parallel engines but must produce exactly the results
of this sequential interpretation for every program (``hdl.isa`` is the specification).

State: the unified buffer UB (``ub_rows`` x R int8), the accumulator buffer ACC (``acc_rows`` x C,
``acc_width``-bit two's complement), the weight FIFO (a queue of R x C tiles requested but not
yet taken), the current tile (none until the first NEW_TILE MATMUL), the ``quant_sets``
requantization parameter sets (``sim.quant_beats.RawSet``: all zero at power-up, so every
result is 0 until a READ_QUANT loads the set), the sticky error cause and the retired count.
ACTIVATE requantizes with its set ``flags`` exactly as ``sim.requant.requantize_lanes`` says.

Host-out beats are C lanes, each the *signed* value of an ``acc_width``-bit lane. Unsigned
fields placed in a lane (the SYNC error cause and retired count, the 16-bit counter chunks) are
zero-extended into the lane, so with ``acc_width == 16`` a chunk >= 0x8000 reads negative
(take ``value & 0xFFFF``). Lanes that do not exist (SYNC lanes 1 and 2 when C < 3) are omitted.

Errors (``isa.Cause``) are checked before an instruction executes, in this precedence (only
one cause per instruction; the first cause since reset is kept, later ones are ignored):

  1. BAD_OPCODE       the op is not in ``isa.Op``       } ``isa.static_cause``: from the word
  2. OUT_OF_RANGE     n == 0, rows past a buffer, part  } alone, by the rules in ``isa.OPS``
  3. NO_TILE          MATMUL NEW_TILE with an empty weight FIFO; MATMUL reuse with no current tile.
  4. WEIGHT_OVERFLOW  READ_WEIGHTS with ``len(fifo) + n > weight_fifo_depth``.

An instruction failing a check is dropped: nothing is written, no host-out beat is sent, the
FIFO is untouched, and when its op has ``isa.HOST_DATA_BIT`` set (whatever the op) the host-in
stream is consumed up to and including the next beat with last=1. Fields an op does not use
(``isa.OpSpec.fields``: ``src`` of READ_HOST, ``part`` of MATMUL, ...) and flag bits it does
not use are ignored.

HOST_FRAMING is found while READ_HOST / READ_WEIGHTS / READ_QUANT run (T =
``isa.host_in_beats`` expected: n, n*R, n*QUANT_BEATS):

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
from tpugen.hdl.config import Config
from tpugen.sim.model import wrap
from tpugen.sim.program import Program
from tpugen.sim.quant_beats import RawSet

__all__ = ["Machine", "Result", "ProgramHang"]


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
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        self.reset()

    def reset(self) -> None:
        c = self.config
        self.ub = np.zeros((c.ub_rows, c.rows), dtype=np.int64)
        self.acc = np.zeros((c.acc_rows, c.cols), dtype=np.int64)
        self.fifo: deque[np.ndarray] = deque()
        self.tile: np.ndarray | None = None
        self.quant = [RawSet.zeros(c.cols) for _ in range(c.quant_sets)]
        self.error = isa.Cause.NONE
        self.retired = 0

    # --- running ---------------------------------------------------------------------------
    def run(self, program: Program, *, reset: bool = True) -> Result:
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, not {program!r}")
        if program.config != self.config:
            raise ValueError(f"program is for config {program.config.name}, "
                             f"machine is {self.config.name}")
        if program.isa_version != isa.ISA_VERSION:
            raise ValueError(f"program is for ISA version {program.isa_version}, "
                             f"machine implements {isa.ISA_VERSION}")
        if reset:
            self.reset()
        self._error_step = None
        self._in_data, self._in_last = program.host_in_beats()
        self._in_pos = 0
        self._out: list[np.ndarray] = []       # blocks of beats
        self._out_last: list[np.ndarray] = []
        self._out_kind: list[np.ndarray] = []  # 0 data, 1 known counter, 2 unknown counter
        for i, step in enumerate(program.steps):
            self._index = i
            self._execute(step.fields)
            self.retired += 1
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

    # --- host streams ----------------------------------------------------------------------
    def _next_beat(self, what: str) -> tuple[np.ndarray, bool]:
        if self._in_pos >= len(self._in_data):
            raise ProgramHang(f"step {self._index}: {what} needs a host-in beat but the "
                              f"program's host-in data ended after {self._in_pos} beats")
        b = self._in_pos
        self._in_pos += 1
        return self._in_data[b], bool(self._in_last[b])

    def _discard_to_last(self, what: str) -> None:
        while True:
            _, last = self._next_beat(what)
            if last:
                return

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
    def _check(self, f: dict) -> isa.Cause:
        cause = isa.static_cause(f, self.config)
        if cause != isa.Cause.NONE:
            return cause
        op = f["op"]
        # Flags as ints (``.value``): ``int & Flag`` would build a Flag each time (slow).
        if op == isa.Op.MATMUL:
            if f["flags"] & isa.Flag.NEW_TILE.value:
                if not self.fifo:
                    return isa.Cause.NO_TILE
            elif self.tile is None:
                return isa.Cause.NO_TILE
        elif op == isa.Op.READ_WEIGHTS:
            if len(self.fifo) + f["n"] > self.config.weight_fifo_depth:
                return isa.Cause.WEIGHT_OVERFLOW
        return isa.Cause.NONE

    # --- execution -------------------------------------------------------------------------
    def _execute(self, f: dict) -> None:
        op = f["op"]
        cause = self._check(f)
        if cause != isa.Cause.NONE:
            self._fail(cause)
            if op & isa.HOST_DATA_BIT:
                self._discard_to_last(f"dropped op {op}")
            return
        c = self.config
        R, C = c.rows, c.cols
        if op == isa.Op.MATMUL:
            src, dst, n = f["src"], f["dst"], f["n"]
            if f["flags"] & isa.Flag.NEW_TILE.value:
                self.tile = self.fifo.popleft()
            y = self.ub[src:src + n] @ self.tile               # exact in int64
            if f["flags"] & isa.Flag.ACCUMULATE.value:
                y = y + self.acc[dst:dst + n]                  # int64 wraps like 64 bits
            self.acc[dst:dst + n] = wrap(y, c.acc_width)
        elif op == isa.Op.ACTIVATE:
            src, dst, n, part = f["src"], f["dst"], f["n"], f["part"]
            q = self.quant[f["flags"]].apply(self.acc[src:src + n])
            lanes = np.zeros((n, R), dtype=np.int64)
            lo = part * R
            width = max(0, min(R, C - lo))
            lanes[:, :width] = q[:, lo:lo + width]
            self.ub[dst:dst + n] = lanes
        elif op == isa.Op.WRITE_HOST:
            src, n, part = f["src"], f["n"], f["part"]
            if f["flags"] & isa.Flag.FROM_ACC.value:
                beats = self.acc[src:src + n].copy()
            else:
                beats = np.zeros((n, C), dtype=np.int64)
                lo = part * C
                width = max(0, min(C, R - lo))
                beats[:, :width] = self.ub[src:src + n, lo:lo + width]
            self._emit(beats)
        elif op == isa.Op.SYNC:
            beat = np.zeros((1, C), dtype=np.int64)
            fields = [isa.SYNC_MAGIC, int(self.error), self.retired & 0xFFFF]
            for lane, v in enumerate(fields[:C]):
                beat[0, lane] = v
            self._emit(beat)
        elif op == isa.Op.READ_COUNTERS:
            total = isa.host_out_beats(f, c)
            beats = np.zeros((total, C), dtype=np.int64)
            kind = np.full(total, 2, dtype=np.int8)
            first = isa.COUNTER_CHUNKS * int(isa.Counter.RETIRED)
            for chunk in range(isa.COUNTER_CHUNKS):
                beats[first + chunk, 0] = (self.retired >> (16 * chunk)) & 0xFFFF
                kind[first + chunk] = 1
            self._emit(beats, kind)
        elif op == isa.Op.READ_HOST:
            self._read_host(f["dst"], isa.host_in_beats(f, c))
        elif op == isa.Op.READ_WEIGHTS:
            self._read_weights(f["n"], isa.host_in_beats(f, c))
        elif op == isa.Op.READ_QUANT:
            self._read_quant(f["dst"], isa.host_in_beats(f, c))
        # NOP: nothing.

    def _read_beats(self, total: int, what: str) -> tuple[list[np.ndarray], bool]:
        """Consume an instruction's host-in beats; return the written beats and framing ok."""
        beats = []
        for b in range(total):
            data, last = self._next_beat(what)
            if last and b < total - 1:          # early last: this beat is discarded
                return beats, False
            beats.append(data)
            if b == total - 1 and not last:     # missing last: discard up to the next last
                self._discard_to_last(what)
                return beats, False
        return beats, True

    def _read_host(self, dst: int, n: int) -> None:
        beats, ok = self._read_beats(n, "READ_HOST")
        if beats:
            self.ub[dst:dst + len(beats)] = np.asarray(beats)[:, :self.config.rows]
        if not ok:
            self._fail(isa.Cause.HOST_FRAMING)

    def _read_weights(self, n: int, total: int) -> None:
        R, C = self.config.rows, self.config.cols
        beats, ok = self._read_beats(total, "READ_WEIGHTS")
        rows = np.zeros((total, C), dtype=np.int64)    # an early last leaves zero rows
        if beats:
            rows[:len(beats)] = np.asarray(beats)[:, :C]
        for t in range(n):
            self.fifo.append(rows[t * R:(t + 1) * R].copy())
        if not ok:
            self._fail(isa.Cause.HOST_FRAMING)

    def _read_quant(self, dst: int, total: int) -> None:
        beats, ok = self._read_beats(total, "READ_QUANT")
        for b, beat in enumerate(beats):
            self.quant[dst + b // isa.QUANT_BEATS].write_beat(b % isa.QUANT_BEATS, beat)
        if not ok:
            self._fail(isa.Cause.HOST_FRAMING)
