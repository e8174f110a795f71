"""The instruction set, in one place: the fields of the instruction word, the opcodes, the error
causes and what every op reads, writes and sends. The controller's decode stage, the golden
model (``sim.machine``), the compiler, the fuzzer and the disassembler all derive from these
tables; nothing here elaborates hardware.

An instruction is one 64-bit word (``INSTR_LAYOUT``, generated from ``HEADER_FIELDS`` and
``MEM_FIELDS``):

    bits  0..3    op      opcode (``Op``); bit 3 set means the instruction carries host-in data
    bits  4..7    flags   per-opcode flags (``Flag``); ACTIVATE: the parameter set (0..15)
    bits  8..63   body    ``MEM_LAYOUT``: ``src`` (16), ``dst`` (16), ``n`` (16, rows, tiles or
                          parameter sets), ``part`` (8)

op  name           effect
--  -------------  ---------------------------------------------------------------------------
0   NOP            nothing; with flag SHAPE or AT (``Config.window``): the body sets the window
                   walk's SHAPE or AT register (``hdl.window``)
1   MATMUL         UB rows src..src+n-1 through the array into ACC rows dst..; flags ACCUMULATE
                   (add, else overwrite) and NEW_TILE (take the next tile of the weight FIFO,
                   else reuse the current one); WINDOW (``Config.window``): the n vectors
                   are a convolution window's walk over the plane at src (``hdl.window``), in
                   the extent of (part + 1) * ``WINDOW_BLOCK`` rows from src
2   ACTIVATE       ACC rows src.. requantized (TFLite's int8 arithmetic, ``sim.requant``) with
                   parameter set ``flags`` into UB rows dst..; UB lane k = q lane part*R + k
                   (0 where >= C). int4: the result is clamped to -8..7 as well. Float
                   operand types: binary32 sums converted to the operand type (RNE; bf16
                   flushes, fp8 saturates), after a ReLU when ``flags`` is odd
                   (``sim.float_golden.activate``); the sets' values are not used
3   WRITE_HOST     UB rows src.. (or ACC rows with FROM_ACC) to the host, one beat a row, last
                   on the final one; from UB, beat lane j = UB lane part*C + j (0 where >= R),
                   sign-extended
4   LOAD_WEIGHTS   weight-memory tiles src..src+n-1 into the weight FIFO, in order (what
                   READ_WEIGHTS does with host data; the same WEIGHT_OVERFLOW rule)
5   SYNC           waits until everything before it has finished; one beat (last): lane 0 =
                   SYNC_MAGIC, lane 1 = error cause, lane 2 = low 16 bits of the instructions
                   retired before it
6   READ_COUNTERS  waits like SYNC; ``COUNTER_BEATS`` beats: each counter (``Counter`` order)
                   as ``COUNTER_CHUNKS`` 16-bit little-endian chunks in lane 0
7   PROGRAM        the program memory and the model tag, by flags STORE and TAG:
                   CALL (neither): runs program-memory words src..src+n-1 in its place, as if
                   they came from the command stream (their host data still comes from the
                   host); STORE: the next n words of the command stream are stored at words
                   dst..dst+n-1, not run (a dropped STORE still takes its n words, but
                   for a config without program memory);
                   TAG|STORE (SET_TAG): the model tag := the body (src, dst, n, part: 56 bits);
                   TAG (CHECK_TAG): WRONG_MODEL unless the tag equals the body; after a failed
                   check, CALLs are dropped with WRONG_MODEL (no stale model computes) until a
                   SET_TAG or a passing CHECK_TAG. The tag is 0 after reset. A CALL or STORE
                   run from program memory is dropped with BAD_PROGRAM (the sequencer marks it
                   NESTED), and takes no words
9   READ_HOST      n host-in beats (last on the final one) into UB rows dst.. (lanes 0..R-1)
10  READ_WEIGHTS   n tiles into the weight FIFO: n*R host-in beats (last on the final one), a
                   beat is one tile row (lanes 0..C-1)
11  READ_QUANT     n requantization parameter sets into sets dst..: ``QUANT_BEATS`` (12)
                   host-in beats a set (last on the final one), lane c of a beat for output
                   lane c: beats 0-3 the bias (int32, byte k in beat k, little endian), 4-7 the
                   multiplier (int32), 8 the shift (bits 0..5: signed -32..31; left when > 0),
                   then in lane 0 only: 9 the output zero point, 10 act_min, 11 act_max (int8)
12  STORE_WEIGHTS  n tiles into weight-memory tiles dst..: n*R host-in beats (last on the final
                   one), a beat is one tile row (lanes 0..C-1)

The parameter sets (``Config.quant_sets`` of them) keep their values across reset, like the
buffers; a program loads a set before an ACTIVATE uses it.

``OPS`` holds each op's rules (``OpSpec``): its host-in and host-out beat counts, the buffer rows
it reads and writes, whether ``n`` counts (then n == 0 is an error), the flags it uses and how
many ``part`` values are valid. Host-in beats carry max(R, C) operand lanes; host-out beats carry
C lanes of ``acc_width``. Fields an op does not use (``OpSpec.fields``) are ignored, as are
flag bits it does not use.

Errors (``Cause``) are sticky on the status port; the instruction is dropped and, when its op
has bit 3 set (whatever the op), its host-in data is discarded up to its ``last`` beat. The
causes that the word alone decides (``static_cause``), before any other:

  1. BAD_OPCODE    the op is not in ``Op``.
  2. OUT_OF_RANGE  n == 0 for an op that counts (``OpSpec.counted``); a row range the op reads
                   or writes past its buffer (``start + n > rows``, ``OpSpec.accesses``); ``part``
                   not below the number of parts of the rows it slices (ACTIVATE ceil(C / R),
                   WRITE_HOST from UB ceil(R / C), WRITE_HOST FROM_ACC 1).
  3. BAD_PROGRAM / WRONG_MODEL  PROGRAM with NESTED / MISMATCH (``OpSpec.flag_causes``).

The weight memory (``Config.weight_tiles`` tiles) and the program memory
(``Config.program_words`` words) keep their contents across reset, like the buffers; with 0 of
either, every op that addresses it is OUT_OF_RANGE; without a program memory there is no tag
either: every PROGRAM word is OUT_OF_RANGE and a STORE takes no words (``OpSpec.needs``).
"""

