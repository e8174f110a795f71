# amaranth: UnusedElaboratable=no
"""The parameter sets' interlock (READ_QUANT / ACTIVATE, ``hdl.controller.Controller``):
bounded model checking at the controller's ports.

READ_QUANT writes requantization parameter sets (``hdl.quant_params``, inside the activation
unit) through ``quant_w``; an ACTIVATE's rows go into the unit through ``q_in`` with their set
(``qset``, the instruction's ``flags``), and the unit reads that set's parameters for a row
between the row's ``q_in`` transfer and its result's ``q_out`` transfer (``hdl.activation``:
the read is at the row's issue from the input register, a cycle after the transfer at the
soonest; rows leave in order, one result each). The store writes in every cycle ``quant_w``
is valid (each chunk of the set a cycle); a read sees a write of an earlier cycle.

**The program** and **the environment** are those of ``interlock_props`` (valid instruction
words on ``cmd``, the host's beats with ``last`` on each instruction's final one, any timing
of the host, the array and the activation unit; no error reported), with programs of
READ_QUANT and ACTIVATE (``QSET_OPS``: the only ops that touch the sets; READ_QUANT shares the
host-in engine with READ_HOST, which ``QSET_OPS_WIDE`` adds), and ``quant_w.ready`` free.

**The property**, for a set ``K`` (``AnyConst``): as each instruction is taken the harness
notes, in program order, a READ_QUANT that loads ``K`` (it owes ``QUANT_BEATS`` transfers of
set ``K`` on ``quant_w``) and every ACTIVATE (it owes ``n`` rows on ``q_in``, with its set);
the unit's rows of set ``K`` are followed from ``q_in`` to ``q_out`` (in order). It asserts:

- **owed**: a ``quant_w`` beat of set ``K`` only while a READ_QUANT owes one; a ``q_in`` row
  only while an ACTIVATE owes one, and carrying that ACTIVATE's set;
- **read after write**: a ``q_in`` row of set ``K`` never while an *earlier* READ_QUANT still
  owes a beat of ``K``, nor in a cycle that writes ``K`` (its parameters are read a cycle
  later at the soonest: the write has landed);
- **write after read**: no cycle writes set ``K`` while an *earlier* ACTIVATE of set ``K``
  still owes a row, or while a row of set ``K`` is in the unit (between ``q_in`` and its
  ``q_out``: its parameters may still be read).

**Covers**: each hazard happens back to back (``QSET_COVERS``): an ACTIVATE's row of ``K``
whose ACTIVATE was taken while a READ_QUANT of ``K`` was owed, and a write of ``K`` whose
READ_QUANT was taken while an ACTIVATE of ``K`` owed rows or had rows in the unit.

**Mutants** (``QSET_MUTANTS``): ACTIVATE no longer waits for a READ_QUANT (the controller's
copy of the host-in engine's ``writes_quant`` tied to 0 in the netlist), and READ_QUANT issues
while the activate engine runs (the OR of its two waits cut to the first).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Cat, Const, Cover, Mux, Signal

from tpugen.hdl.config import Config
from tpugen.hdl.controller import Controller
from tpugen.hdl.isa import QUANT_BEATS, Op
from tpugen.tb.formal.interlock_props import _environment, _valid_program
from tpugen.tb.formal.observe import Harness
from tpugen.tb.formal.stream_check import transfer

__all__ = ["QSET_OPS", "QSET_OPS_WIDE", "QSET_COVERS", "QSET_MUTANTS", "qset_config",
           "qset_harness"]

#: The ops of the programs: the two that touch the parameter sets (and a NOP between them).
QSET_OPS = (Op.NOP, Op.READ_QUANT, Op.ACTIVATE)
#: With READ_HOST as well (the host-in engine's other UB job, and the UB's write port).
QSET_OPS_WIDE = (*QSET_OPS, Op.READ_HOST)
#: The covers (``covers=True``).
QSET_COVERS = ("raw_read_quant_activate", "war_activate_read_quant")
#: The mutants: Yosys commands on the flattened netlist (``observe.Harness.mutate``).
_GO_RQ_OR = r"w:dut.go_read_quant %ci5 t:$reduce_or %i"   # the OR of READ_QUANT's waits
QSET_MUTANTS = {
    # ACTIVATE no longer waits while a READ_QUANT runs (the controller's copy of the host-in
    # engine's ``writes_quant``, which only ACTIVATE's wait reads, tied to 0).
    "raw": ("connect -set dut.writes_quant 1'b0",),
    # READ_QUANT's waits, the OR of (its engine busy, the activate engine busy) in that order
    # (``Controller._issue_decision``), made a ``$pos`` of one bit: its own engine's busy
    # alone, so it issues while the activate engine runs. The selection must be that cell.
    "war": (f"select -assert-count 1 {_GO_RQ_OR}", f"chtype -set $pos {_GO_RQ_OR}"),
}


def qset_config(quant_sets: int = 2) -> Config:
    """A small core with ``quant_sets`` parameter sets: 2 x 2 int4, 4 UB and ACC rows."""
    if not isinstance(quant_sets, int) or quant_sets < 2:
        raise ValueError(f"quant_sets must be an int >= 2, not {quant_sets!r}")
    return Config(rows=2, cols=2, operand="int4", acc_width=16, weight_fifo_depth=1,
                  ub_rows=4, acc_rows=4, quant_sets=quant_sets, counter_width=32)


class _Queue:
    """Up to two instructions of one kind owed at once (its engine's job and the one in the
    issue register; asserted), oldest first: each its number in program order (``tag``), what
    it still owes (``left``), its set (``set``) and whether a conflicting instruction was owed
    when it was taken (``waited``, for the covers)."""

    def __init__(self, name, tw, left_shape, set_shape):
        self.size = Signal(range(3), name=f"{name}_size")
        self.tag = [Signal(tw, name=f"{name}_tag{k}") for k in range(2)]
        self.left = [Signal(left_shape, name=f"{name}_left{k}") for k in range(2)]
        self.set = [Signal(set_shape, name=f"{name}_set{k}") for k in range(2)]
        self.waited = [Signal(name=f"{name}_waited{k}") for k in range(2)]

    def update(self, m, push, tag, left, set_, waited, pop_one):
        """Take an instruction (``push``: its fields) and one unit of the oldest's debt
        (``pop_one``), in one cycle."""
        done = pop_one & (self.left[0] == 1)
        m.d.comb += Assert(~(push & ~done & (self.size == 2)),
                           "harness: three instructions of a kind owed")
        m.d.comb += Assert(~(pop_one & (self.size == 0)), "harness: a debt of no instruction")
        new = (tag, left, set_, waited)
        fields = (self.tag, self.left, self.set, self.waited)
        with m.If(pop_one & ~done):
            m.d.sync += self.left[0].eq(self.left[0] - 1)
        with m.If(done):
            m.d.sync += [f[0].eq(f[1]) for f in fields]
            with m.If(push & (self.size == 1)):
                m.d.sync += [f[0].eq(v) for f, v in zip(fields, new, strict=True)]
            with m.If(push & (self.size == 2)):
                m.d.sync += [f[1].eq(v) for f, v in zip(fields, new, strict=True)]
            with m.If(~push):
                m.d.sync += self.size.eq(self.size - 1)
        with m.Elif(push):
            m.d.sync += self.size.eq(self.size + 1)
            with m.If(self.size == 0):
                m.d.sync += [f[0].eq(v) for f, v in zip(fields, new, strict=True)]
            with m.Else():
                m.d.sync += [f[1].eq(v) for f, v in zip(fields, new, strict=True)]


def qset_harness(config: Config | None = None, *, mutant: str | None = None,
                 covers: bool = False, ops=QSET_OPS, window: int = 4):
    """The harness of the module docstring for ``config`` (``qset_config()``); ``window``: more
    than the instructions owed at once (their numbers are modulo ``2 * window``)."""
    if mutant is not None and mutant not in QSET_MUTANTS:
        raise ValueError(f"mutant must be one of {tuple(QSET_MUTANTS)}, not {mutant!r}")
    ops = tuple(ops)
    if not {Op.READ_QUANT, Op.ACTIVATE} <= set(ops) <= set(QSET_OPS_WIDE):
        raise ValueError(f"ops must hold READ_QUANT and ACTIVATE, within {QSET_OPS_WIDE}, "
                         f"not {ops!r}")
    cfg = config or qset_config()
    ctrl = Controller(cfg)
    h = Harness()
    h.observe(ctrl)      # as "dut": the mutants name its wires so
    m = h.m
    if mutant is not None:
        for command in QSET_MUTANTS[mutant]:
            h.mutate(command)
    _environment(m, ctrl, cfg)
    _valid_program(m, ctrl, cfg, ops)

    word = ctrl.cmd.payload
    accept = transfer(ctrl.cmd)
    fields = word.body.mem
    k = AnyConst(range(cfg.quant_sets))
    set_shape = range(cfg.quant_sets)
    loads_k = (accept & (word.op == Op.READ_QUANT) & (fields.dst <= k)
               & (k < fields.dst + fields.n))
    activate = accept & (word.op == Op.ACTIVATE)
    tw = (2 * window - 1).bit_length()
    seq = Signal(tw)
    m.d.sync += seq.eq(seq + (loads_k | activate))

    # The unit's rows of set K, in order: bit j is the j-th row inside.
    inside = Signal(4)
    rows_k = Signal(16)
    q_in, q_out = transfer(ctrl.q_in), transfer(ctrl.q_out)
    row_k = q_in & (ctrl.q_in.payload.qset == k)
    m.d.sync += inside.eq(inside + q_in - q_out)
    shifted = Mux(q_out, rows_k >> 1, rows_k)
    at = Mux(q_out, inside - 1, inside)[:4]
    m.d.sync += rows_k.eq(shifted | Mux(row_k, Const(1, 16) << at, 0)[:16])
    k_inside = (rows_k & ((Const(1, 17) << inside) - 1)[:16]) != 0

    writes = Signal(name="writes_k")      # the store writes set K this cycle
    m.d.comb += writes.eq(ctrl.quant_w.valid & (ctrl.quant_w.payload.set == k))
    wq = _Queue("rq", tw, range(QUANT_BEATS + 1), set_shape)   # READ_QUANTs loading K
    aq = _Queue("av", tw, range(max(cfg.ub_rows, cfg.acc_rows) + 1), set_shape)  # ACTIVATEs

    def older(a, b):
        """Number ``a`` was given before ``b`` (both owed: less than ``window`` apart)."""
        return ((b - a)[:tw] != 0) & ((b - a)[:tw] < window)

    av_k_owed = Cat(*((aq.size > j) & (aq.set[j] == k) for j in range(2))).any()
    wq.update(m, loads_k, seq, QUANT_BEATS, k, av_k_owed | k_inside,
              transfer(ctrl.quant_w) & (ctrl.quant_w.payload.set == k))
    aq.update(m, activate, seq, fields.n, word.flags, wq.size != 0, q_in)

    # owed
    with m.If(writes):
        m.d.comb += Assert(wq.size != 0, "quant_w: a beat of a set no READ_QUANT loads")
    with m.If(q_in):
        m.d.comb += [Assert(aq.size != 0, "q_in: a row no ACTIVATE owes"),
                     Assert(ctrl.q_in.payload.qset == aq.set[0],
                            "q_in: a row without its ACTIVATE's set")]
    # read after write: the oldest ACTIVATE's row of K, after every earlier READ_QUANT of K.
    rq_before = Cat(*(((wq.size > j) & older(wq.tag[j], aq.tag[0])) for j in range(2)))
    with m.If(row_k):
        m.d.comb += [
            Assert(~rq_before.any(), "q_in: a row of K before an earlier READ_QUANT wrote K"),
            Assert(~writes, "q_in: a row of set K in a cycle that writes K"),
        ]
    # write after read: no earlier ACTIVATE of K owes rows, no row of K in the unit.
    av_before = Cat(*(((aq.size > j) & (aq.set[j] == k) & older(aq.tag[j], wq.tag[0]))
                      for j in range(2)))
    with m.If(writes & (wq.size != 0)):
        m.d.comb += [
            Assert(~av_before.any(), "quant_w: K written while an earlier ACTIVATE of K owes rows"),
            Assert(~k_inside, "quant_w: set K written while a row of K is in the unit"),
        ]
    if covers:
        m.d.comb += [Cover(row_k & aq.waited[0] & (aq.set[0] == k)),
                     Cover(writes & (wq.size != 0) & wq.waited[0])]
    return h

