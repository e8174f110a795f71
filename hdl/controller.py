"""The controller: decodes the instruction stream and dispatches it to four engines, in order,
with interlocks that keep every valid program's results equal to sequential execution."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.accumulator import ACC_DATA_DELAY
from tpugen.hdl.activate_engine import ActivateEngine
from tpugen.hdl.activation import acc_row_layout, act_in_layout, q_row_layout
from tpugen.hdl.array import act_layout, array_latency, weight_layout
from tpugen.hdl.config import Config
from tpugen.hdl.counter_snapshot import CounterSnapshot
from tpugen.hdl.host_in import HostInEngine, HostInJob, host_in_count_bits
from tpugen.hdl.host_out import HostOutEngine, HostOutJob
from tpugen.hdl.isa import (
    HOST_DATA_BIT,
    INSTR_LAYOUT,
    MEM_FIELDS,
    OPS,
    QUANT_BEATS,
    Access,
    Beats,
    Buffer,
    Cause,
    Flag,
    Op,
)
from tpugen.hdl.layouts import (
    STATUS_COUNTERS,
    STATUS_LAYOUT,
    acc_bits,
    host_in_layout,
    host_out_layout,
    ub_bits,
)
from tpugen.hdl.matmul_engine import MatmulEngine, acc_tag_layout
from tpugen.hdl.quant_params import quant_write_layout
from tpugen.hdl.unified_buffer import ub_row_layout

__all__ = ["Controller", "ACC_DRAIN"]

#: The drain interlock holds readers of a MATMUL's accumulator rows for ``max(L,
#: ACC_DATA_DELAY) + ACC_DRAIN`` cycles after its last row entered the array (L the array's
#: latency): its last result is written in cycle ``max(L, ACC_DATA_DELAY)`` after that row
#: entered (``hdl.core``), and a reader's first read comes two cycles after it issues (the
#: engine starts the cycle after issue, then reads), one cycle after the write.
ACC_DRAIN = 0


#: The engine that runs each op (the others have none).
_ENGINE = {Op.READ_HOST: "hi", Op.READ_WEIGHTS: "hi", Op.READ_QUANT: "hi", Op.MATMUL: "mm",
           Op.ACTIVATE: "av", Op.WRITE_HOST: "ho"}

#: Buffers with one read port: instructions that read them run one at a time.
_ONE_READ_PORT = {Buffer.ACC}

#: The word's fields that start row ranges (``hdl.isa.Access.field``), in word order.
_RANGE_FIELDS = tuple(f.name for f in MEM_FIELDS
                      if any(a.field == f.name for s in OPS.values() for a in s.accesses))

#: The row ranges of the jobs in flight: name: (engine, op, field). An engine holds one job;
#: ``drain`` is the MATMUL results still on their way to the accumulators (part of the matmul
#: engine: MATMULs reach the accumulators in program order).
_IN_FLIGHT = {
    "hi_ub": ("hi", Op.READ_HOST, "dst"),
    "av_ub": ("av", Op.ACTIVATE, "dst"),
    "mm_ub": ("mm", Op.MATMUL, "src"),
    "ho": ("ho", Op.WRITE_HOST, "src"),
    "mm_acc": ("mm", Op.MATMUL, "dst"),
    "av_acc": ("av", Op.ACTIVATE, "src"),
    "drain": ("mm", Op.MATMUL, "dst"),
}


def _interlocks() -> list[tuple[Op, Access, str, Buffer, bool]]:
    """What an issuing instruction waits for, from ``hdl.isa.OPS``: ``(op, access, range,
    buffer, rows)`` for each access of ``op`` and each access (in ``buffer``) of an in-flight
    job of another engine (``_IN_FLIGHT``; an op's own engine must be idle anyway) in the same
    buffer. ``rows``: one of them writes, so the op waits while their rows overlap; else they
    share the buffer's one read port (``_ONE_READ_PORT``) and the op waits while that job
    reads. The parameter sets (``Buffer.QUANT``) are interlocked whole (``Controller``)."""
    out = []
    for spec in OPS.values():
        for a in spec.accesses:
            if a.buffer is Buffer.QUANT:
                continue
            for name, (engine, op, field) in _IN_FLIGHT.items():
                if engine == _ENGINE.get(spec.op):
                    continue
                for b in OPS[op].accesses:
                    if b.field != field or b.buffer != a.buffer:
                        continue
                    if a.write or b.write:
                        out.append((spec.op, a, name, b.buffer, True))
                    elif a.buffer in _ONE_READ_PORT:
                        out.append((spec.op, a, name, b.buffer, False))
    return out


def _overlap(a_lo, a_hi, b_lo, b_hi):
    return (a_lo < b_hi) & (b_lo < a_hi)


def _flag_test(flags, when):
    """``hdl.isa.Access.when`` on a flags value: 1 when the access happens."""
    if when is None:
        return Const(1)
    flag, value = when
    return (flags & flag) != 0 if value else (flags & flag) == 0


def _decoded_layout(config: Config) -> data.StructLayout:
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
        "hi_kind": 2,
        "ho_kind": 2,
        # n, one-hot over 1 .. weight_fifo_depth (READ_WEIGHTS: the tiles asked for)
        "n_is": config.weight_fifo_depth + 1,
        # src + n, dst + n: valid when the ranges are in their buffers
        **{f"{x}_end": aw for x in _RANGE_FIELDS},
        "count": host_in_count_bits(config),   # host-in beats (``hdl.isa.OpSpec.host_in``)
        "n_big": 1,          # n > weight_fifo_depth (READ_WEIGHTS then overflows)
    })


class Controller(wiring.Component):
    """Instruction dispatch, the engines, the sticky error and the counters.

    Pipeline: ``cmd`` -> decode -> the issue register -> issue. ``cmd.ready`` is high while
    the issue register can take a word (it is empty or issues: a combinational function of the
    issue decision, which comes from registers), so a command is taken in the cycle it is
    offered unless the issue register holds a blocked instruction. Decode computes from the word
    alone, on its way into the issue register: the op one-hot, ``src + n`` and ``dst + n`` (in
    row-number widths, ``hdl.layouts.ub_bits`` / ``acc_bits``: the fields' high bits are checked
    once), the BAD_OPCODE / OUT_OF_RANGE cause and the host-in beat count (``n * R`` by shifts
    and adds); its ranges are compared with the engines' jobs as they will be in the next cycle
    (registered overlap flags). An instruction taken in cycle t can issue in cycle t + 1 at the
    earliest, and instructions issue one per cycle while nothing blocks them and commands come
    (a blocked instruction waits in the issue register, and ``cmd.ready`` drops until the
    block clears). An engine starts the cycle after its instruction issues.

    Issue takes the instruction in the issue register when its engine is free and it touches no
    rows that an in-flight instruction of another engine touches in a conflicting way (read
    after write, write after read, write after write, per buffer; ``_interlocks`` derives the
    pairs from the rows each op reads and writes, ``hdl.isa.OPS``):
      READ_HOST   its UB rows vs. MATMUL, ACTIVATE, WRITE_HOST reading / writing them.
      MATMUL      its UB rows vs. READ_HOST / ACTIVATE writing them; its ACC rows vs.
                  ACTIVATE / WRITE_HOST reading them. MATMULs follow each other through the
                  array in order, so accumulations into the same rows need no interlock.
      ACTIVATE    its ACC rows vs. MATMUL results not yet written (the issuing MATMUL and those
                  still in the array); its UB rows vs. every UB reader and writer; it shares the
                  ACC read port with WRITE_HOST FROM_ACC (one at a time).
      WRITE_HOST  its rows vs. writers of them (and the ACC read port as above).
      READ_QUANT  waits for ACTIVATE to finish (its rows read parameter sets in the unit); an
                  ACTIVATE waits while a READ_QUANT runs (the parameter sets as a whole).
      SYNC, READ_COUNTERS  wait for everything before them to finish and be counted: every
                  engine idle, no MATMUL result in flight, no retirement still to be added to
                  the counters, in the cycle before and with nothing issued then (so they issue
                  two cycles after the last engine's ``done`` at the soonest). Their beat
                  reports the error cause and the counters as they are in the cycle they issue.
    Issue is in program order; the issue decision uses registers only (the overlap flags, the
    engines' busy flags, the weight-tile count).
    Errors (``hdl.isa.Cause``) drop the instruction at issue, record the first cause (sticky
    until ``clear_error``), and when the opcode has ``HOST_DATA_BIT``, discard its host-in data
    up to its ``last`` beat (issuing once the host-in engine is free).

    Counters (``status``, 64 bits each): every event is registered first and added the cycle
    after, so a counter shows an event two cycles after the cycle it happened in
    (``clear_counters`` also drops the registered events). RETIRED counts an instruction when
    its engine's ``done`` pulses, at issue for a dropped one or a NOP.
    ``status.busy``: a command is offered or held, an engine or MATMUL result is in flight, or
    a retirement is not yet counted.

    Ports: ``cmd`` (64-bit instruction words), ``host_in``, ``host_out``; the engines' memory
    ports ``ub_*`` (one write, two reads), ``acc_rd_*``; ``act`` (to the array) with ``tag`` /
    ``tag_valid`` (to be delayed by the array latency), ``results`` (a pulse per array output
    vector, for the drain tracking); ``w_out`` (to the weight FIFO); ``q_in`` / ``q_out`` /
    ``quant_w`` (the activation unit and its parameter sets); ``status``; ``clear_error``,
    ``clear_counters``; the counter snapshot's ``snap_hold``, ``snap_next`` (in),
    ``snap_chunk``, ``snap_busy`` (out; ``hdl.counter_snapshot``, shared with READ_COUNTERS:
    see ``hdl.core.Core``).
    """

    def __init__(self, config: Config):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        super().__init__({
            "cmd": In(stream.Signature(INSTR_LAYOUT)),
            "host_in": In(stream.Signature(host_in_layout(config))),
            "host_out": Out(stream.Signature(host_out_layout(config))),
            "ub_we": Out(1),
            "ub_waddr": Out(16),
            "ub_wdata": Out(ub_row_layout(config)),
            "ub_rd0_en": Out(1),
            "ub_rd0_addr": Out(16),
            "ub_rd0_data": In(ub_row_layout(config)),
            "ub_rd1_en": Out(1),
            "ub_rd1_addr": Out(16),
            "ub_rd1_data": In(ub_row_layout(config)),
            "acc_rd_en": Out(1),
            "acc_rd_addr": Out(16),
            "acc_rd_data": In(acc_row_layout(config)),
            "act": Out(stream.Signature(act_layout(config))),
            "tag_valid": Out(1),
            "tag": Out(acc_tag_layout(config)),
            "results": In(1),
            "w_out": Out(stream.Signature(weight_layout(config))),
            "q_in": Out(stream.Signature(act_in_layout(config))),
            "q_out": In(stream.Signature(q_row_layout(config))),
            "quant_w": Out(stream.Signature(quant_write_layout(config))),
            "status": Out(STATUS_LAYOUT),
            "clear_error": In(1),
            "clear_counters": In(1),
            "snap_hold": In(1),
            "snap_next": In(1),
            "snap_chunk": Out(16),
            "snap_busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        depth = cfg.weight_fifo_depth
        uw, xw = ub_bits(cfg), acc_bits(cfg)
        m.submodules.hi = hi = HostInEngine(cfg)
        m.submodules.mm = mm = MatmulEngine(cfg)
        m.submodules.av = av = ActivateEngine(cfg)
        m.submodules.ho = ho = HostOutEngine(cfg)

        # Engines to the outside.
        wiring.connect(m, wiring.flipped(self.host_in), hi.host_in)
        wiring.connect(m, hi.w_out, wiring.flipped(self.w_out))
        wiring.connect(m, hi.quant_w, wiring.flipped(self.quant_w))
        wiring.connect(m, mm.act, wiring.flipped(self.act))
        wiring.connect(m, av.act_i, wiring.flipped(self.q_in))
        wiring.connect(m, wiring.flipped(self.q_out), av.act_o)
        wiring.connect(m, ho.host_out, wiring.flipped(self.host_out))
        m.d.comb += [
            self.ub_we.eq(hi.ub_we | av.ub_we),
            self.ub_waddr.eq(hi.ub_addr),
            self.ub_wdata.eq(hi.ub_data),
            # The activation results have the UB write port first: their grant is constant, so no
            # combinational path runs from host-in data into the activation pipeline's enable
            # (host-in's grant comes from the activate engine's registers).
            av.ub_grant.eq(1),
            hi.ub_grant.eq(~av.ub_we),
            self.ub_rd0_en.eq(mm.ub_rd_en),
            self.ub_rd0_addr.eq(mm.ub_rd_addr),
            mm.ub_rd_data.eq(self.ub_rd0_data),
            self.ub_rd1_en.eq(ho.ub_rd_en),
            self.ub_rd1_addr.eq(ho.ub_rd_addr),
            ho.ub_rd_data.eq(self.ub_rd1_data),
            self.acc_rd_en.eq(av.acc_rd_en | ho.acc_rd_en),
            self.acc_rd_addr.eq(av.acc_rd_addr),
            av.acc_rd_data.eq(self.acc_rd_data),
            ho.acc_rd_data.eq(self.acc_rd_data),
            self.tag_valid.eq(mm.tag_valid),
            self.tag.eq(mm.tag),
        ]
        with m.If(av.ub_we):
            m.d.comb += [self.ub_waddr.eq(av.ub_addr), self.ub_wdata.eq(av.ub_data)]
        with m.If(ho.acc_rd_en):
            m.d.comb += self.acc_rd_addr.eq(ho.acc_rd_addr)

        # MATMUL results still on their way to the accumulators: the issuing MATMUL's rows, and
        # the union of finished MATMULs' rows until the drain is over (``ACC_DRAIN``).
        drain_cycles = max(array_latency(cfg), ACC_DATA_DELAY) + ACC_DRAIN
        drain = Signal(range(drain_cycles + 1))
        draining = Signal()                       # drain != 0, as a register
        drain_lo, drain_hi = Signal(xw, name="drain_lo"), Signal(xw, name="drain_hi")
        in_array = Signal(range(array_latency(cfg) + 2))
        arrived = Signal(init=1)                  # in_array == 0, as a register
        with m.If(mm.done):
            m.d.sync += [drain.eq(drain_cycles), draining.eq(1)]
            with m.If(~draining):
                m.d.sync += [drain_lo.eq(mm.acc_lo), drain_hi.eq(mm.acc_hi)]
            with m.Else():
                m.d.sync += [drain_lo.eq(_min(drain_lo, mm.acc_lo)),
                             drain_hi.eq(_max(drain_hi, mm.acc_hi))]
        with m.Elif(draining):
            m.d.sync += [drain.eq(drain - 1), draining.eq(drain != 1)]
        in_array_next = in_array + mm.tag_valid - self.results
        m.d.sync += [in_array.eq(in_array_next), arrived.eq(in_array_next == 0)]

        # Decode into the issue register ``d``; it advances when it issues (or is empty).
        dec = _decoded_layout(cfg)
        new = self._decode(m, self.cmd.payload, self.cmd.valid)
        d, d_valid = Signal(dec, name="d"), Signal(name="d_valid")
        issue = Signal(attrs={"keep": 1})   # (kept: one net for the engines and the FIFO)
        advance = ~d_valid | issue
        m.d.comb += self.cmd.ready.eq(advance)
        with m.If(advance):
            m.d.sync += [d.eq(new), d_valid.eq(self.cmd.valid)]

        # The interlocks (``_interlocks``, from ``hdl.isa.OPS``) compare the instruction in the
        # issue register with the jobs in flight: ``ranges`` are the jobs' row registers,
        # ``active[(range, buffer)]`` says that the engine holds a job with that access.
        aw = max(uw, xw)
        engine_busy = {"hi": hi.busy, "mm": mm.busy, "av": av.busy, "ho": ho.busy}
        ranges = {"hi_ub": (hi.ub_lo, hi.ub_hi), "av_ub": (av.ub_lo, av.ub_hi),
                  "mm_ub": (mm.ub_lo, mm.ub_hi), "ho": (ho.lo, ho.hi),
                  "mm_acc": (mm.acc_lo, mm.acc_hi), "av_acc": (av.acc_lo, av.acc_hi)}
        ub, acc = Buffer.UB, Buffer.ACC
        active = {("hi_ub", ub): hi.writes_ub, ("av_ub", ub): av.busy, ("mm_ub", ub): mm.busy,
                  ("ho", ub): ho.reads_ub, ("ho", acc): ho.reads_acc, ("mm_acc", acc): mm.busy,
                  ("av_acc", acc): av.busy, ("drain", acc): draining}
        interlocks = _interlocks()

        def rows(x, field):
            """Range ``field`` (src / dst) of a decoded instruction: (lo, end)."""
            return x.word.body.mem[field][:aw], x[f"{field}_end"]

        # The drain range next cycle: the union (hull) of its rows and a finishing MATMUL's.
        def drain_overlap(lo, hi_):
            below_d, below_m = lo < drain_hi, lo < mm.acc_hi
            above_d, above_m = drain_lo < hi_, mm.acc_lo < hi_
            joined = Mux(draining, (below_d | below_m) & (above_d | above_m), below_m & above_m)
            return Mux(mm.done, joined, below_d & above_d)

        # Range overlaps of the instruction in the issue register with the jobs in flight, one
        # cycle ahead: ``ov[(x, e)]`` (a register) is "range x (src / dst) of the instruction in
        # the issue register overlaps job range e" for this cycle's contents of both, valid
        # while the job is active (each overlap is gated by ``active``). When the issue register
        # advances, the command being decoded is compared with each engine's job: an idle
        # engine's job registers load the issue register's fields (they become its job if it
        # issues), a busy engine's hold. Otherwise the overlaps hold: a busy engine's range does
        # not change, and an idle one stays idle while nothing issues. The drain range is
        # compared with its value in the next cycle.
        ov = {}
        for x, e in dict.fromkeys((a_.field, e) for _, a_, e, _, by_rows in interlocks
                                  if by_rows):
            ov[x, e] = Signal(name=f"ov_{x}_{e}")
            new_lo, new_hi = rows(new, x)
            if e == "drain":
                m.d.sync += ov[x, e].eq(Mux(advance, drain_overlap(new_lo, new_hi),
                                            drain_overlap(*rows(d, x))))
                continue
            engine, _, field = _IN_FLIGHT[e]
            e_lo, e_hi = ranges[e]
            f_lo, f_hi = rows(d, field)
            with m.If(advance):
                m.d.sync += ov[x, e].eq(Mux(~engine_busy[engine],
                                            _overlap(new_lo, new_hi, f_lo, f_hi),
                                            _overlap(new_lo, new_hi, e_lo, e_hi)))

        # Issue stage: everything from registers.
        word, is_ = d.word, d.is_
        flags = word.flags
        mem = word.body.mem
        src, dst, n = mem.src, mem.dst, mem.n
        src_end, dst_end = d.src_end, d.dst_end
        new_tile = (flags & Flag.NEW_TILE) != 0
        tw = depth.bit_length()                 # n[:tw] is n when n <= depth
        tiles_out = Signal(range(depth + 1))    # requested, not yet taken
        tile_taken = Signal()                   # a tile was ever taken
        # The errors found at issue: a MATMUL without a tile (it is dropped at once: no data),
        # a READ_WEIGHTS of more tiles than the FIFO has room for (its data is discarded).
        tiles_zero = Signal(init=1)             # tiles_out == 0 (a register)
        no_tile = ~d.bad & is_.matmul & Mux(new_tile, tiles_zero, ~tile_taken)
        overflow = ~d.bad & is_.read_weights & (d.n_big | Cat(
            d.n_is[k] & (tiles_out > depth - k) for k in range(1, depth + 1)).any())
        cause = Signal(4)
        with m.If(d.bad):
            m.d.comb += cause.eq(d.cause)
        with m.Elif(no_tile):
            m.d.comb += cause.eq(Cause.NO_TILE)
        with m.Elif(overflow):
            m.d.comb += cause.eq(Cause.WEIGHT_OVERFLOW)
        err = d.bad | no_tile | overflow

        # Interlocks (the overlaps are meaningful for an instruction whose ranges are in their
        # buffers, the only kind that reaches the engines). An instruction waits for its engine,
        # the in-flight jobs ``_interlocks`` names, and:
        retire_pending = Signal()
        all_idle = (~hi.busy & ~mm.busy & ~av.busy & ~ho.busy & ~draining & arrived)
        # SYNC and READ_COUNTERS wait for ``quiet``: everything was idle and counted in the
        # cycle before and nothing issued then, so it still is (an engine starts only by an
        # issue; a register, so that the wait is no deeper than the others).
        quiet = Signal(init=1)
        m.d.sync += quiet.eq(all_idle & ~retire_pending & ~issue)
        waits = {
            Op.READ_QUANT: av.busy,          # rows in the activation unit read the sets
            Op.ACTIVATE: hi.writes_quant,
            Op.SYNC: ~quiet,
            Op.READ_COUNTERS: ~quiet,
        }
        # When each op may go (a MATMUL without a tile at once: it is dropped; a READ_WEIGHTS
        # waits for the host-in engine whether it overflows or not); an instruction with a
        # cause from decode is dropped at once, or once the host-in engine can discard its
        # host data. Written flat, as one OR of small AND terms of registers (the op one-hot
        # selects its own; the register empty blocks), so that the decision is a few gates.
        # (Each op's "it may go" is a kept signal, so that synthesis cannot fold the terms into
        # a deep chain: two or three gates for those, two for the decision.)
        go_terms = []
        for op in Op:
            is_op = getattr(is_, op.name.lower())
            terms = []
            if op in _ENGINE:
                terms.append(engine_busy[_ENGINE[op]])
            if op in waits:
                terms.append(waits[op])
            for op_, access, e, buffer, by_rows in interlocks:
                if op_ == op:
                    job = active[e, buffer] & ov[access.field, e] if by_rows else active[e, buffer]
                    terms.append(_flag_test(flags, access.when) & job)
            if op == Op.MATMUL:
                terms = [Cat(*terms).any() & ~Mux(new_tile, tiles_zero, ~tile_taken)]
            go = Signal(name=f"go_{op.name.lower()}", attrs={"keep": 1})
            m.d.comb += go.eq(is_op & ~Cat(*terms).any() if terms else is_op)
            go_terms.append(go)
        m.d.comb += issue.eq(Mux(d.bad, ~(d.host_data & hi.busy), Cat(*go_terms).any()))
        drop = issue & err

        # Issue.
        rw = is_.read_weights
        m.d.comb += [
            hi.dst.eq(dst), hi.dst_end.eq(dst_end), hi.count.eq(d.count),
            hi.kind.eq(Mux(d.bad | overflow, HostInJob.DISCARD, d.hi_kind)),
            hi.start.eq(issue & Mux(d.bad, d.host_data, is_.read_host | rw | is_.read_quant)),
            mm.src.eq(src), mm.src_end.eq(src_end), mm.dst.eq(dst), mm.dst_end.eq(dst_end),
            mm.n.eq(n), mm.accumulate.eq((flags & Flag.ACCUMULATE) != 0),
            mm.new_tile.eq(new_tile), mm.start.eq(issue & ~err & is_.matmul),
            av.src.eq(src), av.src_end.eq(src_end), av.dst.eq(dst), av.dst_end.eq(dst_end),
            av.n.eq(n), av.part.eq(mem.part), av.qset.eq(flags),
            av.start.eq(issue & ~d.bad & is_.activate),
            ho.src.eq(src), ho.src_end.eq(src_end), ho.n.eq(n), ho.part.eq(mem.part),
            ho.start.eq(issue & ~d.bad & (is_.write_host | is_.sync | is_.read_counters)),
            ho.kind.eq(d.ho_kind),
        ]
        # Weight tiles in program order (a READ_WEIGHTS and a MATMUL never issue together).
        took = issue & ~err & is_.matmul & new_tile
        asked = issue & ~err & rw
        with m.If(asked):
            m.d.sync += [tiles_out.eq(tiles_out + n[:tw]), tiles_zero.eq(0)]
        with m.Elif(took):
            m.d.sync += [tiles_out.eq(tiles_out - 1), tiles_zero.eq(tiles_out == 1),
                         tile_taken.eq(1)]

        # Sticky error.
        err_cause = Signal(4)
        with m.If(self.clear_error):
            m.d.sync += err_cause.eq(0)
        with m.Elif(err_cause == 0):
            with m.If(drop):
                m.d.sync += err_cause.eq(cause)
            with m.Elif(hi.framing_error):
                m.d.sync += err_cause.eq(Cause.HOST_FRAMING)

        # Counters: events registered, added the cycle after (RETIRED: one flag per source).
        simple = issue & ~d.bad & is_.nop
        retire = Signal(6)
        retiring = Cat(drop, simple, hi.done, mm.done, av.done, ho.done)
        m.d.sync += [retire.eq(Mux(self.clear_counters, 0, retiring)),
                     retire_pending.eq(~self.clear_counters & retiring.any())]   # retire != 0
        events = {
            "array_busy": self.act.valid & self.act.ready,
            "host_in_stall": hi.stall,
            "host_out_stall": self.host_out.valid & ~self.host_out.ready,
        }
        incs = {"cycles": Const(1),
                "retired": sum((retire[k] for k in range(6)), Const(0, range(7)))}
        for name, event in events.items():
            incs[name] = Signal(name=f"{name}_event")
            m.d.sync += incs[name].eq(event & ~self.clear_counters)
        for name, inc in incs.items():
            # counter_width bits, zero-extended to the status' 64 (constant high bits: the
            # snapshots of them in host-out and the board bridge synthesize to nothing).
            count = Signal(cfg.counter_width, name=f"count_{name}")
            with m.If(self.clear_counters):
                m.d.sync += count.eq(0)
            with m.Else():
                m.d.sync += count.eq(count + inc)
            m.d.comb += getattr(self.status, name).eq(count)
        m.d.comb += [
            self.status.busy.eq(self.cmd.valid | d_valid | ~all_idle
                                | retire_pending),
            self.status.error.eq(err_cause != 0),
            self.status.cause.eq(err_cause),
            ho.cause.eq(err_cause),
            ho.retired.eq(self.status.retired[:16]),
        ]

        # The counter snapshot, shared: READ_COUNTERS (the host-out engine) and the outside
        # (``snap_*``: a board bridge's reply header) take turns (``snap_busy``: READ_COUNTERS
        # holds it).
        m.submodules.snap = snap = CounterSnapshot(cfg)
        m.d.comb += [
            snap.counters.eq(self.status.as_value()[STATUS_COUNTERS]),
            snap.hold.eq(ho.counters_busy | self.snap_hold),
            snap.next.eq(ho.snap_next | self.snap_next),
            ho.snap_chunk.eq(snap.chunk),
            self.snap_chunk.eq(snap.chunk),
            self.snap_busy.eq(ho.counters_busy),
        ]
        return m

    def _decode(self, m, word, valid):
        """The decode stage's combinational part: the ``_decoded_layout`` value of ``word``, from
        the rules in ``hdl.isa.OPS`` (``is_`` and ``bad`` all zero unless ``valid``)."""
        cfg = self.config
        r, depth = cfg.rows, cfg.weight_fifo_depth
        aw = max(ub_bits(cfg), acc_bits(cfg))
        out = Signal(_decoded_layout(cfg))
        op, flags, mem = word.op, word.flags, word.body.mem
        n = mem.n
        m.d.comb += out.word.eq(word)
        known = Cat(*(op == o for o in Op)).any()

        # Ends in aw + 1 bits; a field with a bit at or above aw is past both buffers.
        end, high = {}, {}
        for x in _RANGE_FIELDS:
            end[x] = Signal(aw + 1, name=f"{x}_end")
            m.d.comb += [end[x].eq(mem[x][:aw] + n[:aw]), out[f"{x}_end"].eq(end[x])]
            high[x] = (mem[x][aw:] != 0) | (n[aw:] != 0)
        # OUT_OF_RANGE (``hdl.isa.static_cause``): per op, n == 0 when it counts, each range it
        # touches past its buffer, part past the parts of the rows it slices. Each condition is
        # computed once and gated by the ops (and flags) it applies to (a function of the op
        # and flag bits alone, ready early), so the range compares are two gates from ``bad``.
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
            if spec.counted:
                found.append((condition(("n", "zero"), lambda: n == 0), is_op))
            for a in spec.accesses:
                if a.field == "flags":          # one row: the flags name it
                    rows_ = a.buffer.rows(cfg)
                    found.append((condition(("flags", rows_), lambda r=rows_: flags >= r),
                                  is_op))
                    continue
                rows_ = a.buffer.rows(cfg)
                past = condition((a.field, rows_), lambda x=a.field, r=rows_:
                                 high[x] | (end[x] > r))
                when = is_op & _flag_test(flags, a.when)
                found.append((past, when))
                if a.parts is not None:
                    parts = a.parts(cfg)
                    found.append((condition(("part", parts), lambda p=parts: mem.part >= p),
                                  when))
            for cond, when in found:
                relevant.setdefault(id(cond), (cond, []))[1].append(when)
        bad = [cond & Cat(*whens).any() for cond, whens in relevant.values()]
        with m.If(~known):
            m.d.comb += out.cause.eq(Cause.BAD_OPCODE)
        with m.Elif(Cat(*bad).any()):
            m.d.comb += out.cause.eq(Cause.OUT_OF_RANGE)
        err = ~known | Cat(*bad).any()
        host_data = (op & HOST_DATA_BIT) != 0
        for o in Op:
            m.d.comb += getattr(out.is_, o.name.lower()).eq(valid & (op == o))
        m.d.comb += [out.bad.eq(valid & err), out.host_data.eq(host_data)]
        with m.If(op == Op.READ_WEIGHTS):
            m.d.comb += out.hi_kind.eq(HostInJob.READ_WEIGHTS)
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
        # depth matters, larger n overflows the FIFO and is dropped).
        tw = depth.bit_length()
        tiles = n[:tw]
        times_r = sum((tiles << k for k in range(r.bit_length()) if (r >> k) & 1), Const(0))
        sets = n[:cfg.quant_sets.bit_length()]   # only n <= quant_sets is in range
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
        m.d.comb += [
            out.n_big.eq(n > depth),
            out.count.eq(count),
        ]
        return out


def _min(a, b):
    return Mux(a < b, a, b)


def _max(a, b):
    return Mux(a > b, a, b)