from collections.abc import Callable
from dataclasses import dataclass
from operator import index

from amaranth.hdl import signed, unsigned
from amaranth.lib import data, enum

from tpugen.hdl.config import Config, check_config

__all__ = [
    "ISA_VERSION", "WINDOW_BLOCK", "Op", "Flag", "Cause", "Counter", "N_COUNTERS", "COUNTER_CHUNKS",
    "COUNTER_BEATS", "SYNC_MAGIC", "HOST_DATA_BIT",
    "QUANT_BEATS", "QUANT_BIAS_BEATS", "QUANT_MULT_BEATS", "QUANT_SHIFT_BEAT", "QUANT_ZP_BEAT",
    "QUANT_MIN_BEAT", "QUANT_MAX_BEAT",
    "Field", "HEADER_FIELDS", "MEM_FIELDS", "MEM_LAYOUT", "INSTR_LAYOUT", "INSTR_BITS",
    "Buffer", "Beats", "Access", "OpSpec", "OPS",
    "encode", "decode", "has_host_data", "body_fields", "accesses", "conflict", "static_cause",
    "host_in_beats", "host_out_beats", "parts",
]

#: Bumped whenever an encoding or a meaning changes. 2: TFLite requantization (READ_QUANT and
#: parameter sets replace SET_QUANT). 3: the weight memory (STORE_WEIGHTS, LOAD_WEIGHTS), the
#: program memory and the model tag (PROGRAM). 4: the window walk (MATMUL WINDOW, NOP SHAPE /
#: AT).
ISA_VERSION = 4
#: Rows per unit of a window MATMUL's extent (``hdl.window``).
WINDOW_BLOCK = 64

