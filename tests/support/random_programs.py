"""Random valid programs for the core, made to stress the dispatcher's interlocks.

``random_program(config, rng)`` builds a program that the golden model (``sim.machine``) runs
without an error. It is not compiler output: instructions touch a small window of buffer rows,
so they overlap all the time (reads of rows just written, writes over rows an earlier MATMUL or
WRITE_HOST still reads, ACTIVATE into rows a later MATMUL reads, accumulate and overwrite into
the same ACC rows), and with probability ``hazard`` an instruction's rows are picked to conflict
with a recent instruction's on purpose (``FuzzBuilder.hazard_rows``: same buffer, one of them
writing). It reuses tiles (MATMUL without NEW_TILE), runs bursts of back-to-back accumulating
MATMULs with n = 1, interleaves READ_WEIGHTS (never more untaken tiles than
``weight_fifo_depth``, NEW_TILE only when an untaken tile exists), loads parameter sets with
edge values (``FuzzBuilder.quant_set``: multipliers at the 32-bit edges, shifts -32..31, zero
points and bounds at the int8 edges, bounds crossed) while ACTIVATEs use others, writes to the
host from the UB (every valid part) and the ACC, and mixes in NOP, SYNC and READ_COUNTERS.
Host data is full-range int8 with -128 and 127 over-represented; host-in lanes that an
instruction does not use carry junk, and fields / flag bits an op ignores are random.

Every program reads only rows it wrote before (a prologue writes its whole UB window with
READ_HOST, loads every parameter set and overwrites its whole ACC window with MATMUL), so its
results do not depend on the state a reset leaves (the hardware keeps its memories and
parameter sets across reset). An epilogue writes both windows to the host, then SYNC.
"""

import numpy as np

from support.fuzz_builder import FuzzBuilder
from tpugen.hdl import isa
from tpugen.hdl.config import Config, check_config
from tpugen.sim.program import Program
from tpugen.sim.random_data import as_rng, int8_data

__all__ = ["random_program"]

Op, Flag, Buffer = isa.Op, isa.Flag, isa.Buffer


def _pick_n(rng, limit: int, nmax: int) -> int:
    hi = max(1, min(limit, nmax))
    if rng.random() < 0.3:
        return 1
    return int(rng.integers(1, hi + 1))


def _window(rng, rows: int, size: int) -> int:
    """Base of a window of ``size`` rows: at the start, the end or anywhere."""
    k = rng.random()
    if k < 0.3:
        return 0
    if k < 0.6:
        return rows - size
    return int(rng.integers(0, rows - size + 1))


def _prologue(b: FuzzBuilder, rng, windows) -> None:
    """Every parameter set, the whole UB window, the whole ACC window (overwritten)."""
    (ub0, U), (acc0, A) = windows[Buffer.UB], windows[Buffer.ACC]
    sets = b.cfg.quant_sets
    first = int(rng.integers(1, sets + 1))
    b.read_quant(0, first)
    if first < sets:
        b.read_quant(first, sets - first)
    pos = ub0
    while pos < ub0 + U:
        n = int(rng.integers(1, ub0 + U - pos + 1))
        b.read_host(pos, int8_data(rng, (n, b.cfg.rows)))
        pos += n
    b.read_weights(int(rng.integers(1, b.cfg.weight_fifo_depth + 1)))
    pos = acc0
    while pos < acc0 + A:
        n = int(rng.integers(1, acc0 + A - pos + 1))
        src = int(rng.integers(ub0, ub0 + U - n + 1))
        b.matmul_any(src, pos, n, accumulate=False)
        pos += n


