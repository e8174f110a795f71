"""The instruction set: one definition of every field, used by the hardware, the compiler and
the golden model.

An instruction is one 64-bit word (``INSTR_LAYOUT``):

    bits  0..3    op      opcode (``Op``); bit 3 set means the instruction carries host-in data
    bits  4..7    flags   per-opcode flags (``Flag``)
    bits  8..63   body    ``MEM_LAYOUT`` (addresses) or ``QUANT_LAYOUT`` (SET_QUANT)

``MEM_LAYOUT``: ``src`` (16), ``dst`` (16), ``n`` (16, rows or tiles, >= 1), ``part`` (8).
``QUANT_LAYOUT``: ``mult`` (signed 32), ``shift`` (6), ``zp`` (signed 8), ``relu`` (1).

op  name           host in          host out            effect
--  -------------  ---------------  ------------------  ------------------------------------------
0   NOP                                                 nothing
1   MATMUL                                              UB rows src..src+n-1 through the array
                                                        into ACC rows dst..; flags ACCUMULATE
                                                        (add, else overwrite) and NEW_TILE (take
                                                        the next tile of the weight FIFO, else
                                                        reuse the current one)
2   ACTIVATE                                            ACC rows src.. through the activation
                                                        unit into UB rows dst..; UB lane k =
                                                        q lane part*R + k (0 where >= C)
3   WRITE_HOST                      n beats, last       UB rows src.. (or ACC rows with FROM_ACC)
                                                        to the host; from UB, beat lane j = UB
                                                        lane part*C + j (0 where >= R),
                                                        sign-extended
4   SET_QUANT                                           activation parameters for what follows
                                                        (after reset: mult 1, shift 0, zp 0,
                                                        no ReLU)
5   SYNC                            1 beat, last        waits until everything before it has
                                                        finished; lane 0 = SYNC_MAGIC, lane 1 =
                                                        error cause, lane 2 = low 16 bits of the
                                                        instructions retired before it
6   READ_COUNTERS                   4*N_COUNTERS beats  waits like SYNC; each counter as four
                                                        16-bit little-endian chunks in lane 0
9   READ_HOST      n beats, last                        host rows into UB rows dst.. (lanes
                                                        0..R-1 of each beat)
10  READ_WEIGHTS   n*R beats, last                      n tiles into the weight FIFO; a beat is
                                                        one tile row (lanes 0..C-1)

Host-in beats carry max(R, C) operand lanes; host-out beats carry C lanes of ``acc_width``.

Errors (``Cause``) are sticky on the status port; the instruction is dropped and, when its op has
bit 3 set (whatever the op), its host-in data is discarded up to its ``last`` beat.
"""

import enum

from amaranth.hdl import signed
from amaranth.lib import data

__all__ = [
    "ISA_VERSION", "Op", "Flag", "Cause", "Counter", "N_COUNTERS", "COUNTER_CHUNKS",
    "COUNTER_BEATS", "SYNC_MAGIC",
    "MEM_LAYOUT", "QUANT_LAYOUT", "INSTR_LAYOUT", "INSTR_BITS", "HOST_DATA_BIT",
    "encode", "decode", "has_host_data",
]

#: Bumped whenever an encoding or a meaning changes.
ISA_VERSION = 1

#: Opcodes with this bit set carry host-in data.
HOST_DATA_BIT = 0b1000


class Op(enum.IntEnum):
    NOP = 0
    MATMUL = 1
    ACTIVATE = 2
    WRITE_HOST = 3
    SET_QUANT = 4
    SYNC = 5
    READ_COUNTERS = 6
    READ_HOST = 9
    READ_WEIGHTS = 10


class Flag(enum.IntFlag):
    """Per-opcode flags (bits 4..7 of the word)."""

    ACCUMULATE = 1  # MATMUL: add into the accumulators (else overwrite)
    NEW_TILE = 2    # MATMUL: take the next weight tile (else reuse the current one)
    FROM_ACC = 1    # WRITE_HOST: raw accumulator rows (else unified-buffer rows)