#: Opcodes with this bit set carry host-in data.
HOST_DATA_BIT = 0b1000


def has_host_data(op):
    """Whether opcode ``op`` carries host-in data (``HOST_DATA_BIT``): a ``bool`` for an
    ``int``, a 1-bit value for an Amaranth value (the controller's decode)."""
    return (op & HOST_DATA_BIT) != 0


class Op(enum.IntEnum, shape=4):
    NOP = 0
    MATMUL = 1
    ACTIVATE = 2
    WRITE_HOST = 3
    LOAD_WEIGHTS = 4
    SYNC = 5
    READ_COUNTERS = 6
    PROGRAM = 7
    READ_HOST = 9
    READ_WEIGHTS = 10
    READ_QUANT = 11
    STORE_WEIGHTS = 12


class Flag(enum.IntFlag, shape=4):
    """Per-opcode flags (bits 4..7 of the word); the same bit means different things to
    different ops (``OpSpec.flags`` names the ones each op uses)."""

    ACCUMULATE = 1  # MATMUL: add into the accumulators (else overwrite)
    NEW_TILE = 2    # MATMUL: take the next weight tile (else reuse the current one)
    WINDOW = 4      # MATMUL: the vectors are a window walk (``hdl.window``)
    SHAPE = 1       # NOP: set the window walk's SHAPE register from the body
    AT = 2          # NOP: set the window walk's AT register from the body
    FROM_ACC = 1    # WRITE_HOST: raw accumulator rows (else unified-buffer rows)
    STORE = 1       # PROGRAM: store the next n command words (else call); with TAG: set the tag
    TAG = 2         # PROGRAM: the model tag (with STORE: set it, else check it)
    NESTED = 4      # PROGRAM: set by the sequencer on a CALL or STORE run from program memory
    MISMATCH = 8    # PROGRAM: set by the sequencer on a CHECK_TAG whose tag differs, and on a
                    # CALL after it


class Cause(enum.IntEnum, shape=4):
    """Error causes on the status port (the first error since the last clear)."""

    NONE = 0
    BAD_OPCODE = 1       # an opcode not in ``Op``
    OUT_OF_RANGE = 2     # n == 0, or an address + length past its buffer, or part too large
    NO_TILE = 3          # MATMUL with NEW_TILE and no tile requested but not taken, or reuse
                         # before any tile was taken
    WEIGHT_OVERFLOW = 4  # READ_WEIGHTS would hold more than weight_fifo_depth untaken tiles
    HOST_FRAMING = 5     # host-in ``last`` not on the instruction's final beat
    BAD_PROGRAM = 6      # a CALL or STORE run from program memory (PROGRAM with NESTED)
    WRONG_MODEL = 7      # CHECK_TAG of a tag that is not the loaded model's, a CALL after it


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
#: Host-in beats of one READ_QUANT parameter set, and what each carries (module docstring).
QUANT_BEATS = 12
QUANT_BIAS_BEATS = range(0, 4)
QUANT_MULT_BEATS = range(4, 8)
QUANT_SHIFT_BEAT = 8
QUANT_ZP_BEAT, QUANT_MIN_BEAT, QUANT_MAX_BEAT = 9, 10, 11


