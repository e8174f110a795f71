"""The scheduler: one stage's layers and plan to a program.

``Scheduler.run`` works in two passes. The first lays out the MATMULs in order (m-block by
m-block; in each, the first layer's n-blocks and k-blocks, then every later layer: ``plan``
module docstring), the A loads each one needs and the output instructions that follow each
one. The second emits them (``emit.Emitter``) in the instruction order below.

Instruction order (hardware: in-order dispatch to the host-in, matmul, activate and host-out
engines, each running one instruction at a time; dispatch stalls on a busy engine or a buffer
row conflict with an in-flight instruction). The MATMULs are emitted in order; between MATMUL j
and j+1 (the "interval" of j, whose instructions dispatch while MATMUL j runs):

  1. READ_HOST of the A rows MATMUL j+1 needs that are not loaded yet (mandatory);
  2. READ_WEIGHTS of the tiles up to ``weight_lookahead`` beyond the next MATMUL's (default 1,
     at most weight_fifo_depth - 1), so that untaken tiles never exceed the FIFO depth;
  3. prefetch, within what remains of the interval's host-in time (MATMUL j's rows + 3, less
     the beats above): the next parameter set (``emit`` module docstring), then the next A
     rows in load order whose UB rows no MATMUL after j-1 reads before, in chunks;
  4. the output instructions due (an n-tile's ACTIVATEs / WRITE_HOST FROM_ACC from the
     interval after its last MATMUL, staged WRITE_HOSTs one interval later), as many as the
     interval's host-out and activation time allows (at least one each).

Ramps: the program's first MATMUL is cut into pieces of about sqrt(3 * mb) rows that reuse its
tile (its A rows load piece by piece, so the array starts on the first piece, not after mb
rows), and with a blocked K the program's first k-block runs k-tile by k-tile (each A k-tile
serves all the block's n-tiles before the next one is needed, so the loads keep up). The
program's last MATMUL is cut into pieces of at least L + 4 rows (L the array latency), each
followed by its outputs, so that only the last piece's outputs remain after the array stops.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from math import isqrt

import numpy as np

from tpugen.compiler.emit import Emitter, InstructionWords, OutputAction, OutputBlock
from tpugen.compiler.layers import TiledLayer
from tpugen.compiler.operands import ceil_div
from tpugen.compiler.plan import MATMUL_GAP, Plan, balanced_blocks
from tpugen.hdl import isa
from tpugen.hdl.activation import activation_timing
from tpugen.hdl.array import array_latency
from tpugen.hdl.config import Config
from tpugen.hdl.layouts import host_lanes
from tpugen.sim.program import Program, lane_dtype
from tpugen.sim.quant_beats import set_beats

__all__ = ["Scheduler", "host_in_table", "split_rows"]

#: The smallest READ_HOST chunk a prefetch splits off (fewer rows wait for the next interval).
MIN_CHUNK = 16


@dataclass
class RowLoad:
    """``n`` A rows into UB rows ``ub..``, from table rows ``tab..``: needed by MATMUL
    ``deadline``; MATMUL ``after`` is the last one before it that reads these UB rows (-1:
    none). ``done``: rows emitted so far."""

    ub: int
    tab: int
    n: int
    deadline: int
    after: int
    done: int = 0


def host_in_table(config: Config, A: np.ndarray, layers: list[TiledLayer]):
    """The source table of the host-in beats, and where its parts start: A's k-tiles (row
    kt * M + m: A[m, kt*R:(kt+1)*R], zero-padded), each layer's weight tiles (tile (kt, nt):
    rows (kt * nt_count + nt) * R + i), the parameter sets by (layer, n-tile)."""
    R, C = config.rows, config.cols
    M = A.shape[0]
    lanes = host_lanes(config)
    kt0 = layers[0].kt
    dtype = lane_dtype(config)
    a = np.zeros((M, kt0 * R), dtype=dtype)
    a[:, :A.shape[1]] = A
    a_tab = np.zeros((kt0, M, lanes), dtype=dtype)
    a_tab[:, :, :R] = a.reshape(M, kt0, R).transpose(1, 0, 2)
    parts = [a_tab.reshape(-1, lanes)]
    base = kt0 * M
    w_base = []
    for layer in layers:
        w_base.append(base)
        w = np.zeros((layer.kt, layer.nt, R, lanes), dtype=dtype)
        w[..., :C] = layer.padded(config).reshape(layer.kt, R, layer.nt, C).transpose(0, 2, 1,
                                                                                      3)
        parts.append(w.reshape(-1, lanes))
        base += layer.kt * layer.nt * R
    quant_rows = {}
    for li, layer in enumerate(layers):
        if layer.quant is None:
            continue
        for nt in range(layer.nt):
            beats = np.zeros((isa.QUANT_BEATS, lanes), dtype=dtype)
            beats[:, :C] = set_beats(layer.tile_quant(nt, config), C)
            parts.append(beats)
            quant_rows[(li, nt)] = base
            base += isa.QUANT_BEATS
    return np.concatenate(parts), w_base, quant_rows


def split_rows(rows: int, size: int) -> list[tuple[int, int]]:
    """Row offsets and counts of ``rows`` cut into pieces of about ``size`` (one piece when
    fewer than two fit)."""
    n = max(1, rows // size)
    return [(i * rows // n, (i + 1) * rows // n - i * rows // n) for i in range(n)]


class Scheduler:
    """The program of one stage: ``A`` (M x K, the first layer's input from the host) through
    ``layers`` with ``plan``. ``run()`` returns the ``Program``; then ``output_blocks`` says
    where the host-out beats go and ``matmuls`` counts each layer's MATMULs (tiles taken).

    The first pass (``_lay_out``) fills ``jobs`` (each MATMUL's word and rows), ``tiles`` (the
    table row of each weight tile, in FIFO order), ``taken`` (tiles taken through each MATMUL),
    ``loads`` (the A loads, in order) and ``after`` (the outputs that follow each MATMUL); the
    second (``_emit``) turns them into instructions."""

    def __init__(self, config: Config, A: np.ndarray, layers: list[TiledLayer], plan: Plan,
                 lookahead: int):
        self.config = config
        self.M = A.shape[0]
        self.layers = layers
        self.plan = plan
        self.lookahead = lookahead
        self.mb = plan.mb
        self.P = ceil_div(config.cols, config.rows)
        self.act_row = activation_timing(config)[0]
        self.table, self.w_base, self.quant_rows = host_in_table(config, A, layers)
        self.word = InstructionWords()
        # Ramps (module docstring): the piece sizes of the first and the last MATMUL.
        self.up = max(8, isqrt(3 * self.mb))
        self.down = max(array_latency(config) + 4, isqrt(3 * self.mb))
        self.last_m0 = (self.M - 1) // self.mb * self.mb
        # The first pass.
        self.jobs: list[tuple[int, int]] = []       # (word, rows) of each MATMUL
        self.taken: list[int] = []                  # tiles taken through each MATMUL
        self.tiles: list[int] = []                  # the table row of each tile, FIFO order
        self.loads: list[RowLoad] = []
        self.waiting: list[RowLoad] = []            # loads whose first reader is to come
        self.last_reader = np.full(config.ub_rows, -1, dtype=np.int64)
        self.after: dict[int, list[OutputAction]] = {}   # ``due`` relative to their MATMUL
        self.matmuls = [0] * len(layers)
        self.g = 0                                  # n-tiles so far (ACC slot g % slots)
        self.a_turn = 0                             # the next A buffer
        self.s_turn = 0                             # the next staging buffer
        # The second pass.
        self.emitter: Emitter | None = None
        self.queue: deque[RowLoad] = deque()        # the loads not emitted yet
        self.requested = 0                          # tiles requested so far

    @property
    def output_blocks(self) -> list[OutputBlock]:
        return self.emitter.output_blocks

    def run(self) -> Program:
        self._lay_out()
        return self._emit()

    # --- the first pass: MATMULs, loads and outputs in order ----------------------------------
    def _lay_out(self) -> None:
        for m0 in range(0, self.M, self.mb):
            rows = min(self.mb, self.M - m0)
            self._first_layer(m0, rows)
            for li in range(1, len(self.layers)):
                self._on_chip_layer(li, m0, rows)
        assert not self.waiting

    def _first_layer(self, m0: int, rows: int) -> None:
        """The first layer's MATMULs over m-block ``m0``: n-blocks, each over the k-blocks of
        A, loaded into the A buffers in turn (with A resident, once)."""
        first, plan = self.layers[0], self.plan
        blocked = plan.kb < first.kt
        nblocks = balanced_blocks(first.nt, plan.nb) if blocked else [range(first.nt)]
        kblocks = balanced_blocks(first.kt, plan.kb)
        src: dict[int, int] = {}                    # k-tile -> its first UB row
        for bi, nts in enumerate(nblocks):
            slots = {nt: (self.g + i) % plan.slots for i, nt in enumerate(nts)}
            self.g += len(nts)
            for ki, kts in enumerate(kblocks):
                start = not self.jobs
                if blocked or bi == 0:
                    self._load_k_block(kts, m0, rows, start, src)
                # The program's first k-block: k-tile by k-tile, so that each A k-tile
                # serves every n-tile of the block before the next one is needed.
                order = ([(nt, k) for k in kts for nt in nts] if start and blocked
                         else [(nt, k) for nt in nts for k in kts])
                for nt, k in order:
                    last_k = ki == len(kblocks) - 1 and k == kts[-1]
                    self._first_layer_matmul(nt, k, src[k], slots[nt] * self.mb, m0, rows,
                                             start, last_k)

    def _load_k_block(self, kts: range, m0: int, rows: int, start: bool,
                      src: dict[int, int]) -> None:
        """Load the k-tiles ``kts`` of m-block ``m0`` into the next A buffer (the program's
        first k-tile piece by piece); ``src[k]``: where k-tile k now sits."""
        buf = self.a_turn
        self.a_turn = (self.a_turn + 1) % self.plan.abuf
        for t, k in enumerate(kts):
            ub = (buf * self.plan.kb + t) * self.mb
            for a, n in split_rows(rows, self.up) if start and t == 0 else [(0, rows)]:
                self._load(ub + a, k * self.M + m0 + a, n)
            src[k] = ub

    def _first_layer_matmul(self, nt: int, k: int, src: int, acc: int, m0: int, rows: int,
                            start: bool, last_k: bool) -> None:
        """The first layer's MATMUL of k-tile ``k`` into n-tile ``nt``, and after the last
        k-tile its outputs (the program's first MATMUL and its last are ramps)."""
        if start and not self.jobs:
            for i, (a, n) in enumerate(split_rows(rows, self.up)):
                self._matmul(0, src + a, acc + a, n, k, nt, new_tile=i == 0)
        elif self._is_final(0, nt, k, m0):
            self._final_matmul(0, src, acc, rows, k, nt, m0)
            return
        else:
            self._matmul(0, src, acc, rows, k, nt)
        if last_k:
            self._outputs(len(self.jobs) - 1, 0, nt, acc, m0, rows)

    def _on_chip_layer(self, li: int, m0: int, rows: int) -> None:
        """Layer ``li`` (> 0) over m-block ``m0``: its input is the previous layer's output in
        hidden region (li - 1) % 2, resident."""
        layer = self.layers[li]
        base = self.plan.h_base[(li - 1) % 2]
        for nt in range(layer.nt):
            acc = (self.g % self.plan.slots) * self.mb
            self.g += 1
            for k in range(layer.kt):
                if self._is_final(li, nt, k, m0):
                    self._final_matmul(li, base + k * self.mb, acc, rows, k, nt, m0)
                else:
                    self._matmul(li, base + k * self.mb, acc, rows, k, nt)
            if not self._is_final(li, nt, layer.kt - 1, m0):
                self._outputs(len(self.jobs) - 1, li, nt, acc, m0, rows)

    def _load(self, ub: int, tab: int, n: int) -> None:
        ld = RowLoad(ub, tab, n, -1, int(self.last_reader[ub:ub + n].max()))
        self.loads.append(ld)
        self.waiting.append(ld)

    def _matmul(self, li: int, src: int, acc: int, rows: int, kt: int, nt: int,
                new_tile: bool = True) -> int:
        """A MATMUL of layer ``li``'s tile (kt, nt) (taken from the FIFO when ``new_tile``)
        over UB rows ``src..`` into ACC rows ``acc..``; its index."""
        j = len(self.jobs)
        for ld in [w for w in self.waiting if w.ub < src + rows and src < w.ub + w.n]:
            ld.deadline = j
            self.waiting.remove(ld)
        self.last_reader[src:src + rows] = j
        if new_tile:
            layer = self.layers[li]
            self.tiles.append(self.w_base[li] + (kt * layer.nt + nt) * self.config.rows)
        flags = (isa.Flag.NEW_TILE.value if new_tile else 0) | (
            isa.Flag.ACCUMULATE.value if kt else 0)
        self.jobs.append((self.word(isa.Op.MATMUL, flags, src=src, dst=acc, n=rows), rows))
        self.taken.append(len(self.tiles))
        self.matmuls[li] += new_tile
        return j

    def _outputs(self, j: int, li: int, nt: int, acc: int, m0: int, rows: int) -> None:
        """The output instructions of n-tile ``nt`` of layer ``li`` (ACC rows ``acc..``,
        result rows ``m0..``), due after MATMUL ``j``."""
        R, C = self.config.rows, self.config.cols
        layer, plan, word = self.layers[li], self.plan, self.word
        acts = self.after.setdefault(j, [])
        if layer.out in ("int32", "fp32"):
            acts.append(OutputAction(word(isa.Op.WRITE_HOST, isa.Flag.FROM_ACC.value, src=acc,
                                          n=rows), 1, "ho", rows,
                                     block=OutputBlock(m0, rows, nt * C, C, 1, (nt + 1) * C)))
            return
        for p in range(self.P):
            if layer.out == "ub":
                dst = plan.h_base[li % 2] + (nt * self.P + p) * self.mb + (m0 % self.mb)
                acts.append(OutputAction(word(isa.Op.ACTIVATE, src=acc, dst=dst, n=rows,
                                              part=p), 1, "av", rows * self.act_row, (li, nt)))
                continue
            for c0 in range(0, rows, plan.stage):
                n = min(plan.stage, rows - c0)
                dst = plan.stage_base + (self.s_turn % plan.nstage) * plan.stage
                self.s_turn += 1
                acts.append(OutputAction(word(isa.Op.ACTIVATE, src=acc + c0, dst=dst, n=n,
                                              part=p), 1, "av", n * self.act_row, (li, nt)))
                acts.append(OutputAction(word(isa.Op.WRITE_HOST, src=dst, n=n), 2, "ho", n,
                                         block=OutputBlock(m0 + c0, n, nt * C + p * R,
                                                           min(R, C), 1, (nt + 1) * C)))

    def _is_final(self, li: int, nt: int, k: int, m0: int) -> bool:
        """Whether this is the program's last MATMUL."""
        layer = self.layers[li]
        return (li == len(self.layers) - 1 and m0 == self.last_m0 and nt == layer.nt - 1
                and k == layer.kt - 1)

    def _final_matmul(self, li: int, src: int, acc: int, rows: int, kt: int, nt: int,
                      m0: int) -> None:
        """The last MATMUL of the program, in pieces, each followed by its outputs."""
        for i, (a, n) in enumerate(split_rows(rows, self.down)):
            j = self._matmul(li, src + a, acc + a, n, kt, nt, new_tile=i == 0)
            self._outputs(j, li, nt, acc + a, m0 + a, n)

    # --- the second pass: emission (module docstring) -----------------------------------------
    def _emit(self) -> Program:
        R = self.config.rows
        quant_order = [a.quant for j in sorted(self.after) for a in self.after[j]
                       if a.quant is not None]
        em = self.emitter = Emitter(self.config, self.quant_rows, quant_order)
        self.queue = deque(self.loads)
        em.load_all_quant()
        self._request_weights(0)
        self._emit_needed_loads(0)
        for j, (word, rows) in enumerate(self.jobs):
            em.emit(word, matmul=True)
            for act in self.after.get(j, ()):
                act.due += j + 1
                em.defer(act)
            interval = max(rows + MATMUL_GAP, R)
            budget = interval - self._emit_needed_loads(j + 1)
            budget -= R * self._request_weights(j + 1)
            budget -= em.prefetch_set(budget)
            self._prefetch_loads(j, budget)
            em.flush_due(interval)
        em.flush_all()
        em.emit(self.word(isa.Op.SYNC))
        return em.program(self.table)

    def _request_weights(self, j: int) -> int:
        """READ_WEIGHTS of the tiles up to ``lookahead`` beyond MATMUL ``j``'s; the count."""
        upto = min(len(self.tiles), self.taken[min(j, len(self.jobs) - 1)] + self.lookahead)
        got = upto - self.requested
        if got > 0:
            self.emitter.emit(self.word(isa.Op.READ_WEIGHTS, n=got),
                              [(t, self.config.rows) for t in self.tiles[self.requested:upto]])
            self.requested = upto
        return max(got, 0)

    def _emit_load(self, ld: RowLoad, n: int) -> int:
        """READ_HOST of the next ``n`` rows of ``ld``; the beats."""
        self.emitter.emit(self.word(isa.Op.READ_HOST, dst=ld.ub + ld.done, n=n),
                          [(ld.tab + ld.done, n)])
        ld.done += n
        if ld.done == ld.n:
            self.queue.popleft()
        return n

    def _emit_needed_loads(self, j: int) -> int:
        """The rest of every load MATMUL ``j`` (or an earlier one) needs; the beats."""
        beats = 0
        while self.queue and self.queue[0].deadline <= j:
            beats += self._emit_load(self.queue[0], self.queue[0].n - self.queue[0].done)
        return beats

    def _prefetch_loads(self, j: int, budget: int) -> None:
        """The next loads whose rows no MATMUL after ``j - 1`` reads, within ``budget`` beats,
        in chunks of at least ``MIN_CHUNK`` rows (or a load's rest)."""
        while self.queue and budget > 0 and self.queue[0].after < j:
            ld = self.queue[0]
            n = min(ld.n - ld.done, budget)
            if n < min(ld.n - ld.done, MIN_CHUNK):
                break
            budget -= self._emit_load(ld, n)