class Cause(enum.IntEnum):
    """Error causes on the status port (the first error since the last clear)."""

    NONE = 0
    BAD_OPCODE = 1       # an opcode not in ``Op``
    OUT_OF_RANGE = 2     # n == 0, or an address + length past its buffer, or part too large
    NO_TILE = 3          # MATMUL with NEW_TILE and no tile requested but not taken, or reuse
                         # before any tile was taken
    WEIGHT_OVERFLOW = 4  # READ_WEIGHTS would hold more than weight_fifo_depth untaken tiles
    HOST_FRAMING = 5     # host-in ``last`` not on the instruction's final beat


class Counter(enum.IntEnum):
    """64-bit counters on the status port, in READ_COUNTERS order."""

    CYCLES = 0        # clock cycles since reset or counter clear
    ARRAY_BUSY = 1    # cycles in which an activation vector entered the array
    HOST_IN_STALL = 2  # cycles an instruction waited for host-in data
    HOST_OUT_STALL = 3  # cycles a host-out beat waited for the host
    RETIRED = 4       # instructions finished (including dropped ones)


N_COUNTERS = len(Counter)
#: 16-bit chunks per counter in a READ_COUNTERS reply, and the beats READ_COUNTERS sends.
COUNTER_CHUNKS = 4
COUNTER_BEATS = COUNTER_CHUNKS * N_COUNTERS
SYNC_MAGIC = 0x5C

MEM_LAYOUT = data.StructLayout({
    "src": 16,
    "dst": 16,
    "n": 16,
    "part": 8,
})

QUANT_LAYOUT = data.StructLayout({
    "mult": signed(32),
    "shift": 6,
    "zp": signed(8),
    "relu": 1,
})

INSTR_LAYOUT = data.StructLayout({
    "op": 4,
    "flags": 4,
    "body": data.UnionLayout({"mem": MEM_LAYOUT, "quant": QUANT_LAYOUT}),
})

INSTR_BITS = INSTR_LAYOUT.size
assert INSTR_BITS == 64


def has_host_data(op: int) -> bool:
    return bool(op & HOST_DATA_BIT)


def encode(op, flags=0, *, src=0, dst=0, n=0, part=0, mult=0, shift=0, zp=0, relu=0) -> int:
    """Encode one instruction to its 64-bit word (fields are range-checked)."""
    op = int(op)
    if not 0 <= op < 16:
        raise ValueError(f"op must be 0..15, not {op!r}")
    if not 0 <= int(flags) < 16:
        raise ValueError(f"flags must be 0..15, not {flags!r}")
    if op == Op.SET_QUANT:
        fields = {"mult": (mult, -(1 << 31), (1 << 31) - 1), "shift": (shift, 0, 63),
                  "zp": (zp, -128, 127), "relu": (int(relu), 0, 1)}
    else:
        fields = {"src": (src, 0, 0xFFFF), "dst": (dst, 0, 0xFFFF), "n": (n, 0, 0xFFFF),
                  "part": (part, 0, 0xFF)}
    for name, (v, lo, hi) in fields.items():
        if not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {v!r}")
    body = {"quant" if op == Op.SET_QUANT else "mem": {k: v for k, (v, _, _) in fields.items()}}
    word = INSTR_LAYOUT.const({"op": op, "flags": int(flags), "body": body}).as_value().value
    return word


def decode(word: int) -> dict:
    """Decode a 64-bit word into ``{"op", "flags", ...fields}`` (op kept as an int)."""
    if not isinstance(word, int) or not 0 <= word < (1 << INSTR_BITS):
        raise ValueError(f"word must be a {INSTR_BITS}-bit unsigned integer, not {word!r}")
    v = INSTR_LAYOUT.from_bits(word)
    out = {"op": int(v.op), "flags": int(v.flags)}
    if out["op"] == Op.SET_QUANT:
        q = v.body.quant
        out.update(mult=int(q.mult), shift=int(q.shift), zp=int(q.zp), relu=int(q.relu))
    else:
        mem = v.body.mem
        out.update(src=int(mem.src), dst=int(mem.dst), n=int(mem.n), part=int(mem.part))
    return out