# --- the fields of the word -------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """Bits ``offset .. offset + width - 1`` of the instruction word, two's complement when
    ``signed``."""

    name: str
    offset: int
    width: int
    signed: bool = False

    @property
    def shape(self):
        return signed(self.width) if self.signed else unsigned(self.width)

    @property
    def min(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return (1 << (self.width - (1 if self.signed else 0))) - 1

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


def _packed(offset: int, *fields: tuple[str, int, bool]) -> tuple[Field, ...]:
    """Fields one after the other from bit ``offset``."""
    out = []
    for name, width, is_signed in fields:
        out.append(Field(name, offset, width, is_signed))
        offset += width
    return tuple(out)


HEADER_FIELDS = _packed(0, ("op", 4, False), ("flags", 4, False))
_BODY = sum(f.width for f in HEADER_FIELDS)
#: The body of every op.
MEM_FIELDS = _packed(_BODY, ("src", 16, False), ("dst", 16, False), ("n", 16, False),
                     ("part", 8, False))

MEM_LAYOUT = data.StructLayout({f.name: f.shape for f in MEM_FIELDS})
#: The word: ``op`` and ``flags`` are raw bits (a word may hold an opcode not in ``Op``).
INSTR_LAYOUT = data.StructLayout({
    **{f.name: f.shape for f in HEADER_FIELDS},
    "body": data.StructLayout({"mem": MEM_LAYOUT}),
})
INSTR_BITS = INSTR_LAYOUT.size
assert INSTR_BITS == 64
assert Op.as_shape().width == HEADER_FIELDS[0].width == Cause.as_shape().width
assert Flag.as_shape().width == HEADER_FIELDS[1].width


# --- what each op does ------------------------------------------------------------------------
class Buffer(enum.Enum):
    """The on-chip buffers whose rows instructions address."""

    UB = "ub"        # unified buffer: ``ub_rows`` rows of R operand lanes
    ACC = "acc"      # accumulator buffer: ``acc_rows`` rows of C ``acc_width`` lanes
    QUANT = "quant"  # requantization parameter sets: ``quant_sets`` of them
    WMEM = "wmem"    # weight memory: ``weight_tiles`` whole R x C tiles
    PMEM = "pmem"    # program memory: ``program_words`` instruction words

    def rows(self, config: Config) -> int:
        return {Buffer.UB: config.ub_rows, Buffer.ACC: config.acc_rows,
                Buffer.QUANT: config.quant_sets, Buffer.WMEM: config.weight_tiles,
                Buffer.PMEM: config.program_words}[self]


class Beats(enum.Enum):
    """How many host-in or host-out beats an instruction moves."""

    NONE = "0"
    N = "n"
    N_TILES = "n * R"          # n weight tiles of R rows each
    N_SETS = "n * QUANT_BEATS"  # n requantization parameter sets
    ONE = "1"
    COUNTERS = "COUNTER_BEATS"

    def count(self, n: int, config: Config) -> int:
        if self is Beats.N:
            return n
        if self is Beats.N_TILES:
            return n * config.rows
        if self is Beats.N_SETS:
            return n * QUANT_BEATS
        return {Beats.NONE: 0, Beats.ONE: 1, Beats.COUNTERS: COUNTER_BEATS}[self]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _result_parts(config: Config) -> int:
    """ACTIVATE: a UB row (R lanes) takes lanes ``part * R ..`` of a C-lane result row."""
    return _ceil(config.cols, config.rows)


def _ub_parts(config: Config) -> int:
    """WRITE_HOST from UB: a beat (C lanes) takes lanes ``part * C ..`` of an R-lane UB row."""
    return _ceil(config.rows, config.cols)


def _whole_row(config: Config) -> int:
    """WRITE_HOST FROM_ACC: a beat is the whole C-lane row (part 0 only)."""
    return 1


@dataclass(frozen=True)
class Access:
    """Rows ``start .. start + n - 1`` of ``buffer`` that an op reads or writes (``write``),
    ``start`` being the word's field ``field`` (a body field, or ``"flags"``: ACTIVATE's
    parameter set, then the access is one row: ``one_row``).

    ``when``: ``((flag, value), ...)``: the access happens only when ``bool(flags & flag) ==
    value`` for each pair (``None``: always; a single pair may be given bare). ``parts``: when
    the op moves slices of these rows, the number of valid ``part`` values as a function of the
    ``Config`` (``None``: no slices). ``extent``: the access is ``(part + 1) * WINDOW_BLOCK``
    rows (a window MATMUL's plane), not n. ``unit``: a ``Config`` field that must be non-zero
    (the hardware unit the access needs), else the op is OUT_OF_RANGE.
    """

    field: str
    buffer: Buffer
    write: bool
    when: tuple[Flag, bool] | None = None
    parts: Callable[[Config], int] | None = None
    one_row: bool = False
    extent: bool = False
    unit: str | None = None

    def __post_init__(self):
        if self.when is not None and isinstance(self.when[0], Flag):
            object.__setattr__(self, "when", (self.when,))

    def applies(self, flags: int) -> bool:
        return self.when is None or all(bool(flags & flag.value) == value
                                        for flag, value in self.when)


@dataclass(frozen=True)
class OpSpec:
    """The rules of one op (see the module docstring).

    ``host_in`` / ``host_out``: its beats when it executes; ``accesses``: the buffer rows it
    reads and writes; ``counted``: ``n`` counts rows, tiles or sets (n == 0 is OUT_OF_RANGE);
    ``flags``: the names of the ``Flag`` bits it uses (or all four as a number: an access
    whose field is ``"flags"``). ``flag_causes``: ``((flag, cause), ...)``: the op is dropped
    with ``cause`` when ``flag`` is set (after BAD_OPCODE and OUT_OF_RANGE, in this order).
    """

    op: Op
    host_in: Beats = Beats.NONE
    host_out: Beats = Beats.NONE
    accesses: tuple[Access, ...] = ()
    counted: bool = False
    flags: tuple[str, ...] = ()
    flag_causes: tuple[tuple[Flag, Cause], ...] = ()
    whole_body: bool = False   # every body field is used (PROGRAM: the tag)
    needs: Buffer | None = None  # a config without this buffer (0 rows): always OUT_OF_RANGE

    @property
    def flag_mask(self) -> int:
        if any(a.field == "flags" for a in self.accesses):
            return (1 << HEADER_FIELDS[1].width) - 1
        mask = 0
        for name in self.flags:
            mask |= int(Flag[name])
        return mask

    @property
    def fields(self) -> tuple[str, ...]:
        """The body fields the op uses (the others are ignored)."""
        if self.whole_body:
            return tuple(f.name for f in MEM_FIELDS)
        used = {a.field for a in self.accesses}
        if self.counted:
            used.add("n")
        if any(a.parts is not None or a.extent for a in self.accesses):
            used.add("part")
        return tuple(f.name for f in MEM_FIELDS if f.name in used)


OPS: dict[Op, OpSpec] = {s.op: s for s in (
    OpSpec(Op.NOP, flags=("SHAPE", "AT"), whole_body=True),
    OpSpec(Op.MATMUL, counted=True, flags=("ACCUMULATE", "NEW_TILE", "WINDOW"), accesses=(
        Access("src", Buffer.UB, write=False, when=(Flag.WINDOW, False)),
        Access("src", Buffer.UB, write=False, when=(Flag.WINDOW, True), extent=True,
               unit="window"),
        Access("dst", Buffer.ACC, write=True))),
    OpSpec(Op.ACTIVATE, counted=True, accesses=(
        Access("src", Buffer.ACC, write=False, parts=_result_parts),
        Access("dst", Buffer.UB, write=True),
        Access("flags", Buffer.QUANT, write=False, one_row=True))),
    OpSpec(Op.WRITE_HOST, counted=True, host_out=Beats.N, flags=("FROM_ACC",), accesses=(
        Access("src", Buffer.UB, write=False, when=(Flag.FROM_ACC, False), parts=_ub_parts),
        Access("src", Buffer.ACC, write=False, when=(Flag.FROM_ACC, True), parts=_whole_row))),
    OpSpec(Op.LOAD_WEIGHTS, counted=True, accesses=(
        Access("src", Buffer.WMEM, write=False),)),
    OpSpec(Op.SYNC, host_out=Beats.ONE),
    OpSpec(Op.READ_COUNTERS, host_out=Beats.COUNTERS),
    OpSpec(Op.PROGRAM, flags=("STORE", "TAG", "NESTED", "MISMATCH"), accesses=(
        Access("src", Buffer.PMEM, write=False, when=((Flag.STORE, False), (Flag.TAG, False))),
        Access("dst", Buffer.PMEM, write=True, when=((Flag.STORE, True), (Flag.TAG, False)))),
        flag_causes=((Flag.NESTED, Cause.BAD_PROGRAM), (Flag.MISMATCH, Cause.WRONG_MODEL)),
        whole_body=True, needs=Buffer.PMEM),
    OpSpec(Op.READ_HOST, counted=True, host_in=Beats.N, accesses=(
        Access("dst", Buffer.UB, write=True),)),
    OpSpec(Op.READ_WEIGHTS, counted=True, host_in=Beats.N_TILES),
    OpSpec(Op.READ_QUANT, counted=True, host_in=Beats.N_SETS, accesses=(
        Access("dst", Buffer.QUANT, write=True),)),
    OpSpec(Op.STORE_WEIGHTS, counted=True, host_in=Beats.N_TILES, accesses=(
        Access("dst", Buffer.WMEM, write=True),)),
)}
assert set(OPS) == set(Op)
assert all((s.host_in is not Beats.NONE) == has_host_data(s.op) for s in OPS.values())
assert all(a.field in ("src", "dst") or (a.field == "flags" and a.one_row)
           for s in OPS.values() for a in s.accesses)

_OP, _FLAGS = HEADER_FIELDS
#: The body fields of each opcode (every 4-bit one, in ``Op`` or not): all have the one body,
#: ``MEM_FIELDS``. The encoder, the decoder and ``body_fields`` read this table.
_BODIES = {op: MEM_FIELDS for op in range(1 << _OP.width)}
#: For the encoder and decoder: per opcode, (name, offset, mask, min, max, sign bit) of each
#: body field (the sign bit is 0 for an unsigned field).
_CODEC = {op: tuple((f.name, f.offset, f.mask, f.min, f.max, (1 << (f.width - 1)) * f.signed)
                    for f in fields)
          for op, fields in _BODIES.items()}
_NAMES = {op: frozenset(c[0] for c in codec) for op, codec in _CODEC.items()}


def body_fields(op: int) -> tuple[Field, ...]:
    """The body fields of a word with opcode ``op`` (any 4-bit opcode, in ``Op`` or not)."""
    return _BODIES[_checked("op", op, _OP.min, _OP.max)]


# --- encoding ---------------------------------------------------------------------------------
def _checked(name: str, value, lo: int, hi: int) -> int:
    try:
        v = index(value)
    except TypeError:
        v = None
    if v is None or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")
    return v


def encode(op, flags=0, **fields) -> int:
    """The 64-bit word of one instruction: ``op`` (any 4-bit opcode, ``Op`` or not), ``flags``
    and the body fields (``src``, ``dst``, ``n``, ``part``; missing ones are 0). Every field is
    range-checked; an unknown field is an error."""
    op = _checked("op", op, _OP.min, _OP.max)
    word = op << _OP.offset | _checked("flags", flags, _FLAGS.min, _FLAGS.max) << _FLAGS.offset
    if not _NAMES[op].issuperset(fields):
        raise ValueError(f"fields of op {op} must be among {[c[0] for c in _CODEC[op]]}, not "
                         f"{sorted(set(fields) - _NAMES[op])}")
    for name, offset, mask, lo, hi, _ in _CODEC[op]:
        v = fields.get(name, 0)
        if type(v) is not int or not lo <= v <= hi:     # the fast path: an int in range
            v = _checked(name, v, lo, hi)
        word |= (v & mask) << offset
    return word


def decode(word: int) -> dict:
    """A word's fields: ``{"op", "flags", ...body_fields(op)}`` (op kept as an int)."""
    if not isinstance(word, int) or not 0 <= word < (1 << INSTR_BITS):
        raise ValueError(f"word must be a {INSTR_BITS}-bit unsigned integer, not {word!r}")
    op = (word >> _OP.offset) & _OP.mask
    out = {"op": op, "flags": (word >> _FLAGS.offset) & _FLAGS.mask}
    for name, offset, mask, _, _, sign in _CODEC[op]:
        v = (word >> offset) & mask
        out[name] = v - 2 * sign if v & sign else v
    return out


# --- the rules, for decoded words -------------------------------------------------------------
def _spec(fields: dict, config: Config) -> OpSpec | None:
    if not isinstance(fields, dict) or "op" not in fields or "flags" not in fields:
        raise ValueError(f"fields must be a decoded word (``decode``), not {fields!r}")
    check_config(config)
    return OPS.get(fields["op"])


def _applied(spec: OpSpec | None, flags: int) -> list[Access]:
    return [] if spec is None else [a for a in spec.accesses if a.applies(flags)]


def _rows(a: Access, fields: dict) -> tuple[int, int]:
    lo = fields[a.field]
    if a.extent:
        return lo, lo + (fields["part"] + 1) * WINDOW_BLOCK
    return lo, lo + (1 if a.one_row else fields["n"])


def accesses(fields: dict, config: Config) -> list[tuple[Buffer, int, int, bool]]:
    """The buffer rows a decoded instruction reads and writes when it executes:
    ``[(buffer, lo, hi, is_write)]``, rows ``lo .. hi - 1``."""
    spec = _spec(fields, config)
    return [(a.buffer, *_rows(a, fields), a.write) for a in _applied(spec, fields["flags"])]


def conflict(a, b) -> bool:
    """Whether two ``accesses`` lists touch a common row of a buffer, at least one writing it
    (then the order of the two instructions matters)."""
    return any(buf1 == buf2 and (w1 or w2) and lo1 < hi2 and lo2 < hi1
               for buf1, lo1, hi1, w1 in a for buf2, lo2, hi2, w2 in b)


def static_cause(fields: dict, config: Config) -> Cause:
    """BAD_OPCODE or OUT_OF_RANGE as the word alone decides them (module docstring), else
    ``Cause.NONE``."""
    spec = _spec(fields, config)
    if spec is None:
        return Cause.BAD_OPCODE
    if spec.counted and fields["n"] == 0:
        return Cause.OUT_OF_RANGE
    if spec.needs is not None and spec.needs.rows(config) == 0:
        return Cause.OUT_OF_RANGE
    flags = fields["flags"]
    for a in spec.accesses:
        if not a.applies(flags):
            continue
        if a.unit is not None and not getattr(config, a.unit):
            return Cause.OUT_OF_RANGE
        if _rows(a, fields)[1] > a.buffer.rows(config):
            return Cause.OUT_OF_RANGE
        if a.parts is not None and fields["part"] >= a.parts(config):
            return Cause.OUT_OF_RANGE
    for flag, cause in spec.flag_causes:
        if flags & flag:
            return cause
    return Cause.NONE


def host_in_beats(fields: dict, config: Config) -> int:
    """Host-in beats the instruction takes when it executes (0 for an opcode not in ``Op``; a
    dropped instruction with ``HOST_DATA_BIT`` instead discards up to its ``last`` beat)."""
    spec = _spec(fields, config)
    return 0 if spec is None else spec.host_in.count(fields.get("n", 0), config)


def host_out_beats(fields: dict, config: Config) -> int:
    """Host-out beats the instruction sends when it executes (a dropped one sends none)."""
    spec = _spec(fields, config)
    return 0 if spec is None else spec.host_out.count(fields.get("n", 0), config)


def parts(op: int, flags: int, config: Config) -> int | None:
    """The number of valid ``part`` values of ``op`` with ``flags`` (``None``: part is
    ignored)."""
    check_config(config)
    for a in _applied(OPS.get(op), flags):
        if a.parts is not None:
            return a.parts(config)
    return None
