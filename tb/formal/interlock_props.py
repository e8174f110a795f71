# amaranth: UnusedElaboratable=no
"""The controller's interlocks (``hdl.controller.Controller``): bounded model checking at its
ports.

The golden model runs a program one instruction at a time; the controller overlaps them, and
its interlocks must rule out every hazard that sequential semantics forbid: no instruction
reads a buffer row before the write of an earlier instruction to that row has landed (read
after write), none writes a row before an earlier one has read it (write after read), and
writes to one row land in program order (write after write). The harness states this for the
unified buffer (``buffer="ub"``) or the accumulators (``"acc"``) from the controller's ports
alone: nothing inside it is named (the mutants name what they break).

**The program.** The solver offers any instruction words on ``cmd`` (within the stream rules;
the fields as wide as the buffers need, the rest of the word 0), assumed valid: opcodes of
``PROGRAM_OPS`` (all but those that address the absent weight and program memories), ranges
inside their buffers, ``n >= 1``, a valid ``part`` (``hdl.isa.static_cause`` NONE), and the
weight-tile rules (a MATMUL with NEW_TILE only when a requested tile is left, without it only
after a tile was taken, a READ_WEIGHTS only with room in the FIFO). The harness asserts that
the controller then reports no error. The host sends each host-data instruction's beats
(``hdl.isa.host_in_beats``) with ``last`` on the final one, whenever it likes; every other
input is free within its rules: the array's and the activation unit's handshakes and the host's
``ready`` in any cycle. Data play no part in the interlocks: the buffers' read data and the
beats' lanes are 0 (the payloads' stream rules are still checked).

**The environment of the core** (``hdl.core.Core``): ``results`` pulses ``array_latency``
cycles after each vector enters the array, and the activation unit returns one result per row
it takes, in order, a cycle later at the soonest. An accumulator write is the ``tag`` of a
vector entering the array: the core delays it by ``ahead = max(0, L - ACC_DATA_DELAY)`` cycles
into the accumulator's request (``hdl.core``), whose result a read sees ``ACC_WRITE_LATENCY``
cycles later (``hdl.accumulator``).

**Port streams.** Every row access shows at a port, and each port carries the accesses of one
kind of instruction, in program order (one engine, one job at a time): ``_STREAMS`` maps each
access of ``hdl.isa.OPS`` to its stream. The unified buffer: READ_HOST's writes (``ub_we`` with
no activation result taken that cycle), ACTIVATE's writes (``ub_we`` with one), MATMUL's reads
(``ub_rd0``), WRITE_HOST's (``ub_rd1``); the accumulators: the reads of ACTIVATE and WRITE_HOST
FROM_ACC (``acc_rd``, one port, one job at a time) and MATMUL's writes (``tag_valid``).

**The property.** ``AnyConst`` picks a row ``R``. As each instruction is taken, the harness
notes its access to ``R`` (if any) on its stream, numbered in program order; an access to ``R``
at a port takes the oldest one its stream owes. It asserts:

- **owed**: no stream accesses ``R`` unless an instruction taken owes it such an access;
- **order**: when a stream accesses ``R``, no conflicting access to ``R`` (one of the two a
  write) that an *earlier* instruction owes on another stream is still to come (a read and a
  write of a row in one cycle only where the gap below is 0);
- **landed**: it comes at least ``gap`` cycles after the last access to ``R`` of each
  conflicting stream (``_gaps``): unified buffer 1 (a row written in one cycle is read from the
  next; a read and a write of one row in one cycle is not allowed, ``hdl.unified_buffer``);
  accumulators: a read ``ahead + ACC_WRITE_LATENCY`` after a write (the request's result is in
  the memory), a write's request after a read (``1 - ahead``: 0 here, the same cycle allowed),
  two writes' requests ``ACC_REPEAT_GAP`` apart. These are the accumulator's rules that
  ``acc_props`` assumes: this proof is where the core keeps them.

Program order and time are all the property needs: each stream is in program order, so the
last access to ``R`` of a conflicting stream before an allowed access is an earlier
instruction's (a later one's would have failed **order** when it came).

**Covers**: each kind of hazard happens (``COVERS``): an access to ``R`` that, when its
instruction was taken, had an earlier conflicting access owed on another stream (the later
instruction waited for it): back-to-back dependent instructions, so the checks are not vacuous.

**Mutants** (``INTERLOCK_MUTANTS``): the design with one interlock removed (its overlap flag
tied to 0 in the netlist, ``observe.Harness.mutate``): read after write and write after read in
each buffer.
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Const, Cover, Mux, Signal, Value

from tpugen.hdl.accumulator import ACC_DATA_DELAY, ACC_REPEAT_GAP, ACC_WRITE_LATENCY
from tpugen.hdl.array import array_latency
from tpugen.hdl.config import Config
from tpugen.hdl.controller import Controller
from tpugen.hdl.isa import OPS, QUANT_BEATS, WINDOW_BLOCK, Beats, Buffer, Flag, Op
from tpugen.tb.formal.observe import Harness
from tpugen.tb.formal.stream_check import free_sink, free_source, stream_rules, transfer

__all__ = ["PROGRAM_OPS", "COVERS", "INTERLOCK_MUTANTS", "interlock_config",
           "interlock_harness"]

#: The stream of each access (op, buffer, write) of ``hdl.isa.OPS`` to the two buffers.
_STREAMS = {
    (Op.READ_HOST, Buffer.UB, True): "ub_w_hi",
    (Op.ACTIVATE, Buffer.UB, True): "ub_w_av",
    (Op.MATMUL, Buffer.UB, False): "ub_rd0",
    (Op.WRITE_HOST, Buffer.UB, False): "ub_rd1",
    (Op.ACTIVATE, Buffer.ACC, False): "acc_rd",
    (Op.WRITE_HOST, Buffer.ACC, False): "acc_rd",
    (Op.MATMUL, Buffer.ACC, True): "acc_w",
}
_BUFFER_STREAMS = {
    "ub": ("ub_w_hi", "ub_w_av", "ub_rd0", "ub_rd1"),
    "acc": ("acc_rd", "acc_w"),
}
_WRITES = {"ub_w_hi", "ub_w_av", "acc_w"}

#: The ops a program may use: those whose rows are in the unified buffer, the accumulators or
#: the parameter sets, or none (the weight and program memories are absent here), and that no
#: flag drops. Each must have its streams in ``_STREAMS``.
PROGRAM_OPS = tuple(op for op, spec in OPS.items()
                    if all(a.buffer in (Buffer.UB, Buffer.ACC, Buffer.QUANT)
                           for a in spec.accesses) and not getattr(spec, "flag_causes", ()))

#: The covers (``covers=True``): (name, buffer, earlier stream, later stream).
COVERS = (
    ("ub_raw_read_host_matmul", "ub", "ub_w_hi", "ub_rd0"),
    ("ub_raw_read_host_write_host", "ub", "ub_w_hi", "ub_rd1"),
    ("ub_war_matmul_read_host", "ub", "ub_rd0", "ub_w_hi"),
    ("ub_war_write_host_read_host", "ub", "ub_rd1", "ub_w_hi"),
    ("ub_waw_activate_read_host", "ub", "ub_w_av", "ub_w_hi"),
    ("acc_raw_matmul_activate", "acc", "acc_w", "acc_rd"),
    ("acc_war_activate_matmul", "acc", "acc_rd", "acc_w"),
    ("acc_waw_matmul_matmul", "acc", "acc_w", "acc_w"),
)

#: The mutants: an interlock's overlap flag tied to 0 in the netlist (``ov_<range>_<job>``, the
#: controller's names for them).
INTERLOCK_MUTANTS = {
    "ub_raw": ("ub", "ov_src_hi_ub"),        # MATMUL / WRITE_HOST vs a READ_HOST's rows
    "ub_war": ("ub", "ov_dst_mm_ub"),        # READ_HOST / ACTIVATE vs a MATMUL's rows
    "acc_raw": ("acc", "ov_src_drain"),      # ACTIVATE / WRITE_HOST vs MATMUL results in flight
    "acc_war": ("acc", "ov_dst_av_acc"),     # MATMUL vs an ACTIVATE's rows
}


def interlock_config(rows: int = 2, cols: int = 2, ub_rows: int = 4, acc_rows: int = 4) -> Config:
    """A small core: ``rows`` x ``cols`` int4, one weight tile, one parameter set."""
    return Config(rows=rows, cols=cols, operand="int4", acc_width=16, weight_fifo_depth=1,
                  ub_rows=ub_rows, acc_rows=acc_rows, quant_sets=1, counter_width=32)


def _ahead(config: Config) -> int:
    """Cycles from a vector's ``tag`` to its accumulator request (``hdl.core``)."""
    return max(0, array_latency(config) - ACC_DATA_DELAY)


