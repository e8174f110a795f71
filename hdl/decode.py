"""The controller's decode stage (``hdl.controller.Controller``): what the issue stage needs,
computed from an instruction word alone on its way into the issue register (the op one-hot,
``src + n`` and ``dst + n`` in row-number widths, the BAD_OPCODE / OUT_OF_RANGE cause, the
engines' job kinds and the host-in beat count), by the rules of ``hdl.isa.OPS``."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data

from tpugen.hdl.config import Config
from tpugen.hdl.host_in import HostInJob, host_in_count_bits
from tpugen.hdl.host_out import HostOutJob
from tpugen.hdl.isa import (
    INSTR_LAYOUT,
    MEM_FIELDS,
    OPS,
    QUANT_BEATS,
    WINDOW_BLOCK,
    Beats,
    Cause,
    Flag,
    Op,
    has_host_data,
)
from tpugen.hdl.layouts import acc_bits, ub_bits

__all__ = ["RANGE_FIELDS", "decoded_layout", "decode_stage", "flag_test"]

_BLOCK_SHIFT = WINDOW_BLOCK.bit_length() - 1
assert WINDOW_BLOCK == 1 << _BLOCK_SHIFT

#: The word's fields that start row ranges (``hdl.isa.Access.field``), in word order.
RANGE_FIELDS = tuple(f.name for f in MEM_FIELDS
                     if any(a.field == f.name for s in OPS.values() for a in s.accesses))


def flag_test(flags, when):
    """``hdl.isa.Access.when`` on a flags value: 1 when the access happens."""
    if when is None:
        return Const(1)
    return Cat(*((flags & flag) != 0 if value else (flags & flag) == 0
                 for flag, value in when)).all()


def range_bits(config: Config) -> int:
    """Bits of a row number or range end in any addressed buffer or memory."""
    return max(ub_bits(config), acc_bits(config), config.weight_tiles.bit_length(),
               config.program_words.bit_length())


def decoded_layout(config: Config) -> data.StructLayout:
    """An instruction in the issue register: the word and what decode precomputed from it."""
    aw = max(ub_bits(config), acc_bits(config))
    return data.StructLayout({
        "word": INSTR_LAYOUT,
        # The op, one-hot (all zero when the register is empty).
        "is_": data.StructLayout({o.name.lower(): 1 for o in Op}),
        "cause": Cause.as_shape(),   # BAD_OPCODE or OUT_OF_RANGE (from the word), else NONE
        "bad": 1,            # ``cause`` is set (and the register holds an instruction)
        "host_data": 1,      # the opcode has ``HOST_DATA_BIT``
        # The host-in job of an instruction that is not dropped, and the host-out job
        # (``HostInJob``, ``HostOutJob``).
        "hi_kind": 3,
        "ho_kind": 2,
        # n, one-hot over 1 .. weight_fifo_depth (READ_WEIGHTS: the tiles asked for)
        "n_is": config.weight_fifo_depth + 1,
        # src + n, dst + n: valid when the ranges are in their buffers
        **{f"{x}_end": aw for x in RANGE_FIELDS},
        "count": host_in_count_bits(config),   # host-in beats (``hdl.isa.OpSpec.host_in``)
        "n_big": 1,          # n > weight_fifo_depth (READ_WEIGHTS then overflows)
    })


def _out_of_range(m: Module, config: Config, word, end: dict, high: dict) -> list:
    """OUT_OF_RANGE (``hdl.isa.static_cause``) of ``word``, as terms whose OR is the cause: per
    op, n == 0 when it counts, each range it touches past its buffer (``end``: the ranges'
    ends, ``high``: a field or ``n`` has bits past both buffers), part past the parts of the
    rows it slices. Each condition is computed once and gated by the ops (and flags) it applies
    to (a function of the op and flag bits alone, ready early), so the range compares are two
    gates from ``bad``."""
    op, flags, mem = word.op, word.flags, word.body.mem
    n = mem.n
    relevant = {}     # condition (a hashable key) -> (its value, [when it applies])
    cache = {}

    def condition(key, make):
        if key not in cache:
            cache[key] = Signal(name="oor_" + "_".join(str(k) for k in key))
            m.d.comb += cache[key].eq(make())
        return cache[key]

    for spec in OPS.values():
        is_op = op == spec.op
        found = []
        if spec.needs is not None and spec.needs.rows(config) == 0:
            found.append((Const(1), is_op))
        if spec.counted:
            found.append((condition(("n", "zero"), lambda: n == 0), is_op))
        for a in spec.accesses:
            if a.field == "flags":          # one row: the flags name it
                rows_ = a.buffer.rows(config)
                found.append((condition(("flags", rows_), lambda r=rows_: flags >= r),
                              is_op))
                continue
            rows_ = a.buffer.rows(config)
            when = is_op & flag_test(flags, a.when)
            if a.unit is not None and not getattr(config, a.unit):
                found.append((Const(1), when))
                continue
            if a.extent:        # a window MATMUL's extent (``hdl.window``)
                found.append((condition(("extent", rows_), lambda r=rows_:
                                        high["extent"] | (end["extent"] > r)), when))
                continue
            past = condition((a.field, rows_), lambda x=a.field, r=rows_:
                             high[x] | (end[x] > r))
            found.append((past, when))
            if a.parts is not None:
                parts = a.parts(config)
                found.append((condition(("part", parts), lambda p=parts: mem.part >= p),
                              when))
        for cond, when in found:
            relevant.setdefault(id(cond), (cond, []))[1].append(when)
    return [cond & Cat(*whens).any() for cond, whens in relevant.values()]


def decode_stage(m: Module, config: Config, word, valid):
    """The decode stage's combinational part, added to ``m``: the ``decoded_layout`` value of
    ``word``, from the rules in ``hdl.isa.OPS`` (``is_`` and ``bad`` all zero unless
    ``valid``)."""
    r, depth = config.rows, config.weight_fifo_depth
    aw = max(ub_bits(config), acc_bits(config))
    out = Signal(decoded_layout(config))
    op, flags, mem = word.op, word.flags, word.body.mem
    n = mem.n
    m.d.comb += out.word.eq(word)
    known = Cat(*(op == o for o in Op)).any()

    # Ends in rw + 1 bits; a field with a bit at or above rw is past every buffer (the issue
    # stage keeps aw bits: the UB and ACC ranges).
    rw = range_bits(config)
    end, high = {}, {}
    for x in RANGE_FIELDS:
        end[x] = Signal(rw + 1, name=f"{x}_end")
        m.d.comb += [end[x].eq(mem[x][:rw] + n[:rw]), out[f"{x}_end"].eq(end[x][:aw])]
        high[x] = (mem[x][rw:] != 0) | (n[rw:] != 0)
    if config.window:   # MATMUL WINDOW: src's range is its extent, (part + 1) blocks
        end["extent"] = Signal(max(rw, 15) + 1, name="extent_end")
        m.d.comb += end["extent"].eq(mem.src[:rw] + ((mem.part + 1) << _BLOCK_SHIFT))
        high["extent"] = mem.src[rw:] != 0
        with m.If((op == Op.MATMUL) & ((flags & Flag.WINDOW) != 0)):
            m.d.comb += out.src_end.eq(end["extent"][:aw])
    bad = _out_of_range(m, config, word, end, high)
    flagged = [(is_op & ((flags & flag) != 0), cause) for spec in OPS.values()
               for is_op in [op == spec.op] for flag, cause in spec.flag_causes]
    with m.If(~known):
        m.d.comb += out.cause.eq(Cause.BAD_OPCODE)
    with m.Elif(Cat(*bad).any()):
        m.d.comb += out.cause.eq(Cause.OUT_OF_RANGE)
    for cond, cause in flagged:
        with m.Elif(cond):
            m.d.comb += out.cause.eq(cause)
    err = ~known | Cat(*bad).any() | Cat(*(c for c, _ in flagged)).any()
    host_data = has_host_data(op)
    for o in Op:
        m.d.comb += getattr(out.is_, o.name.lower()).eq(valid & (op == o))
    m.d.comb += [out.bad.eq(valid & err), out.host_data.eq(host_data)]
    with m.If(op == Op.READ_WEIGHTS):
        m.d.comb += out.hi_kind.eq(HostInJob.READ_WEIGHTS)
    with m.Elif(op == Op.STORE_WEIGHTS):
        m.d.comb += out.hi_kind.eq(HostInJob.STORE_WEIGHTS)
    with m.Elif(op == Op.LOAD_WEIGHTS):
        m.d.comb += out.hi_kind.eq(HostInJob.LOAD_WEIGHTS)
    with m.Elif(op == Op.READ_QUANT):
        m.d.comb += out.hi_kind.eq(HostInJob.READ_QUANT)
    with m.Else():
        m.d.comb += out.hi_kind.eq(HostInJob.READ_HOST)
    with m.If(op == Op.SYNC):
        m.d.comb += out.ho_kind.eq(HostOutJob.SYNC)
    with m.Elif(op == Op.READ_COUNTERS):
        m.d.comb += out.ho_kind.eq(HostOutJob.COUNTERS)
    with m.Elif((flags & Flag.FROM_ACC) != 0):
        m.d.comb += out.ho_kind.eq(HostOutJob.FROM_ACC)
    with m.Else():
        m.d.comb += out.ho_kind.eq(HostOutJob.FROM_UB)
    m.d.comb += out.n_is.eq(Cat(n == k for k in range(depth + 1)))

    # Host-in beats: n rows, or n tiles of R rows (n * R by shifts and adds; only n <=
    # depth matters for the FIFO, larger n overflows it and is dropped; n <= weight_tiles for
    # the weight memory). LOAD_WEIGHTS: the tile rows it moves, n * R, too.
    tw = max(depth, config.weight_tiles).bit_length()
    tiles = n[:tw]
    times_r = sum((tiles << k for k in range(r.bit_length()) if (r >> k) & 1), Const(0))
    sets = n[:config.quant_sets.bit_length()]   # only n <= quant_sets is in range
    times_q = sum((sets << k for k in range(QUANT_BEATS.bit_length())
                   if (QUANT_BEATS >> k) & 1), Const(0))
    count = n
    for spec in OPS.values():
        if spec.host_in is Beats.N_TILES:
            count = Mux(op == spec.op, times_r, count)
        elif spec.host_in is Beats.N_SETS:
            count = Mux(op == spec.op, times_q, count)
        elif spec.host_in not in (Beats.NONE, Beats.N):
            raise NotImplementedError(f"host-in beats {spec.host_in} of {spec.op.name}")
    count = Mux(op == Op.LOAD_WEIGHTS, times_r, count)
    m.d.comb += [
        out.n_big.eq(n > depth),
        out.count.eq(count),
    ]
    return out