def _memories_prologue(b: FuzzBuilder, rng, windows):
    """With a weight memory and a program memory: fill the weight memory, set a tag and store a
    routine (LOAD_WEIGHTS of k tiles, k NEW_TILE MATMULs into the ACC window, WRITE_HOSTs, a
    CHECK_TAG, NOPs; it leaves the weight FIFO as it found it). Returns ``(address, words,
    k, tag)``, or None without the memories."""
    cfg = b.cfg
    if cfg.weight_tiles == 0 or cfg.program_words < 16:
        return None
    b.store_weights(0, cfg.weight_tiles)
    tag = int(rng.integers(1, 1 << 56))
    b.tag(tag, check=False)
    (ub0, U), (acc0, A) = windows[Buffer.UB], windows[Buffer.ACC]
    k = int(rng.integers(0, min(cfg.weight_fifo_depth, cfg.weight_tiles) + 1))
    words = []
    if k:
        words.append(b.word(Op.LOAD_WEIGHTS, src=int(rng.integers(0, cfg.weight_tiles - k + 1)),
                            n=k))
    for _ in range(k):
        n = int(rng.integers(1, min(U, A) + 1))
        flags = Flag.NEW_TILE | (Flag.ACCUMULATE if rng.random() < 0.5 else 0)
        words.append(b.word(Op.MATMUL, flags, src=int(rng.integers(ub0, ub0 + U - n + 1)),
                            dst=int(rng.integers(acc0, acc0 + A - n + 1)), n=n))
    words.append(b.word(Op.WRITE_HOST, Flag.FROM_ACC, src=acc0, n=A, part=0))
    if rng.random() < 0.5:        # its retired count includes the CALL
        words.append(b.word(Op.SYNC))
    words.append(isa.encode(Op.PROGRAM, Flag.TAG, src=tag & 0xFFFF, dst=tag >> 16 & 0xFFFF,
                            n=tag >> 32 & 0xFFFF, part=tag >> 48))
    words += [b.word(Op.NOP)] * int(rng.integers(0, 3))
    words = words[:cfg.program_words]
    at = int(rng.integers(0, cfg.program_words - len(words) + 1))
    b.store_program(at, words)
    return at, words, k, tag


def _memory_op(b: FuzzBuilder, rng, op: str, routine) -> None:
    """One of the weight-memory and program-memory instructions (valid in ``b``'s state)."""
    cfg, depth = b.cfg, b.cfg.weight_fifo_depth
    if op == "load_weights":
        if b.untaken < depth:
            n = int(rng.integers(1, min(depth - b.untaken, cfg.weight_tiles) + 1))
            b.load_weights(int(rng.integers(0, cfg.weight_tiles - n + 1)), n)
    elif op == "store_weights":
        n = int(rng.integers(1, min(2, cfg.weight_tiles) + 1))
        b.store_weights(int(rng.integers(0, cfg.weight_tiles - n + 1)), n)
    elif op == "call":
        at, words, tiles, _ = routine
        if b.untaken + tiles <= depth:
            b.call(at, len(words))
            b.taken = b.taken or tiles > 0
    else:
        b.tag(routine[3], check=True)