def _gaps(config: Config) -> dict[tuple[str, str], int]:
    """The fewest cycles from an earlier instruction's event on a row to a later conflicting
    one's (earlier stream, later stream); see the module docstring."""
    ahead, out = _ahead(config), {}
    for buf, streams in _BUFFER_STREAMS.items():
        for a in streams:
            for b in streams:
                wa, wb = a in _WRITES, b in _WRITES
                if not (wa or wb):
                    continue
                if buf == "ub":
                    out[a, b] = 1
                elif wa and wb:
                    out[a, b] = ACC_REPEAT_GAP
                elif wa:
                    out[a, b] = ahead + ACC_WRITE_LATENCY
                else:
                    out[a, b] = 1 - ahead
    return out


def _host_beats(spec, n, config: Config):
    """The host-in beats of an instruction of ``spec`` with ``n`` (a value)."""
    return {Beats.N: n, Beats.N_TILES: n * config.rows,
            Beats.N_SETS: n * QUANT_BEATS}.get(spec.host_in)


def interlock_harness(buffer: str = "ub", config: Config | None = None, *,
                      mutant: str | None = None, covers: bool = False, window: int = 6,
                      ops=PROGRAM_OPS):
    """The harness for ``buffer`` (``"ub"`` or ``"acc"``) of ``config``
    (``interlock_config()``); ``window``: more than the accesses to ``R`` owed at once (their
    numbers are modulo ``2 * window``; asserted); ``ops``: the ops programs use (some of
    ``PROGRAM_OPS``)."""
    if buffer not in _BUFFER_STREAMS:
        raise ValueError(f"buffer must be one of {tuple(_BUFFER_STREAMS)}, not {buffer!r}")
    if mutant is not None and INTERLOCK_MUTANTS.get(mutant, (None,))[0] != buffer:
        raise ValueError(f"mutant must be one of the {buffer} ones of {tuple(INTERLOCK_MUTANTS)}, "
                         f"not {mutant!r}")
    cfg = config or interlock_config()
    ctrl = Controller(cfg)
    h = Harness()
    m, dut = h.m, h.observe(ctrl)
    if mutant is not None:
        h.mutate(f"connect -set {dut.name}.{INTERLOCK_MUTANTS[mutant][1]} 1'b0")
    rows = {"ub": cfg.ub_rows, "acc": cfg.acc_rows}[buffer]
    streams = _BUFFER_STREAMS[buffer]
    gaps = _gaps(cfg)
    if min(gaps.values()) < 0:
        raise ValueError(f"{cfg.name}: the array's latency lets an accumulator write come "
                         f"before an earlier read (not modelled here)")

    ops = tuple(ops)
    if not set(ops) <= set(PROGRAM_OPS):
        raise ValueError(f"ops must be among {PROGRAM_OPS}, not {ops!r}")
    for o in ops:       # (an op added to the ISA with rows in a buffer needs its port here)
        for a in OPS[o].accesses:
            if a.buffer in (Buffer.UB, Buffer.ACC) and (o, a.buffer, a.write) not in _STREAMS:
                raise ValueError(f"{o.name}: no port stream for its {a.buffer.name} access")
    _environment(m, ctrl, cfg)
    accept = transfer(ctrl.cmd)
    fields = ctrl.cmd.payload.body.mem
    is_op = {o: ctrl.cmd.payload.op == o for o in Op}
    _valid_program(m, ctrl, cfg, ops)
    hit, owed, waits = _row_checks(m, ctrl, rows, streams, gaps, accept, is_op, fields, ops,
                                   window)
    if covers:
        # An access that waited for an earlier conflicting one (owed when it was taken).
        for _, buf, s_i, s_j in COVERS:
            if buf == buffer:
                m.d.comb += Cover(hit[s_j] & (owed[s_j] != 0)
                                  & waits[s_j][0][streams.index(s_i)])
    return h


