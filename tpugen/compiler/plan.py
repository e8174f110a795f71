"""The blocking of one program and the cost model that chooses it.

Blocking (``Plan``; every size a parameter chosen by ``best_plan``):

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
            hidden layer of a chain): ACTIVATE part p of n-tile nt into the UB rows of the
            next layer's A k-tile ``nt*P + p`` (``layers`` module docstring).
  UB        [A buffers: abuf*kb*mb][hidden region 0][hidden region 1][staging: nstage*stage]:
            layer i of a chain writes its activations into hidden region i % 2 and reads the
            previous layer's from region (i - 1) % 2.

``best_plan`` picks the parameters that fit the buffers with the lowest estimated cycle count
(``estimate_cycles``: MATMUL time (rows, or R when fewer, plus the engine's 3-cycle gap),
host-in, host-out and activation time, the exposed loads and outputs, MATMULs waiting for an
ACC slot still being read, fill and drain; calibrated against the Verilator harness, it is a
guide for choosing, not a promise). It returns ``None`` when no ``mb >= 1`` fits: a hidden
layer's activations need more UB rows than there are (``chain`` then cuts the chain there). A
single GEMM needs only 1 UB row (int32) or 2 (int8) and 1 ACC row.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpugen.compiler.operands import ceil_div
from tpugen.hdl import isa
from tpugen.hdl.activation import activation_timing
from tpugen.hdl.array import array_latency
from tpugen.hdl.config import Config

__all__ = ["MAX_ROWS", "MATMUL_GAP", "CHUNK_COST", "Plan", "balanced_blocks", "hidden_k_tiles",
           "estimate_cycles", "exposed_loads", "slot_stalls", "best_plan"]

#: The most rows one instruction moves: the ISA's ``n`` field (an m-block is at most this).
MAX_ROWS = next(f.max for f in isa.body_fields(isa.Op.MATMUL) if f.name == "n")
#: Idle cycles the matmul engine leaves between two MATMULs (``hdl.matmul_engine``).
MATMUL_GAP = 3
#: The estimated cycles each staged output chunk (ACTIVATE + WRITE_HOST) adds (measured on a
#: 16 x 16 core: 8 to 17).
CHUNK_COST = 12


@dataclass(frozen=True)
class Plan:
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
        """The first UB rows of hidden regions 0 and 1."""
        b0 = self.abuf * self.kb * self.mb
        return b0, b0 + self.hidden[0] * self.mb

    @property
    def stage_base(self) -> int:
        """The first UB row of the staging buffers."""
        return self.h_base[1] + self.hidden[1] * self.mb

    @property
    def ub_rows_used(self) -> int:
        return self.stage_base + self.nstage * self.stage

    @property
    def acc_rows_used(self) -> int:
        return self.slots * self.mb


def balanced_blocks(n: int, size: int) -> list[range]:
    """``range(n)`` cut into the fewest blocks of at most ``size``, balanced (their sizes
    differ by at most one)."""
    count = ceil_div(n, size)
    return [range(i * n // count, (i + 1) * n // count) for i in range(count)]


def hidden_k_tiles(dims) -> tuple[int, int]:
    """The k-tiles hidden regions 0 and 1 hold: layer i's activations (the next layer's input)
    go to region i % 2."""
    chip = [kt for kt, _, on_chip in dims if on_chip]
    return max(chip[0::2], default=0), max(chip[1::2], default=0)


def _block_row_candidates(config: Config, M: int, dims) -> list[int]:
    """Row-block sizes worth estimating: balanced splits of M, powers of two, and the largest
    sizes that fit the buffers with A resident."""
    cap = min(M, MAX_ROWS, config.acc_rows)
    hidden = sum(hidden_k_tiles(dims))
    raw = {1, cap}
    raw.update(ceil_div(M, b) for b in range(1, 65))
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
            out.add(ceil_div(M, ceil_div(M, v)))     # the same block count, balanced
    return sorted(out, reverse=True)


def estimate_cycles(config: Config, M: int, dims, last_int8: bool, mb: int, slots: int,
                    nb: int, kb: int, abuf: int, stage: int, nstage: int) -> int:
    """The planner's cycle estimate of a plan (module docstring): a guide for choosing, not a
    promise."""
    R, C = config.rows, config.cols
    P = ceil_div(C, R)
    act_row = activation_timing(config)[0]
    lat = array_latency(config)
    full, rem = divmod(M, mb)
    nmb = full + (rem > 0)

    def per_block(f):
        return full * f(mb) + (f(rem) if rem else 0)

    matmuls = sum(kt * nt for kt, nt, _ in dims)
    compute = matmuls * per_block(lambda r: max(r + MATMUL_GAP, R))
    kt0, nt0, _ = dims[0]
    a_reloads = 1 if kb >= kt0 else ceil_div(nt0, nb)
    a_beats = M * kt0 * a_reloads
    host_in = nmb * matmuls * R + a_beats
    _, nt_last, _ = dims[-1]
    host_out = M * nt_last * (P if last_int8 else 1)
    act = sum(M * nt * P * act_row for _, nt, _ in dims[:-1])
    act += M * nt_last * P * act_row if last_int8 else 0
    exposed = exposed_loads(config, M, dims, mb, nb, kb, abuf)
    kbuf = min(kb, kt0)
    if slots == 1:
        exposed += host_out + (M * nt_last * P * act_row if last_int8 else 0)
    if last_int8:
        chunks = nt_last * P * per_block(lambda r: ceil_div(r, stage))
        exposed += CHUNK_COST * chunks + (host_out if nstage == 1 else 0)
    exposed += nmb * (len(dims) - 1) * (lat + mb * P * act_row)
    exposed += slot_stalls(config, M, dims, last_int8, mb, slots, nb, kb)
    fill = min(mb, M) + R + 3
    # The first k-tiles load while the first MATMULs run: with A resident each k-tile serves
    # one MATMUL before the next is needed; the program's first k-block of a blocked K runs
    # k-tile by k-tile, each serving nb MATMULs.
    d0 = max(min(mb, M) + MATMUL_GAP, R)
    uses = 1 if kb >= kt0 else min(nb, nt0)
    fill += (kbuf - 1) * max(0, min(mb, M) + R * uses - uses * d0)
    drain = lat + min(mb, M) * (P * max(1, act_row) if last_int8 else 1)
    return max(compute, host_in, host_out, act) + exposed + fill + drain


def exposed_loads(config: Config, M: int, dims, mb: int, nb: int, kb: int, abuf: int) -> int:
    """The estimated cycles the MATMULs wait for A loads into a single A buffer (``abuf == 1``;
    two buffers load one while the other computes): a load must wait for the MATMULs reading
    the rows it overwrites.

    In a chain, an m-block's first load overwrites rows that only the previous m-block's first
    layer read, so it runs while that m-block's later layers compute (beside their weights);
    every other load (the k-blocks of a blocked K) waits as in a single GEMM. Counting these
    as hidden too made the planner choose one buffer of one k-tile for long chains (DS-CNN's
    depthwise/pointwise pairs at M = 1000: 79 % utilization instead of 95 %)."""
    if abuf != 1:
        return 0
    R = config.rows
    kt0, nt0, _ = dims[0]
    kbuf = min(kb, kt0)
    nmb = ceil_div(M, mb)
    per_block = len(balanced_blocks(kt0, kb)) * ceil_div(nt0, nb) if kb < kt0 else 1
    loads = nmb * per_block - 1
    if loads <= 0:
        return 0
    d = max(mb + MATMUL_GAP, R)
    if kbuf == 1:
        # Each load waits for the MATMULs reading the last one.
        a_beats = M * kt0 * (1 if kb >= kt0 else ceil_div(nt0, nb))
        waits = a_beats - min(mb, M)
        late = mb
    else:
        # Its k-tiles free up one by one: k-tile t can load during the kbuf - 1 MATMULs
        # between its last reader and its next first reader, and all kbuf of them during
        # 2 kbuf - 2 MATMULs, beside the weights of those MATMULs.
        late = max(0, max(mb + R * (kbuf - 1) - (kbuf - 1) * d,
                          kbuf * mb + R * (2 * kbuf - 2) - (2 * kbuf - 2) * d))
        waits = loads * late
    later = sum(kt * nt for kt, nt, _ in dims[1:])
    if later:
        # The first load of each m-block after the first, behind the later layers.
        first = max(0, kbuf * mb - later * (d - R))
        waits -= (nmb - 1) * (late - first)
    return max(0, waits)


def slot_stalls(config: Config, M: int, dims, last_int8: bool, mb: int, slots: int, nb: int,
                kb: int) -> int:
    """The estimated wait of MATMULs for an ACC slot whose previous n-tile's outputs are still
    reading it (outputs read the accumulators one instruction at a time)."""
    R, C = config.rows, config.cols
    P = ceil_div(C, R)
    act_row = activation_timing(config)[0]
    lat = array_latency(config)
    d = max(mb + MATMUL_GAP, R)             # one MATMUL of a full block
    nmb = ceil_div(M, mb)
    total = 0
    for li, (kt, nt, _) in enumerate(dims):
        last = li == len(dims) - 1
        out_t = mb * (P * act_row if not last or last_int8 else 1)
        if li == 0 and kb < kt:
            # n-blocks of nb n-tiles; n-tile i of a block finishes (i+1) * kbl MATMULs into the
            # last k-block, the next block's n-tile i starts i * kb MATMULs after the block
            # and reuses the slot of n-tile i - spare.
            kbl = len(balanced_blocks(kt, kb)[-1])
            spare = slots - nb
            end, stall = 0, 0
            ends = []
            for i in range(nb):
                end = max(end, (i + 1) * kbl * d + lat) + out_t
                ends.append(end)
            for i in range(spare, nb):
                stall = max(stall, ends[i - spare] - (nb * kbl + i * kb) * d)
            total += nmb * (ceil_div(nt, nb) - 1) * max(0, stall)
        else:
            stall = lat + out_t - (slots - 1) * kt * d
            total += nmb * max(0, nt - slots) * max(0, stall)
    return total


def _staging_options(mb: int, free: int, last_int8: bool) -> list[tuple[int, int]]:
    """(rows per staging buffer, buffers) worth estimating: none for int32 outputs."""
    if not last_int8:
        return [(0, 0)]
    sizes = {mb, ceil_div(mb, 2), ceil_div(mb, 4), min(mb, 16), 1, (free - 1) // 2, free - 1}
    return [(s, n) for s in sizes if 1 <= s <= mb for n in (2, 1) if n * s <= free - 1]


def _k_block_options(config: Config, mb: int, kt0: int, nt0: int, most: int,
                     slots_max: int) -> list[tuple[int, int]]:
    """(kb, nb) worth estimating with at most ``most`` k-tiles of A in a buffer: the most that
    fit, and a few blocked K's (a blocked first k-block can start faster than a resident A: it
    runs k-tile by k-tile), unless the weight loads bound the MATMULs anyway (mb + 3 <= R)."""
    kbs = {most}
    if mb + MATMUL_GAP > config.rows:
        kbs |= {k for k in (2, 3, kt0 // 2) if 1 <= k < min(most, kt0)}
    return [(k, n) for k in kbs
            for n in ({1} if k >= kt0 else
                      {min(slots_max, nt0), max(1, min(slots_max - 1, nt0))})]


def best_plan(config: Config, M: int, dims, last_int8: bool) -> Plan | None:
    """The fitting plan of lowest estimate for one stage (``dims`` from
    ``layers.stage_dims``), or ``None`` when nothing fits (a hidden layer's activations need
    more UB rows than there are)."""
    hidden = hidden_k_tiles(dims)
    kt0, nt0, _ = dims[0]
    best = None
    for mb in _block_row_candidates(config, M, dims):
        slots_max = config.acc_rows // mb
        free = config.ub_rows - (hidden[0] + hidden[1]) * mb
        if slots_max < 1 or free < 1:
            continue
        for stage, nstage in _staging_options(mb, free, last_int8):
            room = free - stage * nstage
            for abuf in (2, 1):
                most = min(kt0, room // (abuf * mb))
                if most < 1:
                    continue
                for kb, nb in _k_block_options(config, mb, kt0, nt0, most, slots_max):
                    slots = min(slots_max, max(nb + 1, 2))
                    est = estimate_cycles(config, M, dims, last_int8, mb, slots, nb, kb, abuf,
                                          stage, nstage)
                    # Ties: fewer A reloads, then larger blocks.
                    key = (est, 1 if kb >= kt0 else ceil_div(nt0, nb), -mb)
                    if best is None or key < best[0]:
                        best = key, Plan(mb, slots, nb, kb, abuf, stage, nstage, hidden, est)
    return None if best is None else best[1]