def random_program(config: Config, rng, *, length: int = 40, hazard: float = 0.5,
                   max_rows: int = 16, max_n: int = 8, junk: bool = True,
                   counters: bool = True) -> Program:
    """A random valid program (see the module docstring) of about ``length`` instructions
    between its prologue and epilogue.

    ``rng``: a ``numpy.random.Generator`` or a seed. ``max_rows``: most UB rows in the window
    (the ACC window is at most as big); ``max_n``: most rows per instruction; ``hazard``:
    probability of choosing rows that conflict with a recent instruction's on purpose; ``junk``:
    random unused fields, flag bits and host-in lanes; ``counters``: allow READ_COUNTERS.
    """
    check_config(config)
    if not isinstance(length, int) or length < 0:
        raise ValueError(f"length must be a non-negative integer, not {length!r}")
    for name, v in (("max_rows", max_rows), ("max_n", max_n)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    if not 0 <= hazard <= 1:
        raise ValueError(f"hazard must be in 0..1, not {hazard!r}")
    rng = as_rng(rng)
    cfg = config
    b = FuzzBuilder(cfg, rng, junk=junk)
    R = cfg.rows
    depth = cfg.weight_fifo_depth

    # Windows (small, so that rows are shared all the time).
    U = int(rng.integers(min(2, cfg.ub_rows), min(cfg.ub_rows, max_rows) + 1))
    A = int(rng.integers(1, min(cfg.acc_rows, U) + 1))
    ub0 = _window(rng, cfg.ub_rows, U)
    acc0 = _window(rng, cfg.acc_rows, A)
    windows = {Buffer.UB: (ub0, U), Buffer.ACC: (acc0, A)}

    def pick(op, field, flags=0):
        """Rows (start, n) for ``field`` of ``op`` in its buffer's window, conflicting with a
        recent instruction's rows with probability ``hazard``."""
        access = next(a for a in isa.OPS[op].accesses if a.field == field and a.applies(flags))
        base, size = windows[access.buffer]
        n = _pick_n(rng, size, max_n)
        cands = b.hazard_rows(access.buffer, access.write)
        if cands and rng.random() < hazard:
            s0, n0 = cands[int(rng.integers(0, len(cands)))]
            lo, hi = max(base, s0 - n + 1), min(base + size - n, s0 + n0 - 1)
            if lo <= hi:
                return int(rng.integers(lo, hi + 1)), n
        return int(rng.integers(base, base + size - n + 1)), n

    _prologue(b, rng, windows)
    routine = _memories_prologue(b, rng, windows)
    sets = cfg.quant_sets
    ub_parts = isa.parts(Op.WRITE_HOST, 0, cfg)
    act_parts = isa.parts(Op.ACTIVATE, 0, cfg)
    ops = ["read_host", "read_weights", "matmul", "activate", "write_ub", "write_acc",
           "read_quant", "nop", "sync", "counters", "burst", "load_weights", "store_weights",
           "call", "check_tag"]
    memories = 1 if routine else 0
    weights = np.array([12, 9, 22, 12, 8, 8, 5, 3, 3, 2 if counters else 0, 6,
                        6 * memories, 3 * memories, 4 * memories, 1 * memories], dtype=float)
    weights /= weights.sum()
    for _ in range(length):
        op = ops[int(rng.choice(len(ops), p=weights))]
        if op == "read_host":
            dst, n = pick(Op.READ_HOST, "dst")
            b.read_host(dst, int8_data(rng, (n, R)))
        elif op == "read_weights":
            if b.untaken < depth:
                b.read_weights(int(rng.integers(1, depth - b.untaken + 1)))
        elif op == "matmul":
            src, n = pick(Op.MATMUL, "src")
            n = min(n, A)
            src = min(src, ub0 + U - n)
            dst, _ = pick(Op.MATMUL, "dst")
            dst = min(dst, acc0 + A - n)
            b.matmul_any(src, dst, n, accumulate=bool(rng.random() < 0.5))
        elif op == "activate":
            src, n = pick(Op.ACTIVATE, "src")
            n = min(n, U)
            dst, _ = pick(Op.ACTIVATE, "dst")
            dst = min(dst, ub0 + U - n)
            b.activate(src, dst, n, int(rng.integers(0, act_parts)))
        elif op == "write_ub":
            src, n = pick(Op.WRITE_HOST, "src")
            b.write_ub(src, n, int(rng.integers(0, ub_parts)))
        elif op == "write_acc":
            src, n = pick(Op.WRITE_HOST, "src", Flag.FROM_ACC)
            b.write_acc(src, n)
        elif op == "read_quant":
            dst = int(rng.integers(0, sets))
            b.read_quant(dst, int(rng.integers(1, sets - dst + 1)))
        elif op == "nop":
            b.nop()
        elif op == "sync":
            b.sync()
        elif op == "counters":
            b.read_counters()
        elif op in ("load_weights", "store_weights", "call", "check_tag"):
            _memory_op(b, rng, op, routine)
        elif op == "burst":
            # Back-to-back accumulating MATMULs of one row, into one or two ACC rows.
            rows = [int(rng.integers(acc0, acc0 + A)) for _ in range(2)]
            for k in range(int(rng.integers(2, 7))):
                dst = rows[k % 2] if rng.random() < 0.5 else rows[0]
                src = int(rng.integers(ub0, ub0 + U))
                b.matmul_any(src, dst, 1, accumulate=True, p_new=0.3)

    # Epilogue: the final state of both windows, then SYNC.
    b.write_acc(acc0, A)
    for part in range(ub_parts):
        b.write_ub(ub0, U, part)
    b.sync()
    return b.p