def _valid_program(m, ctrl: Controller, cfg: Config, ops) -> None:
    """Assume valid instructions on ``cmd`` (the module docstring), the host's framing, and
    assert that the controller reports no error."""
    accept = transfer(ctrl.cmd)
    fields, flags = ctrl.cmd.payload.body.mem, ctrl.cmd.payload.flags
    is_op = {o: ctrl.cmd.payload.op == o for o in Op}
    tiles_out = Signal(range(cfg.weight_fifo_depth + 1))     # requested, not yet taken
    taken = Signal()                                         # a tile was ever taken
    new_tile = (flags & Flag.NEW_TILE) != 0
    n = fields.n
    with m.If(ctrl.cmd.valid):
        m.d.comb += Assume(Cat(is_op[o] for o in ops).any())
        for o in ops:
            spec = OPS[o]
            with m.If(is_op[o]):
                if spec.counted:
                    m.d.comb += Assume(n != 0)
                for a in spec.accesses:
                    if a.unit is not None and not getattr(cfg, a.unit):
                        # (the unit is absent: the access's flags would be OUT_OF_RANGE)
                        m.d.comb += Assume(~_applies(a, flags))
                        continue
                    lo = flags if a.field == "flags" else fields[a.field]
                    size = (fields.part + 1) * WINDOW_BLOCK if a.extent else \
                        (1 if a.one_row else n)
                    ok = (lo + size) <= a.buffer.rows(cfg)
                    if a.parts is not None:
                        ok &= fields.part < a.parts(cfg)
                    m.d.comb += Assume(ok if a.when is None else ~_applies(a, flags) | ok)
        with m.If(is_op[Op.READ_WEIGHTS]):
            m.d.comb += Assume(tiles_out + n <= cfg.weight_fifo_depth)
        with m.If(is_op[Op.MATMUL]):
            m.d.comb += Assume(Mux(new_tile, tiles_out != 0, taken))
    with m.If(accept & is_op[Op.READ_WEIGHTS]):
        m.d.sync += tiles_out.eq(tiles_out + n)
    with m.Elif(accept & is_op[Op.MATMUL] & new_tile):
        m.d.sync += [tiles_out.eq(tiles_out - 1), taken.eq(1)]
    _host_framing(m, ctrl, cfg, accept, is_op, n, ops)
    m.d.comb += Assert(~ctrl.status.error, "a valid program reported an error")


