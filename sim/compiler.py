"""Compile int8 matrix products (and a 2-layer chain) into accelerator programs.

``compile_gemm(config, A, B)`` computes ``A @ B`` (A: M x K, B: K x N, int8) and returns a
``CompiledGemm``: the ``Program`` and ``decode(host_out)``, which turns the host-out stream back
into the M x N result.

Layout (R x C array, Kt = ceil(K/R), Nt = ceil(N/C), M split into row blocks of Mb rows):

  UB   A region  rows [kt*Mb, kt*Mb + Mb) hold A[m0:m0+Mb, kt*R:(kt+1)*R] (zero-padded lanes);
       staging   (out="int8") ``nbuf`` regions of P*Mb rows after it, P = ceil(C/R): part p of
                 row i of an n-tile at staging + p*rows + i.
  ACC  ``nbuf`` regions of Mb rows: the g-th n-tile (counted over the whole program) uses
       region g % nbuf.
  The weights: tile (kt, nt) = B[kt*R:(kt+1)*R, nt*C:(nt+1)*C], zero-padded to R x C; every
  MATMUL takes a new tile (MATMUL n = rows of the block, NEW_TILE, ACCUMULATE for kt > 0).

Buffer-size rule: ``nbuf = 2`` (double-buffered ACC regions and staging) and the largest
``Mb <= M`` with ``2*Mb <= acc_rows`` and ``Mb*Kt + 2*P*Mb*[int8] <= ub_rows``. Exception: when
the whole problem is one n-tile (Nt == 1) and Mb = M fits with single buffers, that is used
(nothing to overlap, no weight reloads). When no Mb >= 1 fits double-buffered, single buffers
are used (no overlap); when not even that fits, ``ValueError``.

Instruction order (hardware: in-order dispatch to the host-in, matmul, activate and host-out
engines, each running one instruction at a time; dispatch stalls on a busy engine or a buffer
row conflict with an in-flight instruction):

  READ_QUANT (int8 out): the requantization parameters of every n-tile, when they all fit the
  parameter sets (``Config.quant_sets``); else each n-tile's set is loaded right before its
  first ACTIVATE, into the sets in turn
  READ_HOST A block 0 k-tile 0, READ_WEIGHTS tiles 0..L (L = weight lookahead, default 1,
  at most weight_fifo_depth - 1)
  for every MATMUL j (order: row block, n-tile, k-tile):
      MATMUL j
      READ_HOST of the A k-tile MATMUL j+1 reads (first n-tile of a row block only)
      READ_WEIGHTS of tile j+1+L (so at most L+1 <= depth tiles are requested, untaken)
      the output instructions that are due: an n-tile's ACTIVATE(s) (or its WRITE_HOST FROM_ACC
      for int32) after the first MATMUL of the next n-tile, its WRITE_HOST from UB after the
      MATMUL after that, so they run while the next n-tile computes
  the remaining output instructions, SYNC

An output instruction is emitted earlier than that when a later instruction touches the buffer
rows it uses (so the program's sequential meaning never changes). The host-out stream is the
output beats in n-tile order, then the SYNC beat; ``decode`` checks the SYNC beat (magic, no
error) and skips it.

``compile_mlp`` chains two layers for a square array (R == C): the hidden layer's n-tile nt is
ACTIVATEd (int8, its own parameters) straight into UB rows that are the second layer's A
k-tile nt, so the hidden activations never leave the chip.

Requantization (int8 outputs) is TFLite's (``sim.requant.QuantParams``: per output channel
bias, multiplier and shift; per layer zero point and clamp). An input zero point ``in_zp``
(``x_zp``; for the second layer of ``compile_mlp``, the hidden layer's ``out_zp``) is folded
into the bias: ``bias'[c] = bias[c] - in_zp * sum_k W[k, c]`` (mod 2**32), so the array
multiplies the raw int8 inputs. With ``acc_width >= 32`` this is TFLite's int32 arithmetic
exactly (every sum taken mod 2**32); narrower accumulators wrap earlier.

Programs assume a freshly reset core (empty weight FIFO, no recorded error).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.layouts import host_lanes
from tpugen.sim.model import wrap
from tpugen.sim.program import Program
from tpugen.sim.quant_beats import set_beats
from tpugen.sim.requant import QuantParams, requantize

__all__ = ["CompiledGemm", "compile_gemm", "compile_mlp", "gemm_reference", "mlp_reference",
           "fold_input_zero_point"]

_MAX_N = 0xFFFF


@dataclass(frozen=True)
class _Segment:
    """One WRITE_HOST: ``parts * rows`` beats; beat p*rows + i holds result row m0 + i,
    columns col0 + p*width + (0..width-1)."""

    m0: int
    rows: int
    col0: int
    width: int
    parts: int
    cols_end: int   # first column past this n-tile


@dataclass
class CompiledGemm:
    """A compiled product: ``program`` and ``decode(host_out) -> (M, N) int64``.

    ``plan`` records the layout decisions (``mb``, ``nbuf``, ``kt``, ``nt``, buffer bases and the
    rows used).
    """

    config: Config
    program: Program
    shape: tuple[int, int]
    out: str
    plan: dict
    segments: list = field(repr=False)

    @property
    def host_out_beats(self) -> int:
        """Host-out beats the program sends, including the final SYNC beat."""
        return sum(s.rows * s.parts for s in self.segments) + 1

    def decode(self, host_out) -> np.ndarray:
        """The M x N result from the host-out beats (an array of beats x C, or a ``Result``).

        Raises ``ValueError`` when the beat count is wrong, the final beat is not a SYNC marker,
        or the SYNC beat reports an error cause.
        """
        beats = getattr(host_out, "host_out", host_out)
        beats = np.asarray(beats, dtype=np.int64)
        C = self.config.cols
        if beats.ndim != 2 or beats.shape[1] != C:
            raise ValueError(f"host_out must have shape (beats, {C}), not {beats.shape}")
        if len(beats) != self.host_out_beats:
            raise ValueError(f"expected {self.host_out_beats} host-out beats "
                             f"(including SYNC), got {len(beats)}")
        sync = beats[-1]
        if sync[0] != isa.SYNC_MAGIC:
            raise ValueError(f"final beat is not a SYNC marker: {sync.tolist()}")
        if C >= 2 and sync[1] != 0:
            try:
                cause = isa.Cause(int(sync[1])).name
            except ValueError:
                cause = str(int(sync[1]))
            raise ValueError(f"the accelerator reported error {cause}")
        M, N = self.shape
        result = np.zeros((M, N), dtype=np.int64)
        pos = 0
        for s in self.segments:
            block = beats[pos:pos + s.rows * s.parts]
            pos += s.rows * s.parts
            for p in range(s.parts):
                c0 = s.col0 + p * s.width
                c1 = min(c0 + s.width, s.cols_end, N)
                if c1 > c0:
                    result[s.m0:s.m0 + s.rows, c0:c1] = block[p * s.rows:(p + 1) * s.rows,
                                                              :c1 - c0]
        return result


# --- validation -------------------------------------------------------------------------------
def _matrix(name: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer (int8) array, not dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, not shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"{name} must have at least one row and column, not shape {arr.shape}")
    arr = arr.astype(np.int64)
    lo, hi = arr.min(), arr.max()
    if lo < -128 or hi > 127:
        raise ValueError(f"{name} values must be in -128..127 (int8), found {lo}..{hi}")
    return arr


def _out_quant(out, quant, in_zp, n: int, what: str = "quant") -> QuantParams | None:
    """The output requantization of a layer with ``n`` channels, checked."""
    if out not in ("int32", "int8"):
        raise ValueError(f"out must be 'int32' or 'int8', not {out!r}")
    if out == "int32":
        if quant is not None or in_zp != 0:
            raise ValueError(f"{what} and in_zp apply to out='int8' only")
        return None
    if not isinstance(quant, QuantParams):
        raise TypeError(f"{what} must be QuantParams for out='int8', not {quant!r}")
    if quant.channels not in (None, n):
        raise ValueError(f"{what} has {quant.channels} channels, but the layer has {n}")
    return quant


def _check_zp(name, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or not -128 <= v <= 127:
        raise ValueError(f"{name} must be an int8 zero point (-128..127), not {v!r}")
    return int(v)


def fold_input_zero_point(quant: QuantParams, W: np.ndarray, in_zp: int) -> QuantParams:
    """``quant`` with the input zero point folded into the bias: ``bias - in_zp * colsum(W)``
    (mod 2**32), one bias per column of ``W`` (K x N)."""
    n = W.shape[1]
    bias, mult, shift = quant.per_channel(n)
    folded = bias - in_zp * W.astype(np.int64).sum(axis=0)
    folded = ((folded + (1 << 31)) % (1 << 32)) - (1 << 31)
    return QuantParams(bias=folded, multiplier=mult, shift=shift, out_zp=quant.out_zp,
                       act_min=quant.act_min, act_max=quant.act_max)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# --- the scheduler ----------------------------------------------------------------------------
@dataclass
class _Layer:
    B: np.ndarray          # K x N
    a_base: int            # UB base of this layer's A region (k-tile kt at a_base + kt*Mb)
    A: np.ndarray | None   # loaded from the host when not None
    out: str               # "int32" / "int8" (to the host) / "ub" (hidden, into h_base)
    quant: QuantParams | None   # N channels, the input zero point folded in
    h_base: int = 0

    def tiles(self, config: Config) -> None:
        """Set ``kt``, ``nt`` and ``padded`` (B zero-padded to whole R x C tiles)."""
        R, C = config.rows, config.cols
        K, N = self.B.shape
        self.kt, self.nt = _ceil(K, R), _ceil(N, C)
        padded = np.zeros((self.kt * R, self.nt * C), dtype=np.int64)
        padded[:K, :N] = self.B
        self.padded = padded

    def tile_quant(self, nt: int, config: Config) -> QuantParams:
        """The parameters of n-tile ``nt``: channels nt*C .. nt*C + C - 1 (0 past N)."""
        C = config.cols
        N = self.B.shape[1]
        arrays = []
        for a in self.quant.per_channel(N):
            t = np.zeros(C, dtype=np.int64)
            part = a[nt * C:(nt + 1) * C]
            t[:len(part)] = part
            arrays.append(t)
        q = self.quant
        return QuantParams(bias=arrays[0], multiplier=arrays[1], shift=arrays[2],
                           out_zp=q.out_zp, act_min=q.act_min, act_max=q.act_max)


@dataclass
class _Action:
    """An output instruction waiting until ``due`` MATMULs have been emitted."""

    name: str              # "activate" or "write_host"
    word: int
    due: int
    quant: tuple | None = None      # the key (layer, n-tile) of an ACTIVATE's parameters
    segment: _Segment | None = None


class _Emitter:
    """Appends instructions as columns (words, host-in beats, where the beats come from);
    defers output instructions until due, hazards permitting.

    Host-in data is not copied per instruction: each instruction that carries data records
    segments (start, count) of rows of a source table (``_schedule``'s ``A`` blocks, weight
    tiles and parameter sets); ``program(table)`` gathers them once.

    ``quant_rows``: the table row of each parameter set's beats, by key (layer, n-tile). When
    they all fit ``Config.quant_sets``, one READ_QUANT loads them up front; else an ACTIVATE's
    set is loaded before it when no set holds it, into the sets in turn."""

    def __init__(self, config: Config, quant_rows: dict | None = None):
        self.config = config
        self.words: list[int] = []
        self.beats: list[int] = []
        self.seg_start: list[int] = []
        self.seg_count: list[int] = []
        self.pending: deque[_Action] = deque()
        self.quant_rows = quant_rows or {}
        self.in_set: dict = {}                 # key -> the parameter set holding it
        self.turn = 0                          # the next set to load into, in turn
        self.matmuls = 0                       # MATMULs emitted so far
        self.segments: list[_Segment] = []
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

    def _append(self, word: int, segments=()) -> None:
        self.words.append(word)
        beats = 0
        for start, count in segments:
            self.seg_start.append(start)
            self.seg_count.append(count)
            beats += count
        self.beats.append(beats)

    def load_all_quant(self) -> None:
        """READ_QUANT of every parameter set up front, when they all fit."""
        keys = list(self.quant_rows)
        if keys and len(keys) <= self.config.quant_sets:
            self._append(isa.encode(isa.Op.READ_QUANT, dst=0, n=len(keys)),
                         [(self.quant_rows[k], isa.QUANT_BEATS) for k in keys])
            self.in_set = {k: s for s, k in enumerate(keys)}

    def _qset(self, key) -> int:
        """The parameter set holding ``key``'s parameters, loaded now if none does."""
        s = self.in_set.get(key)
        if s is None:
            s = self.turn
            self.turn = (self.turn + 1) % self.config.quant_sets
            self.in_set = {k: v for k, v in self.in_set.items() if v != s}
            self._append(isa.encode(isa.Op.READ_QUANT, dst=s, n=1),
                         [(self.quant_rows[key], isa.QUANT_BEATS)])
            self.in_set[key] = s
        return s

    def _emit_action(self, action: _Action) -> None:
        word = action.word
        if action.name == "activate":
            f = isa.decode(word)
            word = isa.encode(isa.Op.ACTIVATE, self._qset(action.quant), src=f["src"],
                              dst=f["dst"], n=f["n"], part=f["part"])
        if action.segment is not None:
            self.segments.append(action.segment)
        self._append(word)

    def emit(self, word: int, segments=(), *, matmul: bool = False) -> None:
        """Emit an instruction now, after any pending output it conflicts with."""
        if self.pending:
            last = -1
            for i, a in enumerate(self.pending):
                if self._conflict(word, a.word):
                    last = i
            for _ in range(last + 1):
                self._emit_action(self.pending.popleft())
        self._append(word, segments)
        if matmul:
            self.matmuls += 1

    def defer(self, name: str, word: int, due: int, *, quant: tuple | None = None,
              segment: _Segment | None = None) -> None:
        """Emit ``word`` (an ACTIVATE or WRITE_HOST) once ``due`` MATMULs have been emitted (or
        earlier, before an instruction that touches its rows)."""
        self.pending.append(_Action(name, word, due, quant, segment))

    def flush_due(self) -> None:
        while self.pending and self.pending[0].due <= self.matmuls:
            self._emit_action(self.pending.popleft())

    def flush_all(self) -> None:
        while self.pending:
            self._emit_action(self.pending.popleft())

    def program(self, table: np.ndarray) -> Program:
        """The program, its host-in beats gathered from the rows of ``table`` (int8, lanes
        wide) named by the recorded segments."""
        counts = np.asarray(self.seg_count, dtype=np.int64)
        starts = np.asarray(self.seg_start, dtype=np.int64)
        total = int(counts.sum())
        # Row k of the stream: starts[s] + (k - first row of segment s).
        offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        data = table[offsets + np.arange(total)] if total else table[:0]
        beats = np.asarray(self.beats, dtype=np.int64)
        last = np.zeros(total, dtype=bool)
        last[np.cumsum(beats)[beats > 0] - 1] = True
        return Program.from_arrays(self.config, np.asarray(self.words, dtype=np.uint64), beats,
                                   data, last)


