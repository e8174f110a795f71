"""Compile int8 matrix products, and chains of them, into accelerator programs.

``compile_gemm(config, A, B)`` computes ``A @ B`` (A: M x K, B: K x N, int8) and returns a
``CompiledGemm``: the ``Program`` and ``decode(host_out)``, which turns the host-out stream back
into the M x N result. ``compile_chain(config, X, layers)`` computes a chain of layers
``x_{i+1} = requantize((x_i - in_zp_i) @ W_i)`` keeping the int8 activations between layers on
chip, and returns a ``CompiledChain``. Any M, K, N: operands and results that do not fit the
buffers stream through them; only host memory bounds a product.

Tiles (R x C array): a layer's K is cut into k-tiles of R rows and its N into n-tiles of C
columns (``Kt``, ``Nt``; the edges are zero-padded). Tile (kt, nt) of the weights is an R x C
block; a MATMUL takes a new tile from the weight FIFO (NEW_TILE; only the ramps' pieces reuse
one) and runs rows of one m-block of A (one k-tile wide) through it into accumulator rows
(ACCUMULATE for kt > 0).

Blocking (``_Plan``; every size a parameter chosen by ``_plan``):

  m-blocks  M is cut into blocks of ``mb`` rows (balanced); every layer of a chain runs over
            one m-block before the next starts.
  k-blocks  the first layer's A (from the host) sits in ``abuf`` (1 or 2) UB buffers of ``kb``
            k-tiles x ``mb`` rows. With ``kb == Kt`` an m-block's A is loaded once (and, with
            two buffers, the next m-block's A loads while this one computes). With ``kb < Kt``
            the products are taken in n-blocks of ``nb`` n-tiles: for each n-block the
            k-blocks of A are reloaded in turn (into the buffers alternately) and each n-tile
            accumulates over all of them in its own ACC slot. k- and n-blocks are balanced
            (their sizes differ by at most one). A k-tile's rows are reloaded as soon as the
            MATMULs reading its old rows are done, so with one buffer of two or more k-tiles
            the loads still overlap compute.
  ACC       ``slots`` slots of ``mb`` rows; the g-th n-tile of the program (counted over all
            m-blocks and layers) uses slot ``g % slots`` from its first MATMUL until its output
            has been read (``slots >= nb``).
  outputs   int32: WRITE_HOST FROM_ACC of the slot. int8 to the host: for each part p of the
            C-lane row (P = ceil(C/R) parts of R lanes; ACTIVATE's ``part``) and each chunk of
            ``stage`` rows: ACTIVATE into one of ``nstage`` staging buffers, WRITE_HOST of it
            (lanes 0..min(R, C)-1 of a beat hold columns nt*C + p*R + ..). int8 on chip (a
            hidden layer of a chain): ACTIVATE part p of n-tile nt into UB rows that are the
            next layer's A k-tile ``nt*P + p``: the next layer's weights are re-laid to match
            (its tile row r of k-tile nt*P + p is the hidden channel nt*C + p*R + r, zero past
            C or the layer's K), so with R != C a hidden n-tile becomes P k-tiles (with R > C a
            k-tile holds only C channels).
  UB        [A buffers: abuf*kb*mb][hidden region 0][hidden region 1][staging: nstage*stage]:
            layer i of a chain writes its activations into hidden region i % 2 and reads the
            previous layer's from region (i - 1) % 2.

``_plan`` picks the parameters that fit the buffers with the lowest estimated cycle count
(``_estimate``: MATMUL time (rows, or R when fewer, plus the engine's 3-cycle gap), host-in,
host-out and activation time, the exposed loads and outputs, MATMULs waiting for an ACC slot
still being read, fill and drain; calibrated against the Verilator harness, it is a guide for
choosing, not a promise). A chain boundary
whose activations cannot stay on chip (no ``mb >= 1`` fits) is a host round trip: the chain is
cut into stages (``CompiledChain.stages``), each its own program; a stage's input is the
previous stage's decoded output. A single GEMM needs only 1 UB row (int32) or 2 (int8) and 1
ACC row.

Instruction order (hardware: in-order dispatch to the host-in, matmul, activate and host-out
engines, each running one instruction at a time; dispatch stalls on a busy engine or a buffer
row conflict with an in-flight instruction). The MATMULs are emitted in order; between MATMUL j
and j+1 (the "interval" of j, whose instructions dispatch while MATMUL j runs):

  READ_HOST of the A rows MATMUL j+1 needs that are not loaded yet (mandatory)
  READ_WEIGHTS of the tiles up to ``weight_lookahead`` beyond the next MATMUL's (default 1,
  at most weight_fifo_depth - 1), so that untaken tiles never exceed the FIFO depth
  prefetch, within what remains of the interval's host-in time (MATMUL j's rows + 3, less the
  beats above): the next parameter set (below), then the next A rows in load order whose UB
  rows no MATMUL after j-1 reads before, in chunks
  the output instructions due (an n-tile's ACTIVATEs / WRITE_HOST FROM_ACC from the interval
  after its last MATMUL, staged WRITE_HOSTs one interval later), as many as the interval's
  host-out and activation time allows (at least one each)

Ramps: the program's first MATMUL is cut into pieces of about sqrt(3 * mb) rows that reuse its
tile (its A rows load piece by piece, so the array starts on the first piece, not after mb
rows), and with a blocked K the program's first k-block runs k-tile by k-tile (each A k-tile
serves all the block's n-tiles before the next one is needed, so the loads keep up); the
program's last MATMUL
is cut into pieces of at least L + 4 rows (L the array latency), each followed by its outputs,
so that only the last piece's outputs remain after the array stops.

An output instruction is emitted earlier than that when a later instruction touches the buffer
rows it uses, so the program's sequential meaning never changes. READ_QUANT: the requantization
parameters of every (layer, n-tile) up front when they fit the parameter sets
(``Config.quant_sets``); else, after each ACTIVATE, the next key's set is prefetched into
another set (when it fits an interval's host-in time; ``_Emitter``), and an ACTIVATE whose set
no set holds loads it right before, into the sets in turn. The host-out stream is the output
WRITE_HOSTs' beats in program order, then the SYNC beat; ``decode`` checks the SYNC beat (magic,
no error) and skips it.

Requantization (int8 outputs) is TFLite's (``sim.requant.QuantParams``: per output channel bias,
multiplier and shift; per layer zero point and clamp). A layer's input zero point ``in_zp`` is
folded into its bias: ``bias'[c] = bias[c] - in_zp * sum_k W[k, c]`` (mod 2**32), so the array
multiplies the raw int8 inputs. With ``acc_width >= 32`` this is TFLite's int32 arithmetic
exactly (every sum taken mod 2**32); narrower accumulators wrap earlier.

Programs assume a freshly reset core (empty weight FIFO, no recorded error).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from math import isqrt

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.activation import activation_timing
from tpugen.hdl.array import array_latency
from tpugen.hdl.config import OPERAND_TYPES, Config
from tpugen.hdl.layouts import host_lanes
from tpugen.sim import float_golden
from tpugen.sim.formats import encode, ml_dtype
from tpugen.sim.model import wrap
from tpugen.sim.program import Program, lane_dtype
from tpugen.sim.quant_beats import set_beats
from tpugen.sim.requant import QuantParams, requantize

__all__ = ["CompiledGemm", "CompiledChain", "ChainLayer", "LayerPlan", "compile_gemm",
           "compile_chain", "gemm_reference", "chain_reference", "fold_input_zero_point"]

_MAX_N = 0xFFFF
#: Idle cycles the matmul engine leaves between two MATMULs (``hdl.matmul_engine``).
_MATMUL_GAP = 3
#: The smallest READ_HOST chunk a prefetch splits off (fewer rows wait for the next interval).
_MIN_CHUNK = 16
#: The estimated cycles each staged output chunk (ACTIVATE + WRITE_HOST) adds (measured on a
#: 16 x 16 core: 8 to 17).
_CHUNK_COST = 12


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

    ``plan`` records the layout decisions (``mb``, ``slots``, ``nb``, ``kb``, ``abuf``,
    ``stage``, ``nstage``, ``kt``, ``nt``, the buffer bases, the rows used, the MATMUL count
    and the planner's cycle ``estimate``).
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
        if self.out == "fp32":
            return (result & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
        return result


# --- validation -------------------------------------------------------------------------------
def _matrix(name: str, value, config: Config | None = None) -> np.ndarray:
    """``value`` as an int64 matrix of ``config``'s operand lanes (int8 without a config).

    Integer types: integer values in the type's range. Float types: numbers (any float or
    integer dtype, or the ``ml_dtypes`` type itself) converted with ``sim.formats.encode``
    (round to nearest even; fp8 saturates), as the signed ``operand_width``-bit values of
    their bits."""
    ot = OPERAND_TYPES["int8"] if config is None else config.operand_type
    arr = np.asarray(value)
    if ot.is_float:
        if arr.dtype == bool or not (arr.dtype.kind in "iuf" or arr.dtype == ml_dtype(ot)):
            raise ValueError(f"{name} must be a numeric array ({ot.name} operands), not dtype "
                             f"{arr.dtype}")
    elif arr.dtype == bool or arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer ({ot.name}) array, not dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, not shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"{name} must have at least one row and column, not shape {arr.shape}")
    if ot.is_float:
        if arr.dtype.kind in "iu":
            arr = arr.astype(np.float64)
        return wrap(encode(arr, ot).astype(np.int64), ot.width)
    arr = arr.astype(np.int64)
    lo, hi = arr.min(), arr.max()
    if lo < ot.min or hi > ot.max:
        raise ValueError(f"{name} values must be in {ot.min}..{ot.max} ({ot.name}), found "
                         f"{lo}..{hi}")
    return arr


def _int_config(config: Config, what: str) -> None:
    if config.operand_type.is_float:
        raise ValueError(f"{what} needs an integer operand type, not {config.operand!r} (float "
                         f"types compute single GEMMs: compile_gemm with out='fp32')")


def _gemm_out(config: Config, out: str | None) -> str:
    """``out`` of ``compile_gemm`` checked against the operand type (``None``: its default)."""
    if config.operand_type.is_float:
        if out not in (None, "fp32"):
            raise ValueError(f"out must be 'fp32' for {config.operand}, not {out!r}")
        return "fp32"
    if out == "fp32":
        raise ValueError(f"out='fp32' needs a float operand type, not {config.operand!r}")
    return "int32" if out is None else out


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


# --- layers -----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ChainLayer:
    """One layer of a chain: ``y = requantize((x - in_zp) @ weights, params)`` (int8), or, for
    the last layer only, the ``acc_width``-wrapped sums ``x @ weights`` when ``params`` is
    ``None`` (then ``in_zp`` must be 0 or ``None``).

    ``weights``: K x N int8 values. ``in_zp``: the input zero point; ``None`` means the
    previous layer's ``params.out_zp`` (for the first layer: ``compile_chain``'s ``in_zp``).
    ``compile_chain`` also takes tuples ``(weights, params)`` / ``(weights, params, in_zp)``
    and objects with ``weights``, ``params`` and ``in_zp`` attributes (the TFLite importer's
    ``GemmLayer``).
    """

    weights: np.ndarray
    params: QuantParams | None = None
    in_zp: int | None = None


@dataclass
class _Spec:
    """A checked layer: int64 weights, the original parameters and the input zero point."""

    W: np.ndarray
    params: QuantParams | None
    in_zp: int

    @property
    def folded(self) -> QuantParams | None:
        return None if self.params is None else fold_input_zero_point(self.params, self.W,
                                                                      self.in_zp)


def _specs(layers, in_zp) -> list[_Spec]:
    """``layers`` checked (``ChainLayer`` says what they may be)."""
    if not isinstance(layers, list | tuple):
        raise TypeError(f"layers must be a list of layers, not {layers!r}")
    layers = list(layers)
    if not layers:
        raise ValueError("layers must hold at least one layer, not none")
    in_zp = _check_zp("in_zp", in_zp)
    out = []
    for i, layer in enumerate(layers):
        name = f"layers[{i}]"
        if isinstance(layer, tuple):
            if len(layer) not in (2, 3):
                raise ValueError(f"{name} must be (weights, params) or (weights, params, "
                                 f"in_zp), not a tuple of {len(layer)}")
            layer = ChainLayer(*layer)
        elif not all(hasattr(layer, a) for a in ("weights", "params", "in_zp")):
            raise TypeError(f"{name} must be a ChainLayer, a (weights, params[, in_zp]) "
                            f"tuple or have weights, params and in_zp, not {layer!r}")
        W = _matrix(f"{name}.weights", layer.weights)
        params = layer.params
        if params is None and i < len(layers) - 1:
            raise ValueError(f"{name}.params must be QuantParams: only the last layer may "
                             f"give int32 sums (params=None)")
        if params is not None and not isinstance(params, QuantParams):
            raise TypeError(f"{name}.params must be QuantParams or None, not {params!r}")
        if params is not None and params.channels not in (None, W.shape[1]):
            raise ValueError(f"{name}.params has {params.channels} channels, but its weights "
                             f"have {W.shape[1]} columns")
        zp = layer.in_zp
        if zp is None:
            zp = 0 if params is None else (in_zp if i == 0 else out[-1].params.out_zp)
        zp = _check_zp(f"{name}.in_zp", zp)
        if params is None and zp != 0:
            raise ValueError(f"{name}.in_zp must be 0 for int32 sums (params=None), not {zp}")
        if out and out[-1].W.shape[1] != W.shape[0]:
            raise ValueError(f"layers[{i - 1}] gives {out[-1].W.shape[1]} columns but "
                             f"{name}.weights has {W.shape[0]} rows")
        out.append(_Spec(W, params, zp))
    return out


@dataclass(eq=False)
class _Layer:
    """A layer as the scheduler sees it: tiles, padded (re-laid) weights, folded parameters.

    ``out``: "int32" / "int8" (to the host) / "ub" (kept on chip for the next layer).
    ``prev_nt``: ``None`` when the input comes from the host, else the previous layer's n-tile
    count (the input is its on-chip activations, re-laid as module docstring says).
    """

    W: np.ndarray
    quant: QuantParams | None
    out: str
    kt: int
    nt: int
    prev_nt: int | None

    def padded(self, config: Config) -> np.ndarray:
        """The weights as ``kt * R`` x ``nt * C``: row ``kt*R + r`` feeds UB lane r of k-tile
        kt (zero where no input channel sits there)."""
        R, C = config.rows, config.cols
        K, N = self.W.shape
        rows = np.arange(self.kt * R)
        if self.prev_nt is None:
            src = np.where(rows < K, rows, -1)
        else:
            P = _ceil(C, R)
            t, r = rows // R, rows % R
            lane = (t % P) * R + r
            ch = (t // P) * C + lane
            src = np.where((lane < C) & (ch < K), ch, -1)
        out = np.zeros((self.kt * R, self.nt * C), dtype=np.int64)
        ok = src >= 0
        out[ok, :N] = self.W[src[ok]]
        return out

    def tile_quant(self, nt: int, config: Config) -> QuantParams:
        """The parameters of n-tile ``nt``: channels nt*C .. nt*C + C - 1 (0 past N)."""
        C = config.cols
        N = self.W.shape[1]
        arrays = []
        for a in self.quant.per_channel(N):
            t = np.zeros(C, dtype=np.int64)
            part = a[nt * C:(nt + 1) * C]
            t[:len(part)] = part
            arrays.append(t)
        q = self.quant
        return QuantParams(bias=arrays[0], multiplier=arrays[1], shift=arrays[2],
                           out_zp=q.out_zp, act_min=q.act_min, act_max=q.act_max)


def _dims(config: Config, specs: list[_Spec]) -> list[tuple[int, int, bool]]:
    """(kt, nt, on-chip input) of each layer of one stage (the first takes the host's)."""
    R, C = config.rows, config.cols
    P = _ceil(C, R)
    out = []
    for i, s in enumerate(specs):
        K, N = s.W.shape
        kt = _ceil(K, R) if i == 0 else out[-1][1] * P
        out.append((kt, _ceil(N, C), i > 0))
    return out


def _layers(config: Config, specs: list[_Spec], last_out: str) -> list[_Layer]:
    """The scheduler's layers of one stage; ``last_out``: the last one's output kind."""
    dims = _dims(config, specs)
    layers = []
    for i, (s, (kt, nt, _)) in enumerate(zip(specs, dims, strict=True)):
        out = last_out if i == len(specs) - 1 else "ub"
        layers.append(_Layer(s.W, s.folded, out, kt, nt, dims[i - 1][1] if i else None))
    return layers


# --- the plan ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    """The blocking of one program (module docstring) and its estimated cycles."""

    mb: int
    slots: int
    nb: int
    kb: int
    abuf: int
    stage: int
    nstage: int
    hidden: tuple[int, int]     # k-tiles of hidden regions 0 and 1
    estimate: int

    @property
    def h_base(self) -> tuple[int, int]:
        b0 = self.abuf * self.kb * self.mb
        return b0, b0 + self.hidden[0] * self.mb

    @property
    def stage_base(self) -> int:
        return self.h_base[1] + self.hidden[1] * self.mb

    @property
    def ub_rows_used(self) -> int:
        return self.stage_base + self.nstage * self.stage

    @property
    def acc_rows_used(self) -> int:
        return self.slots * self.mb


def _blocks(n: int, size: int) -> list[range]:
    """``range(n)`` cut into the fewest blocks of at most ``size``, balanced (their sizes
    differ by at most one)."""
    count = _ceil(n, size)
    return [range(i * n // count, (i + 1) * n // count) for i in range(count)]


def _hidden(dims) -> tuple[int, int]:
    """The k-tiles hidden regions 0 and 1 hold: layer i's activations (the next layer's input)
    go to region i % 2."""
    chip = [kt for kt, _, on_chip in dims if on_chip]
    return max(chip[0::2], default=0), max(chip[1::2], default=0)


def _mb_candidates(config: Config, M: int, dims) -> list[int]:
    """Row-block sizes worth estimating: balanced splits of M, powers of two, and the largest
    sizes that fit the buffers with A resident."""
    cap = min(M, _MAX_N, config.acc_rows)
    hidden = sum(_hidden(dims))
    raw = {1, cap}
    raw.update(_ceil(M, b) for b in range(1, 65))
    p = 1
    while p <= cap:
        raw.add(p)
        p *= 2
    for abuf in (1, 2):
        for extra in (0, 2, 4):
            raw.add(config.ub_rows // max(1, abuf * dims[0][0] + hidden + extra))
    for slots in (1, 2, 3, 4):
        raw.add(config.acc_rows // slots)
    out = set()
    for v in raw:
        if v >= 1:
            v = min(v, cap)
            out.add(_ceil(M, _ceil(M, v)))     # the same block count, balanced
    return sorted(out, reverse=True)


def _estimate(config: Config, M: int, dims, last_int8: bool, mb: int, slots: int, nb: int,
              kb: int, abuf: int, stage: int, nstage: int) -> int:
    """The planner's cycle estimate of a plan (module docstring): a guide for choosing, not a
    promise."""
    R, C = config.rows, config.cols
    P = _ceil(C, R)
    act_row = activation_timing(config)[0]
    lat = array_latency(config)
    full, rem = divmod(M, mb)
    nmb = full + (rem > 0)

    def per_block(f):
        return full * f(mb) + (f(rem) if rem else 0)

    matmuls = sum(kt * nt for kt, nt, _ in dims)
    compute = matmuls * per_block(lambda r: max(r + _MATMUL_GAP, R))
    kt0, nt0, _ = dims[0]
    a_reloads = 1 if kb >= kt0 else _ceil(nt0, nb)
    a_beats = M * kt0 * a_reloads
    host_in = nmb * matmuls * R + a_beats
    _, nt_last, _ = dims[-1]
    host_out = M * nt_last * (P if last_int8 else 1)
    act = sum(M * nt * P * act_row for _, nt, _ in dims[:-1])
    act += M * nt_last * P * act_row if last_int8 else 0
    exposed = 0
    kbuf = min(kb, kt0)
    loads = nmb * (len(_blocks(kt0, kb)) * _ceil(nt0, nb) if kb < kt0 else 1) - 1
    if abuf == 1 and len(dims) == 1 and loads > 0:
        if kbuf == 1:
            # One buffer of one k-tile: each load waits for the MATMULs reading the last one.
            exposed += a_beats - min(mb, M)
        else:
            # Its k-tiles free up one by one: k-tile t can load during the kbuf - 1 MATMULs
            # between its last reader and its next first reader, and all kbuf of them during
            # 2 kbuf - 2 MATMULs, beside the weights of those MATMULs.
            d = max(mb + _MATMUL_GAP, R)
            late = max(mb + R * (kbuf - 1) - (kbuf - 1) * d,
                       kbuf * mb + R * (2 * kbuf - 2) - (2 * kbuf - 2) * d)
            exposed += loads * max(0, late)
    if slots == 1:
        exposed += host_out + (M * nt_last * P * act_row if last_int8 else 0)
    if last_int8:
        chunks = nt_last * P * per_block(lambda r: _ceil(r, stage))
        exposed += _CHUNK_COST * chunks + (host_out if nstage == 1 else 0)
    exposed += nmb * (len(dims) - 1) * (lat + mb * P * act_row)
    exposed += _slot_stalls(config, M, dims, last_int8, mb, slots, nb, kb)
    fill = min(mb, M) + R + 3
    # The first k-tiles load while the first MATMULs run: with A resident each k-tile serves
    # one MATMUL before the next is needed; the program's first k-block of a blocked K runs
    # k-tile by k-tile, each serving nb MATMULs.
    d0 = max(min(mb, M) + _MATMUL_GAP, R)
    uses = 1 if kb >= kt0 else min(nb, nt0)
    fill += (kbuf - 1) * max(0, min(mb, M) + R * uses - uses * d0)
    drain = lat + min(mb, M) * (P * max(1, act_row) if last_int8 else 1)
    return max(compute, host_in, host_out, act) + exposed + fill + drain


def _slot_stalls(config: Config, M: int, dims, last_int8: bool, mb: int, slots: int, nb: int,
                 kb: int) -> int:
    """The estimated wait of MATMULs for an ACC slot whose previous n-tile's outputs are still
    reading it (outputs read the accumulators one instruction at a time)."""
    R, C = config.rows, config.cols
    P = _ceil(C, R)
    act_row = activation_timing(config)[0]
    lat = array_latency(config)
    d = max(mb + _MATMUL_GAP, R)             # one MATMUL of a full block
    nmb = _ceil(M, mb)
    total = 0
    for li, (kt, nt, _) in enumerate(dims):
        last = li == len(dims) - 1
        out_t = mb * (P * act_row if not last or last_int8 else 1)
        if li == 0 and kb < kt:
            # n-blocks of nb n-tiles; n-tile i of a block finishes (i+1) * kbl MATMULs into the
            # last k-block, the next block's n-tile i starts i * kb MATMULs after the block
            # and reuses the slot of n-tile i - spare.
            kbl = len(_blocks(kt, kb)[-1])
            spare = slots - nb
            end, stall = 0, 0
            ends = []
            for i in range(nb):
                end = max(end, (i + 1) * kbl * d + lat) + out_t
                ends.append(end)
            for i in range(spare, nb):
                stall = max(stall, ends[i - spare] - (nb * kbl + i * kb) * d)
            total += nmb * (_ceil(nt, nb) - 1) * max(0, stall)
        else:
            stall = lat + out_t - (slots - 1) * kt * d
            total += nmb * max(0, nt - slots) * max(0, stall)
    return total


def _plan(config: Config, M: int, dims, last_int8: bool) -> _Plan | None:
    """The fitting plan of lowest estimate for one stage (``dims`` from ``_dims``), or
    ``None`` when nothing fits (a hidden layer's activations need more UB rows than there
    are)."""
    hidden = _hidden(dims)
    kt0, nt0, _ = dims[0]
    best = None
    for mb in _mb_candidates(config, M, dims):
        slots_max = config.acc_rows // mb
        free = config.ub_rows - (hidden[0] + hidden[1]) * mb
        if slots_max < 1 or free < 1:
            continue
        stages = [(0, 0)]
        if last_int8:
            sizes = {mb, _ceil(mb, 2), _ceil(mb, 4), min(mb, 16), 1, (free - 1) // 2,
                     free - 1}
            stages = [(s, n) for s in sizes if 1 <= s <= mb for n in (2, 1)
                      if n * s <= free - 1]
        for stage, nstage in stages:
            room = free - stage * nstage
            for abuf in (2, 1):
                most = min(kt0, room // (abuf * mb))
                if most < 1:
                    continue
                # The most k-tiles that fit, and a few blocked K's: a blocked first k-block
                # can start faster than a resident A (it runs k-tile by k-tile), unless the
                # weight loads bound the MATMULs anyway (mb + 3 <= R).
                kbs = {most}
                if mb + _MATMUL_GAP > config.rows:
                    kbs |= {k for k in (2, 3, kt0 // 2) if 1 <= k < min(most, kt0)}
                for kb, nb in [(k, n) for k in kbs
                               for n in ({1} if k >= kt0 else
                                         {min(slots_max, nt0),
                                          max(1, min(slots_max - 1, nt0))})]:
                    slots = min(slots_max, max(nb + 1, 2))
                    est = _estimate(config, M, dims, last_int8, mb, slots, nb, kb, abuf,
                                    stage, nstage)
                    # Ties: fewer A reloads, then larger blocks.
                    key = (est, 1 if kb >= kt0 else _ceil(nt0, nb), -mb)
                    if best is None or key < best[0]:
                        best = key, _Plan(mb, slots, nb, kb, abuf, stage, nstage, hidden, est)
    return None if best is None else best[1]


# --- the emitter ------------------------------------------------------------------------------
@dataclass
class _Action:
    """An output instruction waiting until ``due`` MATMULs have been emitted. ``engine``: "ho"
    or "av"; ``cost``: its cycles on that engine."""

    word: int
    due: int
    engine: str
    cost: int
    quant: tuple | None = None      # the key (layer, n-tile) of an ACTIVATE's parameters
    segment: _Segment | None = None


class _Emitter:
    """Appends instructions as columns (words, host-in beats, where the beats come from);
    defers output instructions until due, hazards permitting.

    Host-in data is not copied per instruction: each instruction that carries data records
    segments (start, count) of rows of a source table (``_schedule``'s A k-tiles, weight
    tiles and parameter sets); ``program(table)`` gathers them once.

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
        self.seg_start: list[int] = []
        self.seg_count: list[int] = []
        self.pending: deque[_Action] = deque()
        self.quant_rows = quant_rows or {}
        self.quant_order = list(quant_order)
        self.activates = 0                     # ACTIVATEs emitted so far
        self.in_set: dict = {}                 # key -> the parameter set holding it
        self.turn = 0                          # the next set to load into, in turn
        self.quant_sets_fit = len(self.quant_rows) <= config.quant_sets
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

    def _qset(self, key) -> int:
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

    def _emit_action(self, action: _Action) -> None:
        word = action.word
        if action.quant is not None:
            f = isa.decode(word)
            word = isa.encode(isa.Op.ACTIVATE, self._qset(action.quant), src=f["src"],
                              dst=f["dst"], n=f["n"], part=f["part"])
        if action.segment is not None:
            self.segments.append(action.segment)
        self._append(word)
        if action.quant is not None:
            self.activates += 1

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

    def defer(self, action: _Action) -> None:
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


@dataclass
class _Load:
    """``n`` A rows into UB rows ``ub..``, from table rows ``tab..``: needed by MATMUL
    ``deadline``; MATMUL ``after`` is the last one before it that reads these UB rows (-1:
    none). ``done``: rows emitted so far."""

    ub: int
    tab: int
    n: int
    deadline: int
    after: int
    done: int = 0


def _table(config: Config, M: int, A: np.ndarray, layers: list[_Layer]):
    """The source table of the host-in beats, and where its parts start: A's k-tiles (row
    kt * M + m: A[m, kt*R:(kt+1)*R], zero-padded), each layer's weight tiles (tile (kt, nt):
    rows (kt * nt_count + nt) * R + i), the parameter sets by (layer, n-tile)."""
    R, C = config.rows, config.cols
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


def _schedule(config: Config, M: int, A: np.ndarray, layers: list[_Layer], plan: _Plan,
              lookahead: int) -> tuple[_Emitter, Program, list[int]]:
    """The program of one stage; also the MATMUL count of each layer."""
    R, C = config.rows, config.cols
    P = _ceil(C, R)
    mb = plan.mb
    act_row = activation_timing(config)[0]
    table, w_base, quant_rows = _table(config, M, A, layers)
    words: dict[tuple, int] = {}

    def word(op, flags=0, **kw) -> int:
        key = (op, flags, *kw.items())
        w = words.get(key)
        if w is None:
            w = words[key] = isa.encode(op, flags, **kw)
        return w

    # The MATMULs in order, the A loads, and the outputs that follow each MATMUL.
    jobs: list[tuple[int, int]] = []       # (word, rows)
    taken: list[int] = []                  # tiles taken through each MATMUL
    tiles: list[int] = []                  # the table row of each tile, in FIFO order
    loads: list[_Load] = []
    waiting: list[_Load] = []              # loads whose first reader is still to come
    last_reader = np.full(config.ub_rows, -1, dtype=np.int64)
    after: dict[int, list[_Action]] = {}   # outputs, ``due`` relative to their MATMUL
    per_layer = [0] * len(layers)
    g = 0                                  # n-tiles so far (ACC slot g % slots)
    a_turn = 0                             # the next A buffer
    s_turn = 0                             # the next staging buffer

    def load(ub, tab, n):
        ld = _Load(ub, tab, n, -1, int(last_reader[ub:ub + n].max()))
        loads.append(ld)
        waiting.append(ld)

    def matmul(li, src, acc, rows, kt, nt, new_tile=True):
        j = len(jobs)
        for ld in [w for w in waiting if w.ub < src + rows and src < w.ub + w.n]:
            ld.deadline = j
            waiting.remove(ld)
        last_reader[src:src + rows] = j
        if new_tile:
            layer = layers[li]
            tiles.append(w_base[li] + (kt * layer.nt + nt) * R)
        flags = (isa.Flag.NEW_TILE.value if new_tile else 0) | (
            isa.Flag.ACCUMULATE.value if kt else 0)
        jobs.append((word(isa.Op.MATMUL, flags, src=src, dst=acc, n=rows), rows))
        taken.append(len(tiles))
        per_layer[li] += new_tile
        return j

    def outputs(j, li, nt, acc, m0, rows):
        nonlocal s_turn
        layer = layers[li]
        acts = after.setdefault(j, [])
        if layer.out in ("int32", "fp32"):
            acts.append(_Action(word(isa.Op.WRITE_HOST, isa.Flag.FROM_ACC.value, src=acc,
                                     n=rows), 1, "ho", rows,
                                segment=_Segment(m0, rows, nt * C, C, 1, (nt + 1) * C)))
            return
        for p in range(P):
            if layer.out == "ub":
                dst = plan.h_base[li % 2] + (nt * P + p) * mb + (m0 % mb)
                acts.append(_Action(word(isa.Op.ACTIVATE, src=acc, dst=dst, n=rows, part=p), 1,
                                    "av", rows * act_row, (li, nt)))
                continue
            for c0 in range(0, rows, plan.stage):
                n = min(plan.stage, rows - c0)
                dst = plan.stage_base + (s_turn % plan.nstage) * plan.stage
                s_turn += 1
                acts.append(_Action(word(isa.Op.ACTIVATE, src=acc + c0, dst=dst, n=n, part=p),
                                    1, "av", n * act_row, (li, nt)))
                acts.append(_Action(word(isa.Op.WRITE_HOST, src=dst, n=n), 2, "ho", n,
                                    segment=_Segment(m0 + c0, n, nt * C + p * R, min(R, C), 1,
                                                     (nt + 1) * C)))

    def pieces(rows, size):
        """Row offsets and counts of ``rows`` cut into pieces of about ``size`` (one piece
        when fewer than two fit)."""
        n = max(1, rows // size)
        return [(i * rows // n, (i + 1) * rows // n - i * rows // n) for i in range(n)]

    # Ramps (module docstring): the program's first MATMUL starts on its first rows, its
    # last one's outputs leave piece by piece.
    up = max(8, isqrt(3 * mb))
    down = max(array_latency(config) + 4, isqrt(3 * mb))
    last_m0 = (M - 1) // mb * mb

    def is_final(li, nt, k, m0):
        layer = layers[li]
        return (li == len(layers) - 1 and m0 == last_m0 and nt == layer.nt - 1
                and k == layer.kt - 1)

    def final_matmul(li, src, acc, rows, kt, nt, m0):
        """The last MATMUL of the program, in pieces, each followed by its outputs."""
        for i, (a, n) in enumerate(pieces(rows, down)):
            j = matmul(li, src + a, acc + a, n, kt, nt, new_tile=i == 0)
            outputs(j, li, nt, acc + a, m0 + a, n)

    for m0 in range(0, M, mb):
        rows = min(mb, M - m0)
        first = layers[0]
        kb = plan.kb
        nblocks = _blocks(first.nt, plan.nb) if kb < first.kt else [range(first.nt)]
        kblocks = _blocks(first.kt, kb)
        src: dict[int, int] = {}
        for bi, nts in enumerate(nblocks):
            slots = {nt: (g + i) % plan.slots for i, nt in enumerate(nts)}
            g += len(nts)
            for ki, kts in enumerate(kblocks):
                start = not jobs
                if kb < first.kt or bi == 0:
                    buf = a_turn
                    a_turn = (a_turn + 1) % plan.abuf
                    for t, k in enumerate(kts):
                        ub = (buf * kb + t) * mb
                        for a, n in pieces(rows, up) if start and t == 0 else [(0, rows)]:
                            load(ub + a, k * M + m0 + a, n)
                        src[k] = ub
                # The program's first k-block: k-tile by k-tile, so that each A k-tile
                # serves every n-tile of the block before the next one is needed.
                order = ([(nt, k) for k in kts for nt in nts] if start and kb < first.kt
                         else [(nt, k) for nt in nts for k in kts])
                for nt, k in order:
                    acc = slots[nt] * mb
                    if start and not jobs:
                        for i, (a, n) in enumerate(pieces(rows, up)):
                            matmul(0, src[k] + a, acc + a, n, k, nt, new_tile=i == 0)
                    elif is_final(0, nt, k, m0):
                        final_matmul(0, src[k], acc, rows, k, nt, m0)
                        continue
                    else:
                        matmul(0, src[k], acc, rows, k, nt)
                    if ki == len(kblocks) - 1 and k == kts[-1]:
                        outputs(len(jobs) - 1, 0, nt, acc, m0, rows)
        for li in range(1, len(layers)):
            layer = layers[li]
            base = plan.h_base[(li - 1) % 2]
            for nt in range(layer.nt):
                acc = (g % plan.slots) * mb
                g += 1
                for k in range(layer.kt):
                    if is_final(li, nt, k, m0):
                        final_matmul(li, base + k * mb, acc, rows, k, nt, m0)
                    else:
                        matmul(li, base + k * mb, acc, rows, k, nt)
                if not is_final(li, nt, layer.kt - 1, m0):
                    outputs(len(jobs) - 1, li, nt, acc, m0, rows)
    assert not waiting

    # Emission (module docstring).
    em = _Emitter(config, quant_rows, [a.quant for j in sorted(after) for a in after[j]
                                       if a.quant is not None])
    n_jobs = len(jobs)
    queue = deque(loads)
    requested = 0

    def weights(j):
        """READ_WEIGHTS of the tiles up to ``lookahead`` beyond MATMUL ``j``'s; the count."""
        nonlocal requested
        upto = min(len(tiles), taken[min(j, n_jobs - 1)] + lookahead)
        got = upto - requested
        if got > 0:
            em.emit(word(isa.Op.READ_WEIGHTS, n=got), [(t, R) for t in tiles[requested:upto]])
            requested = upto
        return max(got, 0)

    def emit_load(ld, n):
        em.emit(word(isa.Op.READ_HOST, dst=ld.ub + ld.done, n=n), [(ld.tab + ld.done, n)])
        ld.done += n
        if ld.done == ld.n:
            queue.popleft()
        return n

    def needed(j) -> int:
        beats = 0
        while queue and queue[0].deadline <= j:
            beats += emit_load(queue[0], queue[0].n - queue[0].done)
        return beats

    em.load_all_quant()
    weights(0)
    needed(0)
    for j in range(n_jobs):
        w, rows = jobs[j]
        em.emit(w, matmul=True)
        for act in after.get(j, ()):
            act.due += j + 1
            em.defer(act)
        interval = max(rows + _MATMUL_GAP, R)
        budget = interval - needed(j + 1)
        budget -= R * weights(j + 1)
        budget -= em.prefetch_set(budget)
        while queue and budget > 0 and queue[0].after < j:
            ld = queue[0]
            n = min(ld.n - ld.done, budget)
            if n < min(ld.n - ld.done, _MIN_CHUNK):
                break
            budget -= emit_load(ld, n)
        em.flush_due(interval)
    em.flush_all()
    em.emit(word(isa.Op.SYNC))
    return em, em.program(table), per_layer


def _lookahead(config: Config, weight_lookahead) -> int:
    if weight_lookahead is None:
        return min(1, config.weight_fifo_depth - 1)
    if (not isinstance(weight_lookahead, int) or isinstance(weight_lookahead, bool)
            or not 0 <= weight_lookahead < config.weight_fifo_depth):
        raise ValueError(f"weight_lookahead must be an integer in "
                         f"0..{config.weight_fifo_depth - 1}, not {weight_lookahead!r}")
    return weight_lookahead


def _no_fit(config: Config) -> ValueError:
    return ValueError(f"out='int8' needs at least 2 unified-buffer rows (one operand row, one "
                      f"staging row), but config.ub_rows is {config.ub_rows}")


def _compile_stage(config: Config, A: np.ndarray, specs: list[_Spec], last_out: str,
                   lookahead: int, plan: _Plan | None = None) -> CompiledGemm:
    """One program: ``A`` through the layers ``specs`` (activations on chip between them)."""
    M = A.shape[0]
    layers = _layers(config, specs, last_out)
    dims = _dims(config, specs)
    if plan is None:
        plan = _plan(config, M, dims, last_out == "int8")
        if plan is None:
            raise _no_fit(config)
    em, program, per_layer = _schedule(config, M, A, layers, plan, lookahead)
    info = dict(mb=plan.mb, slots=plan.slots, nb=plan.nb, kb=plan.kb, abuf=plan.abuf,
                stage=plan.stage, nstage=plan.nstage, kt=dims[0][0], nt=dims[-1][1],
                h_base=plan.h_base, stage_base=plan.stage_base,
                ub_rows_used=plan.ub_rows_used, acc_rows_used=plan.acc_rows_used,
                matmuls=per_layer, estimate=plan.estimate, weight_lookahead=lookahead)
    return CompiledGemm(config, program, (M, specs[-1].W.shape[1]), last_out, info,
                        em.segments)


def compile_gemm(config: Config, A, B, *, out: str | None = None,
                 quant: QuantParams | None = None, in_zp: int = 0,
                 weight_lookahead: int | None = None) -> CompiledGemm:
    """Compile ``A @ B`` (A: M x K, B: K x N operands of ``config.operand``, any sizes) for
    ``config``.

    ``out="int32"`` (integer types' default): the ``acc_width``-wrapped sums; ``out="int8"``:
    TFLite's requantization of ``(A - in_zp) @ B`` with ``quant`` (``sim.requant.QuantParams``,
    N channels or one value for all; int4: clamped to -8..7 as well). Float types
    (``out="fp32"``, their only one): A and B are numbers converted to the operand type
    (``_matrix``), the result is the binary32 accumulators as ``np.float32``
    (``sim.float_golden.gemm``'s order). ``weight_lookahead``: tiles requested ahead of the
    MATMUL taking the current one (default ``min(1, depth-1)``). ``ValueError`` /
    ``TypeError`` for bad input, and ``ValueError`` for ``out="int8"`` with a 1-row unified
    buffer.
    """
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    out = _gemm_out(config, out)
    A = _matrix("A", A, config)
    B = _matrix("B", B, config)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"A is {A.shape[0]} x {A.shape[1]} but B is {B.shape[0]} x "
                         f"{B.shape[1]}: A's columns must equal B's rows")
    in_zp = _check_zp("in_zp", in_zp)
    quant = None if out == "fp32" else _out_quant(out, quant, in_zp, B.shape[1])
    lookahead = _lookahead(config, weight_lookahead)
    return _compile_stage(config, A, [_Spec(B, quant, in_zp)], out, lookahead)


# --- chains -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LayerPlan:
    """One layer of a compiled chain: its GEMM ``shape`` (M, K, N), its k-tiles and n-tiles
    (``kt`` counts the re-laid k-tiles of an on-chip input), where its ``input`` comes from and
    its ``output`` goes (``"host"`` or ``"chip"``), the ``stage`` (program) it runs in and its
    ``matmuls``."""

    shape: tuple[int, int, int]
    kt: int
    nt: int
    input: str
    output: str
    stage: int
    matmuls: int


@dataclass
class _Stage:
    lo: int
    hi: int
    plan: _Plan
    compiled: CompiledGemm | None = None


class CompiledChain:
    """A compiled chain (``compile_chain``).

    ``layers``: one ``LayerPlan`` each. ``stages``: the programs; normally one. A boundary whose
    activations cannot stay on chip splits the chain there (that layer's ``output`` and the
    next one's ``input`` are ``"host"``): each later stage is compiled from the previous
    stage's decoded output, so run them with ``run``. With one stage, ``program``,
    ``host_out_beats`` and ``decode`` are that program's (``ValueError`` with more).
    """

    def __init__(self, config: Config, X: np.ndarray, specs: list[_Spec], stages: list[_Stage],
                 lookahead: int):
        self.config = config
        self._specs = specs
        self._stages = stages
        self._lookahead = lookahead
        self.out = "int32" if specs[-1].params is None else "int8"
        self.shape = (X.shape[0], specs[-1].W.shape[1])
        stages[0].compiled = self._compile(0, X)
        layers = []
        M = X.shape[0]
        for si, st in enumerate(stages):
            dims = _dims(config, specs[st.lo:st.hi])
            for i, (kt, nt, chip) in enumerate(dims):
                li = st.lo + i
                K, N = specs[li].W.shape
                matmuls = _ceil(M, st.plan.mb) * kt * nt
                layers.append(LayerPlan((M, K, N), kt, nt, "chip" if chip else "host",
                                        "chip" if li < st.hi - 1 else "host", si, matmuls))
        self.layers = layers

    @property
    def stages(self) -> int:
        """The number of programs (host round trips + 1)."""
        return len(self._stages)

    def _compile(self, i: int, x: np.ndarray) -> CompiledGemm:
        st = self._stages[i]
        last = "int8" if st.hi < len(self._specs) else self.out
        return _compile_stage(self.config, x, self._specs[st.lo:st.hi], last, self._lookahead,
                              st.plan)

    def _single(self) -> CompiledGemm:
        if len(self._stages) > 1:
            raise ValueError(f"this chain runs as {len(self._stages)} programs (host round "
                             f"trips after layers {[s.hi - 1 for s in self._stages[:-1]]}): "
                             f"use run()")
        return self._stages[0].compiled

    @property
    def program(self) -> Program:
        return self._single().program

    @property
    def host_out_beats(self) -> int:
        return self._single().host_out_beats

    def decode(self, host_out) -> np.ndarray:
        """The M x N output of a one-stage chain (``CompiledGemm.decode``)."""
        return self._single().decode(host_out)

    def stage(self, i: int) -> CompiledGemm | None:
        """Stage ``i``'s compiled program (``None`` until ``run`` has made it: its input is
        the previous stage's output)."""
        return self._stages[i].compiled

    def run(self, execute: Callable) -> tuple[np.ndarray, list]:
        """Run every stage: ``execute(program)`` must return its host-out beats (an array of
        beats x C, or an object with ``host_out``). Returns the M x N output and what
        ``execute`` returned for each stage; ``ValueError`` from ``decode`` when a stage's
        stream is wrong."""
        results = []
        x = None
        for i in range(len(self._stages)):
            if i:
                self._stages[i].compiled = self._compile(i, x)
            compiled = self._stages[i].compiled
            result = execute(compiled.program)
            results.append(result)
            x = compiled.decode(result)
        return x, results


def _stages(config: Config, M: int, specs: list[_Spec]) -> list[_Stage]:
    """The chain cut into the fewest stages from the left, each with its plan."""
    out_last = "int32" if specs[-1].params is None else "int8"
    stages = []
    lo = 0
    while lo < len(specs):
        hi, plan = lo, None
        while hi < len(specs):
            last_int8 = hi + 1 < len(specs) or out_last == "int8"
            p = _plan(config, M, _dims(config, specs[lo:hi + 1]), last_int8)
            if p is None:
                break
            hi, plan = hi + 1, p
        if plan is None:
            raise _no_fit(config)
        stages.append(_Stage(lo, hi, plan))
        lo = hi
    return stages


def compile_chain(config: Config, X, layers, in_zp: int = 0, *,
                  weight_lookahead: int | None = None) -> CompiledChain:
    """Compile the chain ``layers`` applied to ``X`` (M x K0 int8) for ``config`` (any R, C).

    Each layer is ``y = requantize((x - in_zp_i) @ W_i, params_i)`` (int8; ``ChainLayer`` says
    how layers may be given); the last may give int32 sums instead (``params=None``).
    ``in_zp``: the first layer's input zero point when it does not give its own. The
    activations between layers stay on chip (no host round trip) whenever the unified buffer
    can hold a layer's whole output for at least one row of X; else the chain is cut there
    into separate programs (``CompiledChain.layers`` says where). ``TypeError`` /
    ``ValueError`` for bad input.
    """
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    _int_config(config, "compile_chain")
    X = _matrix("X", X, config)
    specs = _specs(layers, in_zp)
    if X.shape[1] != specs[0].W.shape[0]:
        raise ValueError(f"X is {X.shape[0]} x {X.shape[1]} but layers[0].weights has "
                         f"{specs[0].W.shape[0]} rows: X's columns must equal its rows")
    lookahead = _lookahead(config, weight_lookahead)
    return CompiledChain(config, X, specs, _stages(config, X.shape[0], specs), lookahead)


# --- references -------------------------------------------------------------------------------
def gemm_reference(config: Config, A, B, *, out: str | None = None,
                   quant: QuantParams | None = None, in_zp: int = 0) -> np.ndarray:
    """What ``compile_gemm(...).decode`` must return, computed with NumPy: the
    ``acc_width``-wrapped ``A @ B``, or it requantized with ``quant`` and the input zero point
    folded into the bias (with ``acc_width >= 32``: TFLite's ``requantize((A - in_zp) @ B,
    quant)``, every sum mod 2**32; int4: clamped to -8..7). Float types: the binary32 sums in
    the array's order (``sim.float_golden.gemm`` with ``config.rows``) as ``np.float32``."""
    out = _gemm_out(config, out)
    A = _matrix("A", A, config)
    B = _matrix("B", B, config)
    ot = config.operand_type
    if ot.is_float:
        mask = (1 << ot.width) - 1
        bits = float_golden.gemm(A & mask, B & mask, ot, config.rows)
        return np.asarray(bits, dtype=np.uint32).view(np.float32)
    acc = wrap(_exact_matmul(A, B), config.acc_width)
    quant = _out_quant(out, quant, _check_zp("in_zp", in_zp), B.shape[1])
    if quant is None:
        return acc
    return np.clip(requantize(acc, fold_input_zero_point(quant, B, in_zp)), ot.min, ot.max)


def chain_reference(config: Config, X, layers, in_zp: int = 0) -> np.ndarray:
    """What ``compile_chain(...)`` must produce, computed with NumPy layer by layer
    (``gemm_reference``): the last layer's M x N output (int8 values, or the int32 sums)."""
    _int_config(config, "chain_reference")
    x = _matrix("X", X, config)
    for s in _specs(layers, in_zp):
        out = "int32" if s.params is None else "int8"
        x = gemm_reference(config, x, s.W, out=out, quant=s.params, in_zp=s.in_zp)
    return x


def _exact_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` of int8 matrices, exact, as int64: in float64 (BLAS) while every sum is below
    2**53 in magnitude, which holds for K < 2**38; NumPy's int64 product otherwise."""
    if A.shape[1] * 128 * 128 < 1 << 53:
        return np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.int64)
    return np.matmul(A, B)