def _row_checks(m, ctrl: Controller, rows: int, streams, gaps, accept, is_op, fields, ops,
                window: int):
    """The property at row ``R`` (the module docstring). Returns, per stream: its access to
    ``R`` now, its accesses owed, and the streams its oldest one waited for."""
    flags, n = ctrl.cmd.payload.flags, fields.n
    q_go = transfer(ctrl.q_out)
    ports = {
        "ub_w_hi": (ctrl.ub_we & ~q_go, ctrl.ub_waddr),
        "ub_w_av": (ctrl.ub_we & q_go, ctrl.ub_waddr),
        "ub_rd0": (ctrl.ub_rd0_en, ctrl.ub_rd0_addr),
        "ub_rd1": (ctrl.ub_rd1_en, ctrl.ub_rd1_addr),
        "acc_rd": (ctrl.acc_rd_en, ctrl.acc_rd_addr),
        "acc_w": (ctrl.tag_valid, ctrl.tag.addr),
    }
    row = AnyConst(range(rows))
    top = max(gaps.values()) + 1            # ages saturate here ("long ago")
    conflicts = {(a, b): a in _WRITES or b in _WRITES for a in streams for b in streams}
    hit = {s: ports[s][0] & (ports[s][1] == row) for s in streams}
    # The instruction taken now: its access to R (one stream of this buffer at most) gets a
    # number in program order (``seq``, modulo ``2 * window``: fewer than ``window`` are owed
    # at once, asserted).
    touch = {}
    for s in streams:
        on, lo = _stream_access(s, is_op, flags, fields, ops)
        touch[s] = accept & on & (lo <= row) & (row < lo + n)
    tw = (2 * window - 1).bit_length()
    seq = Signal(tw)
    m.d.sync += seq.eq(seq + Cat(*touch.values()).any())
    # Per stream: the numbers of its owed accesses to R, oldest first (``owed`` of them: two
    # at most, the engine's job and the instruction in the issue register; asserted), the
    # streams whose oldest owed access conflicts with it and was owed when it was taken
    # (``waits``, for the covers), and the cycles since its last access to R (``age``).
    owed, tags, waits, age = {}, {}, {}, {}
    for s in streams:
        owed[s] = Signal(range(3), name=f"owed_{s}")
        tags[s] = [Signal(tw, name=f"tag{k}_{s}") for k in range(2)]
        waits[s] = [Signal(len(streams), name=f"waits{k}_{s}") for k in range(2)]
        age[s] = Signal(range(top + 1), init=top, name=f"age_{s}")
    total = Signal(range(2 * len(streams) + 1))
    m.d.comb += total.eq(sum((owed[s] for s in streams), Const(0, len(total))))
    m.d.comb += Assert(total < window, "harness: too many accesses to one row owed")

    def older(a, b):
        """Number ``a`` was given before ``b`` (both owed: less than ``window`` apart)."""
        return ((b - a)[:tw] != 0) & ((b - a)[:tw] < window)

    for s in streams:
        with m.If(hit[s]):
            m.d.comb += Assert(owed[s] != 0, f"{s}: an access to a row no instruction owes")
            for x in streams:
                if not conflicts[x, s] or x == s:
                    continue
                ok_now = hit[x] if gaps[x, s] <= 0 else Const(0)
                m.d.comb += Assert(~((owed[x] != 0) & older(tags[x][0], tags[s][0]) & ~ok_now),
                                   f"{s}: before an earlier {x} access to its row")
            for x in streams:
                if conflicts[x, s] and gaps[x, s] > 0:
                    m.d.comb += Assert(age[x] >= gaps[x, s],
                                       f"{s}: within {gaps[x, s]} cycles of a {x} access")
    for s in streams:
        m.d.sync += age[s].eq(Mux(hit[s], 1, Mux(age[s] == top, top, age[s] + 1)))
        pop = hit[s] & (owed[s] != 0)
        m.d.comb += Assert(~(touch[s] & ~pop & (owed[s] == 2)),
                           "harness: three accesses to one row owed on a stream")
        now_waits = Cat((owed[x] != 0) & ~hit[x] & conflicts[x, s] for x in streams)
        with m.If(pop):
            m.d.sync += [tags[s][0].eq(tags[s][1]), waits[s][0].eq(waits[s][1])]
            with m.If(touch[s] & (owed[s] == 1)):
                m.d.sync += [tags[s][0].eq(seq), waits[s][0].eq(now_waits)]
            with m.If(touch[s] & (owed[s] == 2)):
                m.d.sync += [tags[s][1].eq(seq), waits[s][1].eq(now_waits)]
        with m.Elif(touch[s]):
            with m.If(owed[s] == 0):
                m.d.sync += [tags[s][0].eq(seq), waits[s][0].eq(now_waits)]
            with m.Else():
                m.d.sync += [tags[s][1].eq(seq), waits[s][1].eq(now_waits)]
        m.d.sync += owed[s].eq(owed[s] + touch[s] - pop)

    return hit, owed, waits