def _plan(config: Config, M: int, ub_factor: int, stage_factor: int, groups_per_block: int,
          what: str) -> tuple[int, int]:
    """(Mb, nbuf): the row block and the number of ACC / staging buffers (see module doc)."""
    def fits(mb, nbuf):
        return (nbuf * mb <= config.acc_rows
                and mb * (ub_factor + nbuf * stage_factor) <= config.ub_rows)

    cap = min(M, _MAX_N)
    if groups_per_block == 1 and cap == M and fits(M, 1):
        return M, 1
    for nbuf in (2, 1):
        mb = min(cap, config.acc_rows // nbuf, config.ub_rows // (ub_factor + nbuf * stage_factor))
        if mb >= 1:
            return mb, nbuf
    need = ub_factor + stage_factor
    raise ValueError(f"{what} does not fit: one row needs {need} unified-buffer rows "
                     f"({ub_factor} for the operands, {stage_factor} for output staging), "
                     f"but the unified buffer (config.ub_rows) has {config.ub_rows}")


def _schedule(config: Config, M: int, layers: list[_Layer], mb: int, nbuf: int,
              stage_base: int, lookahead: int) -> tuple[_Emitter, Program]:
    R, C = config.rows, config.cols
    P = _ceil(C, R)
    lanes = host_lanes(config)

    # The source table of the host-in beats: per layer with host A, its k-tiles as rows
    # (kt * M + m: A[m, kt*R:(kt+1)*R], zero-padded); then every layer's weight tiles (tile
    # (kt, nt): rows (kt * nt_count + nt) * R + i).
    parts, a_base, w_base, base = [], [], [], 0
    for layer in layers:
        a_base.append(base)
        if layer.A is not None:
            a = np.zeros((layer.kt, M, lanes), dtype=np.int8)
            K = layer.A.shape[1]
            for kt in range(layer.kt):
                chunk = layer.A[:, kt * R:min(K, (kt + 1) * R)]
                a[kt, :, :chunk.shape[1]] = chunk
            parts.append(a.reshape(-1, lanes))
            base += layer.kt * M
    for layer in layers:
        w_base.append(base)
        w = np.zeros((layer.kt, layer.nt, R, lanes), dtype=np.int8)
        w[..., :C] = layer.padded.reshape(layer.kt, R, layer.nt, C).transpose(0, 2, 1, 3)
        parts.append(w.reshape(-1, lanes))
        base += layer.kt * layer.nt * R
    quant_rows = {}
    for li, layer in enumerate(layers):
        if layer.quant is None:
            continue
        for nt in range(layer.nt):
            beats = np.zeros((isa.QUANT_BEATS, lanes), dtype=np.int8)
            beats[:, :C] = set_beats(layer.tile_quant(nt, config), C)
            parts.append(beats)
            quant_rows[(li, nt)] = base
            base += isa.QUANT_BEATS
    table = np.concatenate(parts)
    em = _Emitter(config, quant_rows)

    # The MATMULs in order: (group, kt, A load or None, first tile row, src, dst, n, last).
    jobs = []
    groups = []
    for m0 in range(0, M, mb):
        rows = min(mb, M - m0)
        for li, layer in enumerate(layers):
            for nt in range(layer.nt):
                g = len(groups)
                groups.append((m0, rows, li, nt))
                for kt in range(layer.kt):
                    load = None
                    if layer.A is not None and nt == 0:
                        load = (layer.a_base + kt * mb, rows, a_base[li] + kt * M + m0)
                    tile = w_base[li] + (kt * layer.nt + nt) * R
                    jobs.append((g, kt, load, tile, layer.a_base + kt * mb, (g % nbuf) * mb,
                                 rows, kt == layer.kt - 1))
    loaded = [False] * len(jobs)
    requested = 0
    n_jobs = len(jobs)
    words: dict[tuple, int] = {}

    def word(op, flags=0, **kw) -> int:
        key = (op, flags, *kw.items())
        w = words.get(key)
        if w is None:
            w = words[key] = isa.encode(op, flags, **kw)
        return w

    def loads(j):
        nonlocal requested
        if j >= n_jobs:
            return
        load = jobs[j][2]
        if load is not None and not loaded[j]:
            loaded[j] = True
            dst, n, start = load
            em.emit(word(isa.Op.READ_HOST, dst=dst, n=n), [(start, n)])
        # Tiles requested but not taken before MATMUL j: requested - j <= lookahead + 1.
        upto = min(n_jobs, j + lookahead + 1)
        if upto > requested:
            em.emit(word(isa.Op.READ_WEIGHTS, n=upto - requested),
                    [(jobs[t][3], R) for t in range(requested, upto)])
            requested = upto

    em.load_all_quant()
    mm_flags = (isa.Flag.NEW_TILE.value, isa.Flag.NEW_TILE.value | isa.Flag.ACCUMULATE.value)
    for j, (g, kt, _, _, src, dst, n, last) in enumerate(jobs):
        loads(j)   # a no-op after the first MATMUL: loads(j + 1) below did it
        em.emit(word(isa.Op.MATMUL, mm_flags[kt > 0], src=src, dst=dst, n=n), matmul=True)
        if last:
            m0, rows, li, nt = groups[g]
            layer = layers[li]
            due = em.matmuls + 1
            if layer.out == "int32":
                em.defer("write_host", word(isa.Op.WRITE_HOST, isa.Flag.FROM_ACC.value, src=dst,
                                            n=rows), due,
                         segment=_Segment(m0, rows, nt * C, C, 1, (nt + 1) * C))
            elif layer.out == "ub":
                em.defer("activate", word(isa.Op.ACTIVATE, src=dst, dst=layer.h_base + nt * mb,
                                          n=rows), due, quant=(li, nt))
            else:
                stage = stage_base + (g % nbuf) * P * mb
                for p in range(P):
                    em.defer("activate", word(isa.Op.ACTIVATE, src=dst, dst=stage + p * rows,
                                              n=rows, part=p), due, quant=(li, nt))
                em.defer("write_host", word(isa.Op.WRITE_HOST, src=stage, n=P * rows), due + 1,
                         segment=_Segment(m0, rows, nt * C, min(R, C), P, (nt + 1) * C))
        loads(j + 1)
        em.flush_due()
    em.flush_all()
    em.emit(word(isa.Op.SYNC))
    return em, em.program(table)


def _lookahead(config: Config, weight_lookahead) -> int:
    if weight_lookahead is None:
        return min(1, config.weight_fifo_depth - 1)
    if (not isinstance(weight_lookahead, int) or isinstance(weight_lookahead, bool)
            or not 0 <= weight_lookahead < config.weight_fifo_depth):
        raise ValueError(f"weight_lookahead must be an integer in "
                         f"0..{config.weight_fifo_depth - 1}, not {weight_lookahead!r}")
    return weight_lookahead


def compile_gemm(config: Config, A, B, *, out: str = "int32", quant: QuantParams | None = None,
                 in_zp: int = 0, weight_lookahead: int | None = None) -> CompiledGemm:
    """Compile ``A @ B`` (A: M x K, B: K x N, int8 values) for ``config``.

    ``out="int32"``: the ``acc_width``-wrapped sums; ``out="int8"``: TFLite's requantization
    of ``(A - in_zp) @ B`` with ``quant`` (``sim.requant.QuantParams``, N channels or one
    value for all). ``weight_lookahead``: tiles requested ahead of the MATMUL taking the
    current one (default ``min(1, depth-1)``).
    """
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    A = _matrix("A", A)
    B = _matrix("B", B)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"A is {A.shape[0]} x {A.shape[1]} but B is {B.shape[0]} x "
                         f"{B.shape[1]}: A's columns must equal B's rows")
    quant = _out_quant(out, quant, _check_zp("in_zp", in_zp), B.shape[1])
    if quant is not None:
        quant = fold_input_zero_point(quant, B, in_zp)
    lookahead = _lookahead(config, weight_lookahead)
    R, C = config.rows, config.cols
    M, K = A.shape
    N = B.shape[1]
    layer = _Layer(B=B, a_base=0, A=A, out=out, quant=quant)
    layer.tiles(config)
    P = _ceil(C, R)
    stage_factor = P if out == "int8" else 0
    mb, nbuf = _plan(config, M, layer.kt, stage_factor, layer.nt,
                     f"A ({M} x {K}) @ B ({K} x {N})")
    stage_base = layer.kt * mb
    em, program = _schedule(config, M, [layer], mb, nbuf, stage_base, lookahead)
    plan = dict(mb=mb, nbuf=nbuf, kt=layer.kt, nt=layer.nt, a_base=0, stage_base=stage_base,
                ub_rows_used=mb * (layer.kt + nbuf * stage_factor), acc_rows_used=nbuf * mb,
                weight_lookahead=lookahead)
    return CompiledGemm(config, program, (M, N), out, plan, em.segments)


