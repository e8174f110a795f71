"""The controller: decodes the instruction stream and dispatches it to four engines, in order,
with interlocks that keep every valid program's results equal to sequential execution."""

from typing import NamedTuple

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.accumulator import ACC_DATA_DELAY
from tpugen.hdl.activate_engine import ActivateEngine
from tpugen.hdl.activation import acc_row_layout, act_in_layout, q_row_layout
from tpugen.hdl.array import act_layout, array_latency, weight_layout
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.counter_snapshot import CounterSnapshot
from tpugen.hdl.decode import decode_stage, decoded_layout, flag_test
from tpugen.hdl.host_in import HostInEngine, HostInJob
from tpugen.hdl.host_out import HostOutEngine
from tpugen.hdl.isa import (
    INSTR_LAYOUT,
    OPS,
    Access,
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

__all__ = ["Controller", "PROBE_WAITS", "PROBE_LAYOUT"]


#: The engine that runs each op (the others have none).
_ENGINE = {Op.READ_HOST: "hi", Op.READ_WEIGHTS: "hi", Op.READ_QUANT: "hi", Op.MATMUL: "mm",
           Op.ACTIVATE: "av", Op.WRITE_HOST: "ho", Op.STORE_WEIGHTS: "hi",
           Op.LOAD_WEIGHTS: "hi"}

#: Buffers with one read port: instructions that read them run one at a time.
_ONE_READ_PORT = {Buffer.ACC}

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


_INTERLOCKS = _interlocks()


def _overlap(a_lo, a_hi, b_lo, b_hi):
    return (a_lo < b_hi) & (b_lo < a_hi)


def _read_port(name: str, shape) -> dict:
    """A memory read port's members: ``<name>_en``, ``_addr`` out, ``_data`` (``shape``) in."""
    return {f"{name}_en": Out(1), f"{name}_addr": Out(16), f"{name}_data": In(shape)}


class _Engines(NamedTuple):
    """The four engines (named as in ``_ENGINE`` and ``_IN_FLIGHT``)."""
    hi: HostInEngine
    mm: MatmulEngine
    av: ActivateEngine
    ho: HostOutEngine


class _Drain(NamedTuple):
    """The drain tracker's registers (``Controller._track_drain``)."""

    draining: Signal    # results of finished MATMULs are still on their way to the accumulators
    lo: Signal          # their ACC rows lo .. hi - 1 (the hull of those MATMULs' rows)
    hi: Signal
    arrived: Signal     # no vector is in the array


class _Tiles(NamedTuple):
    """The weight-tile registers at issue (``Controller._issue_checks``)."""

    out: Signal         # tiles requested, not yet taken
    taken: Signal       # a tile was ever taken
    zero: Signal        # out == 0


class Controller(wiring.Component):
    """Instruction dispatch, the engines, the sticky error and the counters.

    Pipeline: ``cmd`` -> decode -> the issue register -> issue. ``cmd.ready`` is high while the
    issue register can take a word (it is empty or issues: a combinational function of the issue
    decision, which comes from registers), so a command is taken in the cycle it is offered
    unless the issue register holds a blocked instruction. Decode (``hdl.decode``) computes from
    the word alone, on its way into the issue register: the op one-hot, ``src + n`` and
    ``dst + n`` (in row-number widths, ``hdl.layouts.ub_bits`` / ``acc_bits``: the fields' high
    bits are checked once), the BAD_OPCODE / OUT_OF_RANGE cause and the host-in beat count
    (``n * R`` by shifts and adds); its ranges are compared with the engines' jobs as they will
    be in the next cycle (registered overlap flags). An instruction taken in cycle t can issue
    in cycle t + 1 at the earliest, and instructions issue one per cycle while nothing blocks
    them and commands come (a blocked instruction waits in the issue register, and ``cmd.ready``
    drops until the block clears). An engine starts the cycle after its instruction issues.

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
        check_config(config)
        self.config = config
        super().__init__({
            "cmd": In(stream.Signature(INSTR_LAYOUT)),
            "host_in": In(stream.Signature(host_in_layout(config))),
            "host_out": Out(stream.Signature(host_out_layout(config))),
            "ub_we": Out(1),
            "ub_waddr": Out(16),
            "ub_wdata": Out(ub_row_layout(config)),
            **_read_port("ub_rd0", ub_row_layout(config)),
            **_read_port("ub_rd1", ub_row_layout(config)),
            **_read_port("acc_rd", acc_row_layout(config)),
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
            "probe": Out(PROBE_LAYOUT),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.hi = hi = HostInEngine(cfg)
        m.submodules.mm = mm = MatmulEngine(cfg)
        m.submodules.av = av = ActivateEngine(cfg)
        m.submodules.ho = ho = HostOutEngine(cfg)
        engines = _Engines(hi, mm, av, ho)
        self._connect_engines(m, engines)
        drain = self._track_drain(m, mm)

        # Decode into the issue register ``d``; it advances when it issues (or is empty).
        new = decode_stage(m, cfg, self.cmd.payload, self.cmd.valid)
        d, d_valid = Signal(decoded_layout(cfg), name="d"), Signal(name="d_valid")
        issue = Signal(attrs={"keep": 1})   # (kept: one net for the engines and the FIFO)
        advance = ~d_valid | issue
        m.d.comb += self.cmd.ready.eq(advance)
        with m.If(advance):
            m.d.sync += [d.eq(new), d_valid.eq(self.cmd.valid)]

        # Issue stage: everything from registers.
        ov = self._overlaps(m, engines, drain, new, d, advance)
        new_tile = (d.word.flags & Flag.NEW_TILE) != 0
        tiles, overflow, cause, err = self._issue_checks(m, d, new_tile, mm)
        all_idle, retire_pending = self._issue_decision(m, engines, drain, ov, d, new_tile,
                                                        tiles, issue)
        drop = issue & err
        self._dispatch(m, engines, d, new_tile, tiles, issue, err, overflow)
        err_cause = self._sticky_error(m, hi, drop, cause)
        self._counters(m, engines, d, issue, drop, retire_pending)
        m.d.comb += [
            self.status.busy.eq(self.cmd.valid | d_valid | ~all_idle
                                | retire_pending),
            self.status.error.eq(err_cause != 0),
            self.status.cause.eq(err_cause),
            ho.cause.eq(err_cause),
            ho.retired.eq(self.status.retired[:16]),
        ]
        self._counter_snapshot(m, ho)
        self._probe(m, engines, drain, d, d_valid, issue, drop)
        return m

    def _connect_engines(self, m, engines: _Engines):
        """The engines to the controller's ports; the UB write port and the ACC read port
        shared."""
        hi, mm, av, ho = engines
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

    def _track_drain(self, m, mm) -> _Drain:
        """MATMUL results still on their way to the accumulators: the issuing MATMUL's rows, and
        the union of finished MATMULs' rows until the drain is over. A MATMUL's last result is
        written ``max(L, ACC_DATA_DELAY)`` cycles after its last row entered the array (L the
        array latency; ``hdl.core``), and a reader's first read comes two cycles after it
        issues (the engine starts the cycle after issue, then reads), one cycle after that
        write: so the drain holds readers for ``max(L, ACC_DATA_DELAY)`` cycles after
        ``mm.done``."""
        cfg = self.config
        drain_cycles = max(array_latency(cfg), ACC_DATA_DELAY)
        xw = acc_bits(cfg)
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
        return _Drain(draining, drain_lo, drain_hi, arrived)

    def _overlaps(self, m, engines: _Engines, drain: _Drain, new, d, advance) -> dict:
        """Range overlaps of the instruction in the issue register with the jobs in flight, one
        cycle ahead: ``ov[(x, e)]`` (a register) is "range x (src / dst) of the instruction in
        the issue register overlaps job range e" (``_IN_FLIGHT``) for this cycle's contents of
        both, valid while the job is active (``_issue_decision`` gates each overlap by that).
        When the issue register advances, the command being decoded (``new``) is compared with
        each engine's job: an idle engine's job registers load the issue register's fields
        (they become its job if it issues), a busy engine's hold. Otherwise the overlaps hold:
        a busy engine's range does not change, and an idle one stays idle while nothing issues.
        The drain range is compared with its value in the next cycle."""
        aw = max(ub_bits(self.config), acc_bits(self.config))
        hi, mm, av, ho = engines
        ranges = {"hi_ub": (hi.ub_lo, hi.ub_hi), "av_ub": (av.ub_lo, av.ub_hi),
                  "mm_ub": (mm.ub_lo, mm.ub_hi), "ho": (ho.lo, ho.hi),
                  "mm_acc": (mm.acc_lo, mm.acc_hi), "av_acc": (av.acc_lo, av.acc_hi)}

        def rows(x, field):
            """Range ``field`` (src / dst) of a decoded instruction: (lo, end)."""
            return x.word.body.mem[field][:aw], x[f"{field}_end"]

        # The drain range next cycle: the union (hull) of its rows and a finishing MATMUL's.
        def drain_overlap(lo, hi_):
            below_d, below_m = lo < drain.hi, lo < mm.acc_hi
            above_d, above_m = drain.lo < hi_, mm.acc_lo < hi_
            joined = Mux(drain.draining, (below_d | below_m) & (above_d | above_m),
                         below_m & above_m)
            return Mux(mm.done, joined, below_d & above_d)

        ov = {}
        for x, e in dict.fromkeys((a_.field, e) for _, a_, e, _, by_rows in _INTERLOCKS
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
                m.d.sync += ov[x, e].eq(Mux(~getattr(engines, engine).busy,
                                            _overlap(new_lo, new_hi, f_lo, f_hi),
                                            _overlap(new_lo, new_hi, e_lo, e_hi)))
        return ov

    def _issue_checks(self, m, d, new_tile, mm):
        """The errors of the instruction in the issue register: its cause from decode, or those
        found at issue, a window MATMUL the walk's registers refuse (OUT_OF_RANGE), a MATMUL
        without a tile (it is dropped at once: no data) and a READ_WEIGHTS of more tiles than
        the FIFO has room for (its data is discarded). Returns the weight-tile registers, the
        overflow, the cause and whether there is an error."""
        depth = self.config.weight_fifo_depth
        is_ = d.is_
        tiles_out = Signal(range(depth + 1))    # requested, not yet taken
        tile_taken = Signal()                   # a tile was ever taken
        tiles_zero = Signal(init=1)             # tiles_out == 0 (a register)
        no_tile = ~d.bad & is_.matmul & Mux(new_tile, tiles_zero, ~tile_taken)
        overflow = ~d.bad & (is_.read_weights | is_.load_weights) & (d.n_big | Cat(
            d.n_is[k] & (tiles_out > depth - k) for k in range(1, depth + 1)).any())
        walk = (~d.bad & is_.matmul & ((d.word.flags & Flag.WINDOW) != 0) & mm.window_bad
                if self.config.window else Const(0))
        cause = Signal(4)
        with m.If(d.bad):
            m.d.comb += cause.eq(d.cause)
        with m.Elif(walk):
            m.d.comb += cause.eq(Cause.OUT_OF_RANGE)
        with m.Elif(no_tile):
            m.d.comb += cause.eq(Cause.NO_TILE)
        with m.Elif(overflow):
            m.d.comb += cause.eq(Cause.WEIGHT_OVERFLOW)
        err = d.bad | walk | no_tile | overflow
        return _Tiles(tiles_out, tile_taken, tiles_zero), overflow, cause, err

    def _issue_decision(self, m, engines: _Engines, drain: _Drain, ov, d, new_tile,
                        tiles: _Tiles, issue):
        """Drive ``issue``: the instruction in the issue register goes. It waits for its
        engine, the in-flight jobs ``_interlocks`` names (the overlaps are meaningful for an
        instruction whose ranges are in their buffers, the only kind that reaches the engines)
        and the op's own waits below. Returns ``all_idle`` and the ``retire_pending`` register
        (driven by ``_counters``)."""
        hi, mm, av, ho = engines
        is_, flags = d.is_, d.word.flags
        ub, acc = Buffer.UB, Buffer.ACC
        # ``active[(range, buffer)]``: the engine holds a job with that access.
        active = {("hi_ub", ub): hi.writes_ub, ("av_ub", ub): av.busy, ("mm_ub", ub): mm.busy,
                  ("ho", ub): ho.reads_ub, ("ho", acc): ho.reads_acc, ("mm_acc", acc): mm.busy,
                  ("av_acc", acc): av.busy, ("drain", acc): drain.draining}
        retire_pending = Signal()
        all_idle = (~hi.busy & ~mm.busy & ~av.busy & ~ho.busy & ~drain.draining & drain.arrived)
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
        # host data. Written flat, one OR of small AND terms of registers (the op one-hot
        # selects its own; the register empty blocks), each op's term a kept signal so that
        # synthesis cannot fold them into a deep chain: the decision is a few gates.
        go_terms = []
        self._probe_waits = [("engine", d.host_data & hi.busy & d.bad)]      # probe: (why, term)
        for op in Op:
            is_op = getattr(is_, op.name.lower())
            terms, why = [], []                                              # why: probe
            if op in _ENGINE:
                terms.append(getattr(engines, _ENGINE[op]).busy)
                why.append("engine")
            if op in waits:
                terms.append(waits[op])
                why.append("quiet" if op in (Op.SYNC, Op.READ_COUNTERS) else "quant")
            for op_, access, e, buffer, by_rows in _INTERLOCKS:
                if op_ == op:
                    job = active[e, buffer] & ov[access.field, e] if by_rows else active[e, buffer]
                    terms.append(flag_test(flags, access.when) & job)
                    why.append(e)
            self._probe_waits += [(w, is_op & ~d.bad & t) for w, t in zip(why, terms,
                                                                          strict=True)]
            if op == Op.MATMUL:
                terms = [Cat(*terms).any() & ~Mux(new_tile, tiles.zero, ~tiles.taken)]
            go = Signal(name=f"go_{op.name.lower()}", attrs={"keep": 1})
            m.d.comb += go.eq(is_op & ~Cat(*terms).any() if terms else is_op)
            go_terms.append(go)
        m.d.comb += issue.eq(Mux(d.bad, ~(d.host_data & hi.busy), Cat(*go_terms).any()))
        return all_idle, retire_pending

    def _dispatch(self, m, engines: _Engines, d, new_tile, tiles: _Tiles, issue, err,
                  overflow):
        """Start the engine of an issuing instruction (its job from the issue register), and
        count the weight tiles in program order (a READ_WEIGHTS and a MATMUL never issue
        together)."""
        hi, mm, av, ho = engines
        is_, flags, mem = d.is_, d.word.flags, d.word.body.mem
        src, dst, n = mem.src, mem.dst, mem.n
        src_end, dst_end = d.src_end, d.dst_end
        rw = is_.read_weights | is_.load_weights    # they queue tiles in the weight FIFO
        m.d.comb += [
            hi.dst.eq(Mux(is_.load_weights, src, dst)), hi.dst_end.eq(dst_end),
            hi.count.eq(d.count),
            hi.kind.eq(Mux(d.bad | overflow, HostInJob.DISCARD, d.hi_kind)),
            # (an overflowing LOAD_WEIGHTS has no data to discard: it is dropped at once)
            hi.start.eq(issue & Mux(d.bad, d.host_data, is_.read_host | is_.read_weights
                                    | is_.read_quant | is_.store_weights
                                    | is_.load_weights & ~overflow)),
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
        if self.config.window:      # the walk's registers: NOP SHAPE / AT, the job's flag
            shape, at = is_.nop & ((flags & Flag.SHAPE) != 0), is_.nop & ((flags & Flag.AT) != 0)
            m.d.comb += [mm.window.eq((flags & Flag.WINDOW) != 0), mm.part.eq(mem.part),
                         mm.shape_word.eq(shape), mm.set_shape.eq(issue & shape),
                         mm.at_word.eq(at), mm.set_at.eq(issue & at), mm.body.eq(mem)]
        tw = self.config.weight_fifo_depth.bit_length()     # n[:tw] is n when n <= depth
        took = issue & ~err & is_.matmul & new_tile
        asked = issue & ~err & rw
        with m.If(asked):
            m.d.sync += [tiles.out.eq(tiles.out + n[:tw]), tiles.zero.eq(0)]
        with m.Elif(took):
            m.d.sync += [tiles.out.eq(tiles.out - 1), tiles.zero.eq(tiles.out == 1),
                         tiles.taken.eq(1)]

    def _sticky_error(self, m, hi, drop, cause):
        """The first error cause since ``clear_error`` (a register)."""
        err_cause = Signal(4)
        with m.If(self.clear_error):
            m.d.sync += err_cause.eq(0)
        with m.Elif(err_cause == 0):
            with m.If(drop):
                m.d.sync += err_cause.eq(cause)
            with m.Elif(hi.framing_error):
                m.d.sync += err_cause.eq(Cause.HOST_FRAMING)
        return err_cause

    def _counters(self, m, engines: _Engines, d, issue, drop, retire_pending):
        """The status counters: events registered, added the cycle after (RETIRED: one flag
        per source; ``retire_pending``: one of them is set)."""
        simple = issue & ~d.bad & (d.is_.nop | d.is_.program)
        retire = Signal(6)
        retiring = Cat(drop, simple, *(e.done for e in engines))
        m.d.sync += [retire.eq(Mux(self.clear_counters, 0, retiring)),
                     retire_pending.eq(~self.clear_counters & retiring.any())]   # retire != 0
        events = {
            "array_busy": self.act.valid & self.act.ready,
            "host_in_stall": engines.hi.stall,
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
            count = Signal(self.config.counter_width, name=f"count_{name}")
            with m.If(self.clear_counters):
                m.d.sync += count.eq(0)
            with m.Else():
                m.d.sync += count.eq(count + inc)
            m.d.comb += getattr(self.status, name).eq(count)

    def _counter_snapshot(self, m, ho):
        """The counter snapshot, shared: READ_COUNTERS (the host-out engine) and the outside
        (``snap_*``: a board bridge's reply header) take turns (``snap_busy``: READ_COUNTERS
        holds it)."""
        m.submodules.snap = snap = CounterSnapshot(self.config)
        m.d.comb += [
            snap.counters.eq(self.status.as_value()[STATUS_COUNTERS]),
            snap.hold.eq(ho.counters_busy | self.snap_hold),
            snap.next.eq(ho.snap_next | self.snap_next),
            ho.snap_chunk.eq(snap.chunk),
            self.snap_chunk.eq(snap.chunk),
            self.snap_busy.eq(ho.counters_busy),
        ]

    # --- the probe (the compiled Verilator harness's engine timelines, ``tpugen.sim.trace``) ---
    def _probe(self, m, engines: _Engines, drain: _Drain, d, d_valid, issue, drop):
        """``probe`` (``PROBE_LAYOUT``): the engines' state this cycle, for a tracer that samples
        it (the core exposes it with ``probe_port=True``). Only wires of existing signals and
        the OR of each wait reason's issue-blocking terms; nothing else reads it."""
        hi, mm, av, ho = engines
        held = d_valid & ~issue
        m.d.comb += [
            self.probe.word.eq(d.word),
            self.probe.busy.eq(Cat(hi.busy, mm.busy, av.busy, ho.busy)),
            self.probe.issue.eq(issue),
            self.probe.drop.eq(drop),
            self.probe.held.eq(held),
            self.probe.feed.eq(self.act.valid & self.act.ready),
            self.probe.hi_wait.eq(hi.stall),
            self.probe.draining.eq(drain.draining),
        ]
        for k, name in enumerate(PROBE_WAITS):
            terms = [t for w, t in self._probe_waits if w == name]
            if terms:
                m.d.comb += self.probe.wait[k].eq(held & Cat(*terms).any())


#: Why an instruction in the issue register does not issue (``PROBE_LAYOUT.wait``, one bit each):
#: ``engine`` its engine is busy (or a dropped one waits for host-in to discard its data); an
#: ``_IN_FLIGHT`` name: that job's rows conflict (or it holds the one ACC read port); ``quant``
#: the parameter sets are in use; ``quiet`` SYNC / READ_COUNTERS wait for everything to end.
PROBE_WAITS = ("engine", *_IN_FLIGHT, "quant", "quiet")

#: The controller's ``probe`` port: ``word`` (the instruction in the issue register, as it came
#: from the command source), ``busy`` one bit an engine (host-in, matmul, activate,
#: host-out), ``issue`` / ``drop`` (an instruction issued / was dropped this cycle), ``held`` (one
#: waits in the issue register), ``feed`` (ARRAY_BUSY's event), ``hi_wait`` (HOST_IN_STALL's
#: event), ``draining`` (MATMUL results on their way to the accumulators), ``wait``
#: (``PROBE_WAITS``).
PROBE_LAYOUT = data.StructLayout({
    "word": INSTR_LAYOUT, "busy": 4, "issue": 1, "drop": 1, "held": 1, "feed": 1,
    "hi_wait": 1, "draining": 1, "wait": len(PROBE_WAITS),
})


def _min(a, b):
    return Mux(a < b, a, b)


def _max(a, b):
    return Mux(a > b, a, b)