def _stream_access(stream: str, is_op, flags, fields, ops):
    """Whether the word's op has an access on ``stream`` (its flags applied), and its first
    row."""
    on, lo = Const(0), Const(0, 16)
    for (o, buf, write), name in _STREAMS.items():
        if name != stream or o not in ops:
            continue
        for a in OPS[o].accesses:
            if a.buffer is buf and a.write == write:
                hit = is_op[o] & _applies(a, flags)
                on, lo = on | hit, Mux(hit, fields[a.field], lo)
    return on, lo


def _applies(access, flags) -> Value:
    """``access.when`` (``hdl.isa.Access``) on a flags value: 1 when the access happens."""
    when = access.when
    if when is None:
        return Const(1)
    if not isinstance(when[0], tuple):      # a bare (flag, value), as ISA 2 wrote it
        when = (when,)
    out = Const(1)
    for flag, value in when:
        set_ = (flags & flag) != 0
        out &= set_ if value else ~set_
    return out


def _environment(m, ctrl: Controller, cfg: Config) -> None:
    """The core around the controller, free within its rules (the module docstring)."""
    # Instruction words of small fields (op, flags, src, dst, n, part; the rest zero): the
    # fields' high bits are constants, not facts the solver must learn.
    fw = max(cfg.ub_rows, cfg.acc_rows, cfg.weight_fifo_depth).bit_length()
    word = ctrl.cmd.payload
    m.d.comb += [ctrl.cmd.valid.eq(AnySeq(1)), word.op.eq(AnySeq(4)), word.flags.eq(AnySeq(4)),
                 word.body.mem.part.eq(AnySeq(1)),
                 *(word.body.mem[f].eq(AnySeq(fw)) for f in ("src", "dst", "n"))]
    stream_rules(m, ctrl.cmd, "cmd", check=Assume)
    for name in ("host_out", "w_out", "quant_w", "q_in", "act"):
        port = getattr(ctrl, name)
        free_sink(m, port)
        stream_rules(m, port, name)      # the controller keeps the stream rules
    # Data: the interlocks never look at it (constant rows keep the problem small; the
    # payloads' stream rules are still checked).
    for v in (ctrl.ub_rd0_data, ctrl.ub_rd1_data, ctrl.acc_rd_data):
        m.d.comb += Value.cast(v).eq(0)
    m.d.comb += [ctrl.clear_error.eq(0), ctrl.clear_counters.eq(0),
                 ctrl.snap_hold.eq(0), ctrl.snap_next.eq(0)]
    # The array: a result ``array_latency`` cycles after each vector.
    latency = array_latency(cfg)
    line = Signal(latency)
    m.d.sync += line.eq(Cat(transfer(ctrl.act), line[:-1]))
    m.d.comb += ctrl.results.eq(line[-1])
    # The activation unit: one result per row taken, in order, a cycle later at the soonest.
    inside = Signal(4)
    m.d.sync += inside.eq(inside + transfer(ctrl.q_in) - transfer(ctrl.q_out))
    free_source(m, ctrl.q_out, "q_out")
    m.d.comb += Assume(Value.cast(ctrl.q_out.payload) == 0)
    with m.If(ctrl.q_out.valid):
        m.d.comb += Assume(inside != 0)
    m.d.comb += Assert(inside != 15)


