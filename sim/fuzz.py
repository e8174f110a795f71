"""Random programs for the core: valid ones that stress the dispatcher's interlocks, and ones
that trigger exactly one error cause (``hdl.isa.Cause``) in their middle.

``random_program(config, rng)`` builds a program that the golden model (``sim.machine``) runs
without an error. It is not compiler output: instructions touch a small window of buffer rows,
so they overlap all the time (reads of rows just written, writes over rows an earlier MATMUL or
WRITE_HOST still reads, ACTIVATE into rows a later MATMUL reads, accumulate and overwrite into
the same ACC rows), and with probability ``hazard`` an instruction's rows are picked to overlap
a recent instruction's on purpose. It reuses tiles (MATMUL without NEW_TILE), runs bursts of
back-to-back accumulating MATMULs with n = 1, interleaves READ_WEIGHTS (never more untaken tiles
than ``weight_fifo_depth``, NEW_TILE only when an untaken tile exists), sets edge quant
parameters (shift 0 and 63, mult at the 32-bit edges, zp at the int8 edges, ReLU), writes to
the host from the UB (every valid part) and the ACC, and mixes in NOP, SYNC and READ_COUNTERS.
Host data is full-range int8 with -128 and 127 over-represented; host-in lanes that an
instruction does not use carry junk, and fields / flag bits an op ignores are random.

Every program reads only rows it wrote before (a prologue writes its whole UB window with
READ_HOST and overwrites its whole ACC window with MATMUL) and sets the quant parameters before
its first ACTIVATE, so its results do not depend on the state a reset leaves (the hardware keeps
its memories across reset). An epilogue writes both windows to the host, then SYNC.

``error_program(config, cause, rng, variant=None)`` builds a program whose first error is
``cause``, recorded by an instruction in its middle (``ERROR_VARIANTS`` lists the ways; the
default picks one at random). A prologue writes known rows; after the failing instruction come
correct ones whose results show that the dropped instruction wrote nothing, that its host-in
data was discarded (or, for HOST_FRAMING, exactly the specified beats were used), and that the
next instructions work (READ_HOST, READ_WEIGHTS, MATMUL, ACTIVATE, WRITE_HOST, SYNC).

Known hardware bug worked around by default (``sync_guard``): the SYNC beat reports the live
error cause and retired count when the host takes it, not the values at the SYNC, so a SYNC in
the middle of a program is followed by a WRITE_HOST (which waits for the host-out engine).

For the core tests: ``Case`` (a program, and for compiler output its NumPy reference),
``gemm_cases`` (compiled GEMMs / MLPs, corners, requantization edges), ``error_cases``,
``check_results`` (a backend's results against the golden model and NumPy) and
``timing_cases`` (small programs with their exact cycle counts derived from the documented
timing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tpugen.hdl import isa
from tpugen.hdl.activation import activation_timing
from tpugen.hdl.array import array_latency
from tpugen.hdl.config import Config
from tpugen.hdl.controller import ACC_DRAIN
from tpugen.sim.compiler import (
    CompiledGemm,
    Quant,
    compile_gemm,
    compile_mlp,
    gemm_reference,
    mlp_reference,
)
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program, host_lanes

__all__ = ["random_program", "error_program", "ERROR_VARIANTS", "QUANT_EDGES", "int8_data",
           "encode", "Case", "QUANT_CASES", "gemm_cases", "error_cases", "check_results",
           "timing_cases"]

Op, Flag, Cause = isa.Op, isa.Flag, isa.Cause

#: Quant parameters worth hitting: (mult, shift, zp, relu) candidates, mixed at random.
QUANT_EDGES = {
    "mult": [1, -1, 0, 2, (1 << 31) - 1, -(1 << 31), (1 << 30), -(1 << 30) - 1, 12345, -77],
    "shift": [0, 0, 1, 2, 7, 15, 31, 32, 62, 63, 63],
    "zp": [0, -128, 127, -1, 1, 5, -100],
    "relu": [0, 1],
}

#: The ways ``error_program`` triggers each cause.
ERROR_VARIANTS: dict[Cause, tuple[str, ...]] = {
    Cause.BAD_OPCODE: ("op7", "host_data_op"),
    Cause.OUT_OF_RANGE: (
        "matmul_n0", "matmul_src", "matmul_dst", "activate_n0", "activate_src", "activate_dst",
        "activate_part", "write_ub_src", "write_ub_part", "write_acc_src", "write_acc_part",
        "write_n0", "read_host_dst", "read_host_n0", "read_weights_n0"),
    Cause.NO_TILE: ("new_tile_empty", "new_tile_at_start", "reuse_before_take"),
    Cause.WEIGHT_OVERFLOW: ("overflow", "overflow_short_data"),
    Cause.HOST_FRAMING: ("host_early", "host_missing", "weights_early", "weights_missing"),
}


def _layout_fields():
    top = {name: (f.offset, f.width) for name, f in isa.INSTR_LAYOUT}
    body = top["body"][0]
    sub = {}
    for layout in (isa.MEM_LAYOUT, isa.QUANT_LAYOUT):
        for name, f in layout:
            sub[name] = (body + f.offset, f.width)
    return top, sub


_TOP, _BODY = _layout_fields()


def encode(op, flags=0, **fields) -> int:
    """``hdl.isa.encode`` (same fields, same checks of the ranges) by shifts: the Amaranth-based
    encoder is too slow for thousands of random words. ``tests/test_fuzz.py`` checks that both
    agree."""
    op, flags = int(op), int(flags)
    if not 0 <= op < 16 or not 0 <= flags < 16:
        raise ValueError(f"op and flags must be 0..15, not {op!r}, {flags!r}")
    quant = op == Op.SET_QUANT
    names = ("mult", "shift", "zp", "relu") if quant else ("src", "dst", "n", "part")
    if set(fields) - set(names):
        raise ValueError(f"unknown fields {sorted(set(fields) - set(names))} for op {op}")
    word = (op << _TOP["op"][0]) | (flags << _TOP["flags"][0])
    for name in names:
        v = int(fields.get(name, 0))
        off, width = _BODY[name]
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if name in ("mult", "zp") \
            else (0, (1 << width) - 1)
        if not lo <= v <= hi:
            raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {v!r}")
        word |= (v & ((1 << width) - 1)) << off
    return word


def _rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def int8_data(rng: np.random.Generator, shape, *, edge: float = 0.25) -> np.ndarray:
    """Full-range int8 values with -128, 127 and 0 over-represented (``edge`` of them)."""
    x = rng.integers(-128, 128, shape)
    pick = rng.random(shape)
    x = np.where(pick < edge * 0.5, -128, x)
    x = np.where((pick >= edge * 0.5) & (pick < edge * 0.8), 127, x)
    x = np.where((pick >= edge * 0.8) & (pick < edge), 0, x)
    return x.astype(np.int64)


def _parts_ub(config: Config) -> int:
    """Valid WRITE_HOST-from-UB parts: 0 .. ceil(R / C) - 1."""
    return -(-config.rows // config.cols)


def _parts_act(config: Config) -> int:
    """Valid ACTIVATE parts: 0 .. ceil(C / R) - 1."""
    return -(-config.cols // config.rows)


class _Builder:
    """Appends instructions to a program and tracks what validity depends on: the untaken tiles,
    whether a tile was ever taken, and recent row ranges (for hazards)."""

    def __init__(self, config: Config, rng: np.random.Generator, *, junk: bool = True):
        self.cfg = config
        self.rng = rng
        self.junk = junk
        self.p = Program(config)
        self.untaken = 0
        self.taken = False
        self.recent: dict[str, tuple[int, int]] = {}
        self.lanes = host_lanes(config)

    # --- encoding helpers --------------------------------------------------------------------
    def _flags(self, used: int) -> int:
        """Random values in the flag bits an op does not use (``used`` is the used mask)."""
        if not self.junk or self.rng.random() < 0.6:
            return 0
        return int(self.rng.integers(0, 16)) & ~used & 0xF

    def _unused(self) -> int:
        if not self.junk or self.rng.random() < 0.6:
            return 0
        return int(self.rng.choice([0, 1, 0xFF, 0xFFFF, int(self.rng.integers(0, 0x10000))]))

    def _word(self, op, flags=0, *, used_flags=0, src=None, dst=None, n=None, part=None) -> int:
        f = {"src": src, "dst": dst, "n": n, "part": part}
        for k, v in f.items():
            if v is None:
                f[k] = self._unused() & (0xFF if k == "part" else 0xFFFF)
        return encode(op, int(flags) | self._flags(used_flags | int(flags)), **f)

    def _beats(self, rows: np.ndarray, used: int) -> np.ndarray:
        """Host-in beats with ``rows`` in lanes 0..used-1 and junk in the lanes above."""
        data = int8_data(self.rng, (len(rows), self.lanes))
        if not self.junk:
            data[:, used:] = 0
        data[:, :used] = rows
        return data

    # --- instructions (all valid unless the caller says otherwise) ---------------------------
    def read_host(self, dst: int, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        data = self._beats(rows, self.cfg.rows)
        self.p.raw(self._word(Op.READ_HOST, dst=dst, n=len(rows)), data)
        self.recent["rh"] = (dst, len(rows))
        return rows

    def read_weights(self, n: int) -> np.ndarray:
        R, C = self.cfg.rows, self.cfg.cols
        assert self.untaken + n <= self.cfg.weight_fifo_depth
        tiles = int8_data(self.rng, (n, R, C))
        self.p.raw(self._word(Op.READ_WEIGHTS, n=n), self._beats(tiles.reshape(n * R, C), C))
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
        self.p.raw(self._word(Op.MATMUL, flags, used_flags=3, src=src, dst=dst, n=n))
        self.recent["mm_src"] = (src, n)
        self.recent["mm_dst"] = (dst, n)

    def activate(self, src: int, dst: int, n: int, part: int = 0) -> None:
        self.p.raw(self._word(Op.ACTIVATE, src=src, dst=dst, n=n, part=part))
        self.recent["act_src"] = (src, n)
        self.recent["act_dst"] = (dst, n)

    def write_ub(self, src: int, n: int, part: int = 0) -> None:
        self.p.raw(self._word(Op.WRITE_HOST, 0, used_flags=1, src=src, n=n, part=part,
                              dst=None))
        self.recent["wh_ub"] = (src, n)

    def write_acc(self, src: int, n: int) -> None:
        self.p.raw(self._word(Op.WRITE_HOST, Flag.FROM_ACC, used_flags=1, src=src, n=n, part=0))
        self.recent["wh_acc"] = (src, n)

    def set_quant(self, mult=None, shift=None, zp=None, relu=None) -> None:
        rng = self.rng
        e = QUANT_EDGES
        if mult is None:
            mult = int(rng.choice(e["mult"])) if rng.random() < 0.7 else int(
                rng.integers(-(1 << 31), 1 << 31))
        if shift is None:
            shift = int(rng.choice(e["shift"])) if rng.random() < 0.7 else int(
                rng.integers(0, 64))
        if zp is None:
            zp = int(rng.choice(e["zp"])) if rng.random() < 0.7 else int(rng.integers(-128, 128))
        if relu is None:
            relu = int(rng.integers(0, 2))
        word = encode(Op.SET_QUANT, self._flags(0), mult=mult, shift=shift, zp=zp, relu=relu)
        self.p.raw(word)

    def nop(self) -> None:
        self.p.raw(self._word(Op.NOP, used_flags=0))

    def sync(self) -> None:
        self.p.raw(self._word(Op.SYNC, used_flags=0))

    def read_counters(self) -> None:
        self.p.raw(self._word(Op.READ_COUNTERS, used_flags=0))

    def ensure_tile(self) -> bool:
        """Make a MATMUL possible; return whether it may take NEW_TILE."""
        if self.untaken == 0 and not self.taken:
            self.read_weights(1)
        return self.untaken > 0

    def matmul_any(self, src, dst, n, *, accumulate, p_new=0.5) -> None:
        can_new = self.ensure_tile()
        new = can_new and (not self.taken or self.rng.random() < p_new)
        self.matmul(src, dst, n, accumulate=accumulate, new_tile=new)


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


def random_program(config: Config, rng, *, length: int = 40, hazard: float = 0.5,
                   max_rows: int = 16, max_n: int = 8, junk: bool = True,
                   counters: bool = True, sync_guard: bool = True) -> Program:
    """A random valid program (see the module docstring) of about ``length`` instructions
    between its prologue and epilogue.

    ``rng``: a ``numpy.random.Generator`` or a seed. ``max_rows``: most UB rows in the window
    (the ACC window is at most as big); ``max_n``: most rows per instruction; ``hazard``:
    probability of choosing rows that overlap a recent instruction's on purpose; ``junk``: random
    unused fields, flag bits and host-in lanes; ``counters``: allow READ_COUNTERS.

    ``sync_guard``: a SYNC in the middle of the program is followed by a WRITE_HOST (which waits
    for the host-out engine). Without it, an instruction after the SYNC may
    retire (or fail) before the host takes the SYNC beat, and the hardware reports that in the
    beat (live status, not a snapshot at the SYNC): a known bug, see ``tests/test_fuzz.py``.
    """
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    rng = _rng(rng)
    cfg = config
    b = _Builder(cfg, rng, junk=junk)
    R = cfg.rows
    depth = cfg.weight_fifo_depth

    # Windows (small, so that rows are shared all the time).
    U = int(rng.integers(min(2, cfg.ub_rows), min(cfg.ub_rows, max_rows) + 1))
    A = int(rng.integers(1, min(cfg.acc_rows, U) + 1))
    ub0 = _window(rng, cfg.ub_rows, U)
    acc0 = _window(rng, cfg.acc_rows, A)

    def pick(base, size, near=()):
        n = _pick_n(rng, size, max_n)
        cands = [b.recent[k] for k in near if k in b.recent]
        if cands and rng.random() < hazard:
            s0, n0 = cands[int(rng.integers(0, len(cands)))]
            lo, hi = max(base, s0 - n + 1), min(base + size - n, s0 + n0 - 1)
            if lo <= hi:
                return int(rng.integers(lo, hi + 1)), n
        return int(rng.integers(base, base + size - n + 1)), n

    # Prologue: quant parameters, the whole UB window, the whole ACC window (overwritten).
    b.set_quant()
    pos = ub0
    while pos < ub0 + U:
        n = int(rng.integers(1, ub0 + U - pos + 1))
        b.read_host(pos, int8_data(rng, (n, R)))
        pos += n
    b.read_weights(int(rng.integers(1, depth + 1)))
    pos = acc0
    while pos < acc0 + A:
        n = int(rng.integers(1, acc0 + A - pos + 1))
        src = int(rng.integers(ub0, ub0 + U - n + 1))
        b.matmul_any(src, pos, n, accumulate=False)
        pos += n

    ops = ["read_host", "read_weights", "matmul", "activate", "write_ub", "write_acc",
           "set_quant", "nop", "sync", "counters", "burst"]
    weights = np.array([12, 9, 22, 12, 8, 8, 5, 3, 3, 2 if counters else 0, 6], dtype=float)
    weights /= weights.sum()
    for _ in range(length):
        op = ops[int(rng.choice(len(ops), p=weights))]
        if op == "read_host":
            dst, n = pick(ub0, U, ("mm_src", "wh_ub", "act_dst", "rh"))
            b.read_host(dst, int8_data(rng, (n, R)))
        elif op == "read_weights":
            if b.untaken < depth:
                b.read_weights(int(rng.integers(1, depth - b.untaken + 1)))
        elif op == "matmul":
            src, n = pick(ub0, U, ("rh", "act_dst", "mm_src"))
            n = min(n, A)
            src = min(src, ub0 + U - n)
            dst, _ = pick(acc0, A, ("mm_dst", "act_src", "wh_acc"))
            dst = min(dst, acc0 + A - n)
            b.matmul_any(src, dst, n, accumulate=bool(rng.random() < 0.5))
        elif op == "activate":
            src, n = pick(acc0, A, ("mm_dst", "wh_acc", "act_src"))
            n = min(n, U)
            dst, _ = pick(ub0, U, ("mm_src", "wh_ub", "rh", "act_dst"))
            dst = min(dst, ub0 + U - n)
            b.activate(src, dst, n, int(rng.integers(0, _parts_act(cfg))))
        elif op == "write_ub":
            src, n = pick(ub0, U, ("rh", "act_dst", "mm_src"))
            b.write_ub(src, n, int(rng.integers(0, _parts_ub(cfg))))
        elif op == "write_acc":
            src, n = pick(acc0, A, ("mm_dst", "act_src"))
            b.write_acc(src, n)
        elif op == "set_quant":
            b.set_quant()
        elif op == "nop":
            b.nop()
        elif op == "sync":
            b.sync()
            if sync_guard:
                # The next instruction waits for the host-out engine (see ``sync_guard``).
                if rng.random() < 0.5:
                    src, n = pick(acc0, A, ("mm_dst",))
                    b.write_acc(src, n)
                else:
                    src, n = pick(ub0, U, ("rh", "act_dst"))
                    b.write_ub(src, n, int(rng.integers(0, _parts_ub(cfg))))
        elif op == "counters":
            b.read_counters()
        elif op == "burst":
            # Back-to-back accumulating MATMULs of one row, into one or two ACC rows.
            rows = [int(rng.integers(acc0, acc0 + A)) for _ in range(2)]
            for k in range(int(rng.integers(2, 7))):
                dst = rows[k % 2] if rng.random() < 0.5 else rows[0]
                src = int(rng.integers(ub0, ub0 + U))
                b.matmul_any(src, dst, 1, accumulate=True, p_new=0.3)

    # Epilogue: the final state of both windows, then SYNC.
    b.write_acc(acc0, A)
    for part in range(_parts_ub(cfg)):
        b.write_ub(ub0, U, part)
    b.sync()
    return b.p


# --- error programs ---------------------------------------------------------------------------
def error_program(config: Config, cause, rng, *, variant: str | None = None,
                  sync_guard: bool = True) -> Program:
    """A program whose only recorded error is ``cause``, from an instruction in its middle,
    followed by correct instructions whose results show the error's effects (see the module
    docstring). ``variant`` is one of ``ERROR_VARIANTS[cause]`` (default: random).
    ``sync_guard``: as for ``random_program`` (a WRITE_HOST between the SYNC before the failing
    instruction and that instruction).

    Needs ``ub_rows >= 4`` and ``acc_rows >= 4``; some variants need more (``ValueError``).
    """
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    cause = Cause(cause)
    if cause == Cause.NONE:
        raise ValueError("cause must be an error cause, not NONE")
    rng = _rng(rng)
    variants = ERROR_VARIANTS[cause]
    if variant is None:
        variant = str(rng.choice(variants))
    if variant not in variants:
        raise ValueError(f"variant of {cause.name} must be one of {variants}, not {variant!r}")
    cfg = config
    if cfg.ub_rows < 4 or cfg.acc_rows < 4:
        raise ValueError("error_program needs ub_rows >= 4 and acc_rows >= 4")
    R, C = cfg.rows, cfg.cols
    depth = cfg.weight_fifo_depth
    UB, AC = cfg.ub_rows, cfg.acc_rows
    b = _Builder(cfg, rng)
    p = b.p

    # Known rows: the UB's first U and last E rows, the ACC's first A and last E rows.
    U = min(8, UB // 2)
    E = min(4, UB // 2, AC // 2)
    A = min(U, AC // 2)
    hi_ub, hi_acc = UB - E, AC - E
    # reuse_before_take must meet no taken tile: its prologue takes none.
    takes = variant not in ("reuse_before_take", "new_tile_at_start")
    b.set_quant()
    b.read_host(0, int8_data(rng, (U, R)))
    b.read_host(hi_ub, int8_data(rng, (E, R)))
    if takes:
        b.read_weights(1)
        b.matmul(0, 0, A, accumulate=False, new_tile=True)
        b.matmul(U - E, hi_acc, E, accumulate=False, new_tile=False)
        b.activate(0, U - 1, 1, int(rng.integers(0, _parts_act(cfg))))
    b.sync()
    if sync_guard:
        b.write_ub(U - 1, 1)

    def word(op, flags=0, **f):
        f = {"src": 0, "dst": 0, "n": 1, "part": 0, **f}
        return encode(op, flags, **f)

    def junk(beats):
        return int8_data(rng, (beats, b.lanes))

    def over(rows, n):
        """A start so that start + n > rows (just over, or far over, or at 0xFFFF)."""
        k = rng.random()
        if k < 0.5:
            if n > rows:
                return 0
            return min(rows - n + int(rng.integers(1, min(n, 4) + 1)), 0xFFFF)
        if k < 0.8:
            return int(rng.integers(rows, 0x10000))
        return 0xFFFF

    def big_n(rows):
        """n with 0 + n > rows (so src/dst 0 is over)."""
        return int(rng.choice([rows + 1, 0xFFFF, int(rng.integers(rows + 1, 0x10000))]))

    # --- the failing instruction ---------------------------------------------------------
    if variant == "op7":
        p.raw((int(rng.integers(0, 1 << 60)) << 4) | 7)
    elif variant == "host_data_op":
        op = int(rng.choice([8, 11, 12, 13, 14, 15]))
        p.raw((int(rng.integers(0, 1 << 60)) << 4) | op, junk(int(rng.integers(1, 5))))
    elif variant == "matmul_n0":
        p.raw(word(Op.MATMUL, Flag.NEW_TILE | Flag.ACCUMULATE, src=0, dst=hi_acc, n=0))
    elif variant == "matmul_src":
        n = int(rng.integers(1, E + 1))
        p.raw(word(Op.MATMUL, Flag.ACCUMULATE, src=over(UB, n), dst=hi_acc, n=n))
    elif variant == "matmul_dst":
        n = int(rng.integers(2, E + 2))
        if rng.random() < 0.3:
            p.raw(word(Op.MATMUL, 0, src=0, dst=0, n=big_n(AC)))
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
        part = _parts_act(cfg) + int(rng.choice([0, 0, 1, 254 - _parts_act(cfg)]))
        p.raw(word(Op.ACTIVATE, src=0, dst=hi_ub, n=E, part=min(part, 0xFF)))
    elif variant == "write_ub_src":
        n = int(rng.integers(1, E + 2))
        p.raw(word(Op.WRITE_HOST, src=over(UB, n), n=n))
    elif variant == "write_ub_part":
        part = _parts_ub(cfg) + int(rng.choice([0, 0, 1, 200]))
        p.raw(word(Op.WRITE_HOST, src=0, n=2, part=min(part, 0xFF)))
    elif variant == "write_acc_src":
        n = int(rng.integers(1, E + 2))
        p.raw(word(Op.WRITE_HOST, Flag.FROM_ACC, src=over(AC, n), n=n))
    elif variant == "write_acc_part":
        p.raw(word(Op.WRITE_HOST, Flag.FROM_ACC, src=0, n=2, part=int(rng.integers(1, 256))))
    elif variant == "write_n0":
        p.raw(word(Op.WRITE_HOST, int(rng.integers(0, 2)), src=0, n=0))
    elif variant == "read_host_dst":
        n = int(rng.integers(2, E + 2))
        p.raw(word(Op.READ_HOST, dst=over(UB, n), n=n), junk(n))
    elif variant == "read_host_n0":
        p.raw(word(Op.READ_HOST, dst=0, n=0), junk(int(rng.integers(1, 4))))
    elif variant == "read_weights_n0":
        p.raw(word(Op.READ_WEIGHTS, n=0), junk(int(rng.integers(1, 4))))
    elif variant in ("new_tile_empty", "new_tile_at_start"):
        p.raw(word(Op.MATMUL, Flag.NEW_TILE | int(rng.integers(0, 2)), src=0, dst=hi_acc,
                   n=E))
    elif variant == "reuse_before_take":
        b.read_weights(int(rng.integers(1, depth + 1)))
        p.raw(word(Op.MATMUL, int(rng.integers(0, 2)), src=0, dst=hi_acc, n=E))
    elif variant in ("overflow", "overflow_short_data"):
        if depth > 1 and rng.random() < 0.7:
            b.read_weights(int(rng.integers(1, depth)))
        n = depth - b.untaken + int(rng.integers(1, 3))
        beats = n * R if variant == "overflow" else int(rng.integers(1, 3))
        p.raw(word(Op.READ_WEIGHTS, n=n), junk(beats))
    elif variant in ("host_early", "host_missing"):
        n = int(rng.integers(2, U + 1))
        dst = int(rng.integers(0, U - n + 1))
        data = junk(n)
        last = np.zeros(n, dtype=bool)
        if variant == "host_early":
            k = int(rng.integers(0, n - 1))           # last on beat k < n - 1
            data, last = data[:k + 1], last[:k + 1]
            last[k] = True
        else:
            extra = int(rng.integers(1, 4))
            data = np.concatenate([data, junk(extra)])
            last = np.concatenate([last, np.zeros(extra, dtype=bool)])
            last[-1] = True
        p.raw(word(Op.READ_HOST, dst=dst, n=n), data, last)
    elif variant in ("weights_early", "weights_missing"):
        n = min(depth - b.untaken, 2)
        if n < 1 or n * R < 2 and variant == "weights_early":
            raise ValueError(f"{variant} needs a free FIFO slot and 2 weight beats "
                             f"(rows={R}, weight_fifo_depth={depth})")
        T = n * R
        rows = int8_data(rng, (T, C))
        data = b._beats(rows, C)
        last = np.zeros(T, dtype=bool)
        if variant == "weights_early":
            k = int(rng.integers(0, T - 1))
            data, last = data[:k + 1], last[:k + 1]
            last[k] = True
        else:
            extra = int(rng.integers(1, 4))
            data = np.concatenate([data, junk(extra)])
            last = np.concatenate([last, np.zeros(extra, dtype=bool)])
            last[-1] = True
        p.raw(word(Op.READ_WEIGHTS, n=n), data, last)
        b.untaken += n        # the tiles are queued anyway (missing rows as zeros)
    else:  # pragma: no cover - guarded above
        raise AssertionError(variant)

    # --- after it: the known rows are unchanged, the next instructions work ---------------
    b.sync()
    for part in range(_parts_ub(cfg)):
        b.write_ub(0, U, part)
        b.write_ub(hi_ub, E, part)
    if takes:
        b.write_acc(0, A)
        b.write_acc(hi_acc, E)
    # Use every queued tile (the failing instruction must not have queued or taken any), then
    # a fresh one.
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
    b.set_quant(mult=int(rng.integers(1, 1 << 16)), shift=int(rng.integers(4, 12)), zp=0,
                relu=0)
    b.activate(hi_acc, hi_ub, min(n2, E), int(rng.integers(0, _parts_act(cfg))))
    b.write_acc(hi_acc, min(n2, E))
    for part in range(_parts_ub(cfg)):
        b.write_ub(hi_ub, E, part)
    b.sync()
    return p


# --- batches for the core tests ---------------------------------------------------------------
@dataclass
class Case:
    """A program of a core test batch. ``compiled`` (compiler output): ``compiled.decode`` of the
    host-out stream must equal ``reference`` (NumPy); ``exact`` is the unwrapped product (int32
    GEMMs), to see that sums really wrap at ``acc_width``."""

    name: str
    program: Program
    compiled: CompiledGemm | None = None
    reference: np.ndarray | None = None
    exact: np.ndarray | None = None


#: Requantization edges for int8 GEMMs: ties (round half up), shift 0 and 63, saturation both
#: ways, zero points at the int8 edges, ReLU.
QUANT_CASES = (
    dict(mult=1, shift=1, zp=0, relu=False),               # every odd sum is a tie
    dict(mult=3, shift=2, zp=-3, relu=False),              # ties where 3*acc = 2 mod 4
    dict(mult=1, shift=0, zp=0, relu=False),               # shift 0: saturates both ways
    dict(mult=-1, shift=0, zp=127, relu=True),             # relu floor at zp = 127
    dict(mult=(1 << 31) - 1, shift=63, zp=-128, relu=False),
    dict(mult=-(1 << 31), shift=40, zp=-128, relu=True),
    dict(mult=(1 << 31) - 1, shift=24, zp=5, relu=True),
    dict(mult=12345, shift=15, zp=-100, relu=False),
)


def gemm_cases(config: Config, rng, *, random_shapes: int = 4, quant_cases=QUANT_CASES,
               mlp: bool = True, shapes=None) -> list[Case]:
    """Compiled GEMMs (and for R == C two-layer MLPs) with full-range int8 data: shapes with
    1 and non-multiples of R and C (``shapes``, M x K x N, default four of them), random shapes,
    the all -128 corner, a long accumulation (M = 1, K = 12 R) and int8 outputs at the
    requantization edges ``quant_cases``."""
    rng = _rng(rng)
    R, C = config.rows, config.cols
    cases = []

    def gemm(name, A, B, **kw):
        c = compile_gemm(config, A, B, **kw)
        exact = A @ B if kw.get("out", "int32") == "int32" else None
        cases.append(Case(name, c.program, c, gemm_reference(config, A, B, **kw), exact))

    if shapes is None:
        shapes = [(1, 1, 1), (1, R, C), (R + 1, 2 * R + 1, C + 2),
                  (2 * R + 3, max(R - 1, 1), 2 * C - 1)]
    shapes = list(shapes)
    for _ in range(random_shapes):
        shapes.append(tuple(int(rng.integers(1, hi + 1)) for hi in
                            (3 * R + 3, 3 * R + 2, 3 * C + 2)))
    for M, K, N in shapes:
        gemm(f"gemm_{M}x{K}x{N}", int8_data(rng, (M, K)), int8_data(rng, (K, N)))
    M, K, N = R + 2, 2 * R + 1, C + 1
    gemm("all_minus128", np.full((M, K), -128), np.full((K, N), -128))
    gemm("127_times_minus128", np.full((M, K), 127), np.full((K, N), -128))
    # Many K tiles into one row: column 0 of B has the signs of A (big sums, which wrap at
    # narrow acc_width), the other columns are random.
    A = int8_data(rng, (1, 12 * R), edge=0.9)
    B = int8_data(rng, (12 * R, C + 1), edge=0.6)
    B[:, 0] = np.where(A[0] < 0, -128, 127)
    gemm("long_k_m1", A, B)
    for q in quant_cases:
        M, K, N = (int(rng.integers(1, hi + 1)) for hi in (2 * R + 2, 2 * R + 2, 2 * C + 2))
        name = "int8_m{mult}_s{shift}_z{zp}_r{relu:d}".format(**q)
        gemm(name, int8_data(rng, (M, K)), int8_data(rng, (K, N)), out="int8", **q)
    if mlp and R == C:
        X = int8_data(rng, (5, 2 * R + 1))
        W1 = int8_data(rng, (2 * R + 1, 2 * C + 1))
        W2 = int8_data(rng, (2 * C + 1, C + 2))
        hidden = Quant(mult=3, shift=9, zp=-3, relu=True)
        for kw in (dict(), dict(out="int8", mult=5, shift=12, zp=2)):
            c = compile_mlp(config, X, W1, W2, hidden=hidden, **kw)
            ref = mlp_reference(config, X, W1, W2, hidden=hidden, **kw)
            cases.append(Case(f"mlp_{kw.get('out', 'int32')}", c.program, c, ref))
    return cases


def error_cases(config: Config, rng, *, all_variants: bool = False) -> list[Case]:
    """One error program per cause (a random variant), or every variant of every cause."""
    rng = _rng(rng)
    cases = []
    for cause, variants in ERROR_VARIANTS.items():
        chosen = variants if all_variants else (str(rng.choice(variants)),)
        for v in chosen:
            try:
                p = error_program(config, cause, rng, variant=v)
            except ValueError:
                continue          # this variant cannot exist in this config
            cases.append(Case(f"error_{cause.name}_{v}", p))
    return cases


def check_results(config: Config, cases, results) -> list[str]:
    """Problems with a backend's results for ``cases``: the testbench's own mismatches, the
    host-out stream and error cause against the golden model, compiled outputs against NumPy."""
    problems = []
    if len(results) != len(cases):
        return [f"{len(results)} results for {len(cases)} programs"]
    for case, r in zip(cases, results, strict=True):
        exp = Machine(config).run(case.program)
        errs = [f"testbench: {m}" for m in r.mismatches]
        errs += exp.mismatches(r.host_out, r.last)
        if r.error != int(exp.error):
            errs.append(f"error cause {r.error}, expected {int(exp.error)}")
        if case.compiled is not None and not errs:
            try:
                got = case.compiled.decode(r.host_out)
            except ValueError as e:
                errs.append(f"decode: {e}")
            else:
                if not np.array_equal(got, case.reference):
                    errs.append(f"result differs from NumPy at "
                                f"{np.argwhere(got != case.reference)[:3].tolist()}")
        if errs:
            problems.append(f"{case.name}: " + "; ".join(errs[:3]))
    return problems


# --- exact timing -----------------------------------------------------------------------------
def timing_cases(config: Config, rng, ms=(1, 3)) -> list[tuple[str, Program, int]]:
    """Small programs and their exact cycle counts without stalls, from an idle core (from the
    first command transfer to the last host-out transfer, inclusive).

    Derived from the engines' documented timing, with L = ``array_latency`` (R + C - 1 +
    ``cell_pipeline``), D = ``ACC_DRAIN`` = 3, N = the activation unit's ``cycles_per_row``,
    Q = its ``latency`` (cycle 0 is the first command transfer; times below are cycles):

      * dispatch (``hdl.controller.Controller``) takes a command in the cycle it is offered,
        decodes it and issues it two cycles later at the earliest, then one per cycle while
        nothing blocks them; an engine starts the cycle after issue; the
        host-in engine takes one beat per cycle; the matmul and host-out engines read one row
        ahead (the first row enters the array / leaves on host-out two cycles after issue; a
        SYNC beat one cycle after); the weight FIFO passes one beat per cycle; an engine is
        idle the cycle after its ``done``, and SYNC issues one cycle later still (when that
        last retirement has been counted), so a SYNC beat comes three cycles after the
        previous instruction's last beat or row;
      * ``sync``: SYNC alone: taken at 0, issued at 2, its beat at 3: ``4`` cycles.
      * ``ub``: READ_HOST M (issued at 2, beats 3 .. M + 2); WRITE_HOST M from those rows waits
        for the UB writes (issue M + 3), beats M + 5 .. 2M + 4; SYNC issues at 2M + 6, beat
        2M + 7: ``2M + 8``.
      * ``mm``: READ_WEIGHTS 1; READ_HOST M; MATMUL M; WRITE_HOST FROM_ACC M; SYNC. Weight beats
        3 .. R + 2, READ_HOST issue R + 3 (beats R + 4 .. R + M + 3), MATMUL issue R + M + 4,
        vectors enter R + M + 6 .. R + 2M + 5, the drain interlock holds WRITE_HOST until
        L + D + 1 cycles after the last one (issue R + 2M + L + D + 6), its beats two cycles
        after its issue, the SYNC beat three after the last: ``3M + R + L + D + 11``.
      * ``mm2``: as ``mm`` with two tiles, MATMUL M NEW_TILE twice (the second ACCUMULATE): the
        second MATMUL issues when the engine is free, two cycles of restart, and a tile starts
        at least R cycles after the one before (its R weight beats load behind the previous
        tile's start): ``4M + 2R + L + D + 13 + max(0, R - M - 2)``.
      * ``act``: SET_QUANT (one cycle: everything after it is one cycle later); as ``mm`` but
        ACTIVATE M into other UB rows, then WRITE_HOST from them: ACTIVATE issues like
        WRITE_HOST FROM_ACC above (R + 2M + L + D + 7), rows enter the unit every N cycles from
        two cycles after issue and are written Q cycles later; WRITE_HOST issues the cycle
        after the last write, beats two cycles after: ``3M + R + L + D + 15 + (M - 1) N + Q``.
    """
    rng = _rng(rng)
    cfg = config
    R, C = cfg.rows, cfg.cols
    L, D = array_latency(cfg), ACC_DRAIN
    N, Q = activation_timing(cfg)
    out = [("sync", Program(cfg).sync(), 4)]
    for M in ms:
        if 2 * M > min(cfg.ub_rows, cfg.acc_rows):
            raise ValueError(f"M = {M} needs {2 * M} UB and ACC rows")
        p = Program(cfg).read_host(0, int8_data(rng, (M, R))).write_host(0, M).sync()
        out.append((f"ub_m{M}", p, 2 * M + 8))
        p = Program(cfg).read_weights(int8_data(rng, (R, C))).read_host(
            0, int8_data(rng, (M, R))).matmul(0, 0, M).write_host(0, M, from_acc=True).sync()
        out.append((f"mm_m{M}", p, 3 * M + R + L + D + 11))
        if cfg.weight_fifo_depth >= 2:
            p = Program(cfg).read_weights(int8_data(rng, (2, R, C))).read_host(
                0, int8_data(rng, (M, R))).matmul(0, 0, M).matmul(0, 0, M, accumulate=True)
            p.write_host(0, M, from_acc=True).sync()
            out.append((f"mm2_m{M}", p, 4 * M + 2 * R + L + D + 13 + max(0, R - M - 2)))
        p = Program(cfg).set_quant(3, 4, -2, False).read_weights(int8_data(rng, (R, C)))
        p.read_host(0, int8_data(rng, (M, R))).matmul(0, 0, M).activate(0, M, M)
        p.write_host(M, M).sync()
        out.append((f"act_m{M}", p, 3 * M + R + L + D + 15 + (M - 1) * N + Q))
    return out