def compile_mlp(config: Config, X, W1, W2, *, hidden: QuantParams, out: str = "int32",
                quant: QuantParams | None = None, in_zp: int = 0,
                weight_lookahead: int | None = None) -> CompiledGemm:
    """Compile ``f((X - in_zp) @ W1) @ W2`` with the hidden activations kept on chip (R == C
    only).

    ``f`` requantizes to int8 with ``hidden`` (H channels); the second product's input zero
    point is ``hidden.out_zp``; it is returned like ``compile_gemm``'s (``out``, ``quant``).
    """
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    if config.rows != config.cols:
        raise ValueError(f"compile_mlp needs a square array (R == C), not {config.rows} x "
                         f"{config.cols}: the hidden layer's C-lane outputs must be the "
                         f"second layer's R-lane inputs")
    X = _matrix("X", X)
    W1 = _matrix("W1", W1)
    W2 = _matrix("W2", W2)
    if X.shape[1] != W1.shape[0]:
        raise ValueError(f"X is {X.shape[0]} x {X.shape[1]} but W1 is {W1.shape[0]} x "
                         f"{W1.shape[1]}: X's columns must equal W1's rows")
    if W1.shape[1] != W2.shape[0]:
        raise ValueError(f"W1 is {W1.shape[0]} x {W1.shape[1]} but W2 is {W2.shape[0]} x "
                         f"{W2.shape[1]}: W1's columns must equal W2's rows")
    in_zp = _check_zp("in_zp", in_zp)
    hidden = _out_quant("int8", hidden, in_zp, W1.shape[1], "hidden")
    hidden = fold_input_zero_point(hidden, W1, in_zp)
    quant = _out_quant(out, quant, 0, W2.shape[1])
    if quant is not None:
        quant = fold_input_zero_point(quant, W2, hidden.out_zp)
    lookahead = _lookahead(config, weight_lookahead)
    M, K = X.shape
    H, N = W2.shape
    l1 = _Layer(B=W1, a_base=0, A=X, out="ub", quant=hidden)
    l1.tiles(config)
    l2 = _Layer(B=W2, a_base=0, A=None, out=out, quant=quant)
    l2.tiles(config)
    assert l2.kt == l1.nt
    stage_factor = 1 if out == "int8" else 0
    mb, nbuf = _plan(config, M, l1.kt + l2.kt, stage_factor, l1.nt + l2.nt,
                     f"X ({M} x {K}) @ W1 ({K} x {H}) @ W2 ({H} x {N})")
    l2.a_base = l1.h_base = l1.kt * mb
    stage_base = (l1.kt + l2.kt) * mb
    em, program = _schedule(config, M, [l1, l2], mb, nbuf, stage_base, lookahead)
    plan = dict(mb=mb, nbuf=nbuf, kt=(l1.kt, l2.kt), nt=(l1.nt, l2.nt), a_base=0,
                h_base=l1.h_base, stage_base=stage_base,
                ub_rows_used=mb * (l1.kt + l2.kt + nbuf * stage_factor),
                acc_rows_used=nbuf * mb, weight_lookahead=lookahead)
    return CompiledGemm(config, program, (M, N), out, plan, em.segments)


