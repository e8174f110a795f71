"""The systolic array's contract (``hdl.array.SystolicArray``), bounded model checking at int4.

The solver drives the ``act`` and ``weight`` streams (any vectors, flags and beats, within the
stream rules). The harness keeps the tile model of the docstring: beat ``i`` of a tile is row
``i``; a vector with ``first`` switches to the tile loaded most recently, which must be
complete; and asserts, in every cycle of the bound:

- **the product**: ``out`` carries, ``R + C - 1`` cycles after each ``act`` transfer (and only
  then), the vector ``x @ W`` of the tile in force for it, with its ``first`` flag. Since ``W``
  is the model's tile, a vector computed with weights of two tiles (a mixed switch) fails;
- **the interlock**: ``act.ready`` is low exactly while a ``first`` vector is offered before its
  tile's R beats are in, ``weight.ready`` exactly while a full tile waits for its ``first``
  vector (unless it starts in that cycle).

The array's held weights live in every cell (R x C shadow and active registers, skewed in time),
so k-induction would need an invariant per cell; the check is bounded instead, at a depth that
covers three tiles (``Cover``: two tiles back to back, their results out).

Mutants: the array's own debug fault (``fault=(R-1, C-1)``: one cell's product is wrong); a
wrong expected value (the model's last row keeps the old tile's weights at a switch: a mixed
tile).
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Cover, Mux, Signal, signed

from tpugen.hdl.array import SystolicArray, array_latency
from tpugen.hdl.config import Config
from tpugen.tb.formal.stream_check import formal_module, free_source, transfer

__all__ = ["ARRAY_MUTANTS", "array_harness"]

#: The mutants ``array_harness`` builds.
ARRAY_MUTANTS = ("fault", "mixed_tile")


def array_harness(rows: int = 2, cols: int = 2, *, mutant: str | None = None,
                  covers: bool = False):
    """The harness for an R x C int4 array (flat elaboration)."""
    if mutant is not None and mutant not in ARRAY_MUTANTS:
        raise ValueError(f"mutant must be one of {ARRAY_MUTANTS}, not {mutant!r}")
    config = Config(rows=rows, cols=cols, operand="int4", acc_width=16)
    dut = SystolicArray(config, fault=(rows - 1, cols - 1) if mutant == "fault" else None)
    m = formal_module()
    m.submodules.dut = dut
    free_source(m, dut.act, "act")
    free_source(m, dut.weight, "weight")
    act, weight, out = dut.act, dut.weight, dut.out
    ow, aw = config.operand_width, config.acc_width

    # The tile model: beats of the next tile taken (0..R), the next tile, the tile in force.
    count = Signal(range(rows + 1))
    pend = [[Signal(signed(ow), name=f"pend_{i}_{j}") for j in range(cols)] for i in range(rows)]
    cur = [[Signal(signed(ow), name=f"cur_{i}_{j}") for j in range(cols)] for i in range(rows)]
    starts = transfer(act) & act.payload.first
    m.d.comb += [
        Assert(act.ready == (~act.payload.first | (count == rows)), "act.ready"),
        Assert(weight.ready == ((count < rows) | starts), "weight.ready"),
    ]
    index = Signal(range(rows + 1))
    m.d.comb += index.eq(Mux(starts, 0, count))
    w_go = transfer(weight)
    m.d.sync += count.eq(index + w_go)
    for i in range(rows):
        with m.If(w_go & (index == i)):
            m.d.sync += [pend[i][j].eq(weight.payload[j]) for j in range(cols)]
        with m.If(starts):
            m.d.sync += [cur[i][j].eq(pend[i][j]) for j in range(cols)]

    # The expected output of this cycle's vector, then delayed by the array's latency.
    expect = []
    for j in range(cols):
        y = Signal(signed(aw), name=f"y_{j}")
        terms = []
        for i in range(rows):
            stale = mutant == "mixed_tile" and i == rows - 1
            w = cur[i][j] if stale else Mux(act.payload.first, pend[i][j], cur[i][j])
            terms.append(act.payload.data[i] * w)
        m.d.comb += y.eq(sum(terms))
        expect.append(y)
    valid, first = transfer(act), act.payload.first
    for k in range(array_latency(config)):
        v_k, f_k = Signal(name=f"valid_d{k}"), Signal(name=f"first_d{k}")
        y_k = [Signal(signed(aw), name=f"y_d{k}_{j}") for j in range(cols)]
        m.d.sync += [v_k.eq(valid), f_k.eq(first & valid)]
        m.d.sync += [a.eq(b) for a, b in zip(y_k, expect, strict=True)]
        valid, first, expect = v_k, f_k, y_k
    m.d.comb += Assert(out.valid == valid, "out.valid is not the act transfer, delayed")
    with m.If(out.valid):
        m.d.comb += Assert(out.payload.first == first, "out.first")
        for j in range(cols):
            m.d.comb += Assert(out.payload.data[j] == expect[j], f"out lane {j} is not x @ W")

    if covers:
        _covers(m, config, starts, out)
    return m


def _covers(m, config, starts, out):
    """Two tiles back to back (their ``first`` vectors R cycles apart: no idle cycle), and the
    results of three tiles out."""
    rows = config.rows
    since = Signal(range(rows + 2))
    with m.If(starts):
        m.d.sync += since.eq(1)
    with m.Elif(since != 0):
        m.d.sync += since.eq(Mux(since == rows + 1, rows + 1, since + 1))
    firsts = Signal(2)
    with m.If(out.valid & out.payload.first & (firsts != 3)):
        m.d.sync += firsts.eq(firsts + 1)
    nonzero = Array(out.payload.data)[0] != 0
    m.d.comb += [
        Cover(starts & (since == rows)),
        Cover((firsts == 2) & out.valid & out.payload.first & nonzero),
    ]