def _host_framing(m, ctrl: Controller, cfg: Config, accept, is_op, n, ops) -> None:
    """The host sends each host-data instruction's beats, ``last`` on its final one: a queue of
    the beat counts of the instructions taken (two at most: the host-in engine's job and the
    one in the issue register; asserted), the first one counting down."""
    most = max(cfg.ub_rows, cfg.weight_fifo_depth * cfg.rows, cfg.quant_sets * QUANT_BEATS)
    left = [Signal(range(most + 1), name=f"host_left{k}") for k in range(2)]
    size = Signal(range(3))
    beats = Signal.like(left[0])
    data_ops = [o for o in ops if OPS[o].host_in is not Beats.NONE]
    for o in data_ops:
        with m.If(is_op[o]):
            m.d.comb += beats.eq(_host_beats(OPS[o], n, cfg))
    push = accept & Cat(is_op[o] for o in data_ops).any()
    beat = ctrl.host_in.payload
    go = transfer(ctrl.host_in)
    pop = go & beat.last
    free_source(m, ctrl.host_in, "host_in")
    with m.If(ctrl.host_in.valid):
        m.d.comb += [Assume(size != 0), Assume(beat.last == (left[0] == 1)),
                     Assume(Value.cast(beat.data) == 0)]
    m.d.comb += Assert(~(push & ~pop & (size == 2)), "harness: three host-data instructions")
    with m.If(pop):
        m.d.sync += left[0].eq(Mux(push & (size == 1), beats, left[1]))
        with m.If(push & (size == 2)):
            m.d.sync += left[1].eq(beats)
        with m.If(~push):
            m.d.sync += size.eq(size - 1)
    with m.Else():
        with m.If(go):
            m.d.sync += left[0].eq(left[0] - 1)
        with m.If(push):
            m.d.sync += size.eq(size + 1)
            with m.If(size == 0):
                m.d.sync += left[0].eq(beats)
            with m.Else():
                m.d.sync += left[1].eq(beats)