def gemm_reference(config: Config, A, B, *, out: str = "int32",
                   quant: QuantParams | None = None, in_zp: int = 0) -> np.ndarray:
    """What ``compile_gemm(...).decode`` must return, computed with NumPy: the
    ``acc_width``-wrapped ``A @ B``, or it requantized with ``quant`` and the input zero point
    folded into the bias (with ``acc_width >= 32``: TFLite's ``requantize((A - in_zp) @ B,
    quant)``, every sum mod 2**32)."""
    A = _matrix("A", A)
    B = _matrix("B", B)
    acc = wrap(_exact_matmul(A, B), config.acc_width)
    quant = _out_quant(out, quant, _check_zp("in_zp", in_zp), B.shape[1])
    return acc if quant is None else requantize(acc, fold_input_zero_point(quant, B, in_zp))


def _exact_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` of int8 matrices, exact, as int64: in float64 (BLAS) while every sum is below
    2**53 in magnitude, which holds for K < 2**38; NumPy's int64 product otherwise."""
    if A.shape[1] * 128 * 128 < 1 << 53:
        return np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.int64)
    return np.matmul(A, B)


def mlp_reference(config: Config, X, W1, W2, *, hidden: QuantParams, out: str = "int32",
                  quant: QuantParams | None = None, in_zp: int = 0) -> np.ndarray:
    """What ``compile_mlp(...).decode`` must return, computed with NumPy."""
    h = gemm_reference(config, X, W1, out="int8", quant=hidden, in_zp=in_zp)
    return gemm_reference(config, h, W2, out=out, quant=quant,
                          in_zp=hidden.out_zp if out == "int8" else 0)
