"""Every formal check and every mutant, in one table: what ``tests/test_formal*.py``,
``make test-formal``, ``python -m tpugen.tb.formal`` and ``docs/formal.md`` list.

A ``Check`` names a harness (built by ``build()``), SBY's mode and depth, the design module it
is about, and the verdict expected: ``PASS`` for a property, ``FAIL`` for a mutant (one thing
flipped in the harness or a wrapper: SBY must find a counterexample). ``fast`` checks (seconds
each) run in the default suite; the others carry the ``formal`` marker (``make test-formal``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tpugen.tb.formal.acc_props import accumulator_harness
from tpugen.tb.formal.array_props import array_harness
from tpugen.tb.formal.cell_props import cell_harness, delay_harness
from tpugen.tb.formal.fifo_props import fifo_config, weight_fifo_harness
from tpugen.tb.formal.interlock_props import interlock_harness
from tpugen.tb.formal.link_props import frame_harness, uart_harness
from tpugen.tb.formal.qset_props import qset_harness
from tpugen.tb.formal.read_ahead_props import read_ahead_harness
from tpugen.tb.formal.requant_props import REQUANT_MULTIPLIERS, requant_harness
from tpugen.tb.formal.sby import FormalResult, run_sby
from tpugen.tb.formal.stream_props import STREAM_PORTS, component_harness

__all__ = ["Check", "CHECKS", "check", "run_check"]


@dataclass(frozen=True)
class Check:
    """One SBY run: ``name`` (its build folder), the ``module`` checked, the ``sizes``, SBY's
    ``mode`` and ``depth``, the harness (``build()``), the verdict ``expect``ed, and whether it
    is ``fast`` (default suite)."""

    name: str
    module: str
    sizes: str
    mode: str
    depth: int
    build: Callable
    expect: str = "PASS"
    fast: bool = True
    timeout: int = 600


def _fifo(rows, depth, **kw):
    return lambda: weight_fifo_harness(fifo_config(rows, depth), **kw)


_F, _C, _A = "hdl/weight_fifo.py", "hdl/cell.py", "hdl/accumulator.py"
_U, _R = "fpga/gateware/uart.py", "fpga/gateware/framing.py"
_K, _Q = "hdl/controller.py", "hdl/activation.py"
#: BMC depths of the interlock checks: every hazard cover is reached within them (the
#: unified buffer's by step 7, the accumulators' by step 10).
IL_UB_DEPTH, IL_ACC_DEPTH = 9, 11
#: BMC depth of the parameter sets' interlock: its read-after-write cover (a READ_QUANT's 12
#: beats, then an ACTIVATE's row) is reached at step 16.
QSET_DEPTH = 17
#: The requantizer's row comes out at step 22 (its parameter set's 12 beats, then the row).
RQ_DEPTH = 23


def _il(buffer, **kw):
    return lambda: interlock_harness(buffer, **kw)


def _st(kind, **kw):
    return lambda: component_harness(kind, **kw)


#: BMC depth of the stream rules on the core's ports (inner ones too) and the bridge's: every
#: port's cover (a beat that waited, then went) is reached within it (by step 11).
STREAM_DEPTH = 12
#: BMC depth of the link's ``req`` (its frame receiver fed any bytes): its cover is reached
#: at step 28 (a frame's bytes, the CRC check, the request's first beat).
LINK_DEPTH = 40
#: The components whose output streams are checked alone: (kind, sizes, mode, depth, the
#: depth of their cover). k-induction closes for all but the command source (its induction
#: needs an invariant over the CALL registers; bounded, deeper than its cover).
_LEAVES = (
    ("command_source", "`o`, 4 program words (STORE, CALL)", "bmc", 16, 20),
    ("activation", "`o`, 2 lanes, int4", "prove", 3, 20),
    ("uart_rx", "`o`, 4 clocks a bit", "prove", 3, 50),
    ("frame_rx", "`frame`, 1-byte payload", "prove", 3, 20),
    ("frame_tx", "`o`, 4-byte replies", "prove", 3, 20),
)
#: The core's streams covered (the others never wait in its configuration: the activate
#: engine takes every result at once, the weight FIFO has room for the one tile).
CORE_COVERS = ("host_out", "cmds.o", "ctrl.act", "ctrl.q_in", "ctrl.quant_w")


def _rq(name, **kw):
    return lambda: requant_harness(REQUANT_MULTIPLIERS[name], **kw)

#: The properties (``expect`` PASS) and the mutants (``expect`` FAIL).
CHECKS: tuple[Check, ...] = (
    # The weight FIFO: order, count, no overflow / underflow, stream rules on w_out.
    Check("fifo_r2_d1", _F, "2 x 1 tiles (storage 3), 4-bit beats", "prove", 4, _fifo(2, 1),
          fast=False),
    Check("fifo_r3_d2", _F, "3 x 2 tiles (storage 6, ring of 5)", "prove", 4, _fifo(3, 2)),
    Check("fifo_r4_d4", _F, "4 x 4 tiles (storage 16, ring of 15)", "prove", 4, _fifo(4, 4),
          fast=False),
    Check("fifo_cover", _F, "2 x 2 tiles: full, in and out at once, wrapped", "cover", 14,
          _fifo(2, 2, covers=True)),
    Check("fifo_drop_beat", _F, "mutant: a beat swallowed", "prove", 6,
          _fifo(2, 2, mutant="drop_beat"), "FAIL", fast=False),
    Check("fifo_corrupt_third", _F, "mutant: the third beat out corrupted", "prove", 6,
          _fifo(2, 2, mutant="corrupt_third"), "FAIL"),
    Check("fifo_ready_early", _F, "mutant: expected ready one beat early", "prove", 6,
          _fifo(2, 2, mutant="ready_early"), "FAIL", fast=False),
    Check("fifo_valid_glitch", _F, "mutant: w_out.valid dropped while waiting", "prove", 6,
          _fifo(2, 2, mutant="valid_glitch"), "FAIL", fast=False),
    # The read-ahead stage (a queue of one or two rows before each engine's consumer).
    Check("read_ahead_l1", "hdl/read_ahead.py", "latency 1, up to 7 rows", "prove", 4,
          lambda: read_ahead_harness(1), fast=False),
    Check("read_ahead_l2", "hdl/read_ahead.py", "latency 2, up to 7 rows", "prove", 4,
          lambda: read_ahead_harness(2)),
    Check("read_ahead_cover", "hdl/read_ahead.py", "latency 2: every row out, the stage full",
          "cover", 12, lambda: read_ahead_harness(2, covers=True), fast=False),
    Check("read_ahead_skip", "hdl/read_ahead.py", "mutant: the consumer sees the next row",
          "prove", 8, lambda: read_ahead_harness(2, mutant="skip"), "FAIL"),
    Check("read_ahead_short", "hdl/read_ahead.py", "mutant: expected one row fewer", "prove",
          10, lambda: read_ahead_harness(1, mutant="short"), "FAIL", fast=False),
    # Ring-buffer delay lines (skew lines of 16 cycles or more).
    Check("delay_17", "hdl/delay.py", "17 cycles (ring of 32), 4 bits", "prove", 4,
          lambda: delay_harness(17)),
    Check("delay_short", "hdl/delay.py", "mutant: expected a cycle early", "bmc", 20,
          lambda: delay_harness(17, mutant="short"), "FAIL", fast=False),
    # The MAC cell.
    Check("cell_int4_p0", _C, "int4, 8-bit sums, pipeline 0", "prove", 3,
          lambda: cell_harness("int4", 0)),
    Check("cell_int4_p2", _C, "int4, 8-bit sums, pipeline 2", "prove", 5,
          lambda: cell_harness("int4", 2), fast=False),
    Check("cell_int8_p0", _C, "int8, 16-bit sums, pipeline 0", "prove", 3,
          lambda: cell_harness("int8", 0), fast=False),
    Check("cell_int8_p2", _C, "int8, 16-bit sums, pipeline 2", "prove", 5,
          lambda: cell_harness("int8", 2), fast=False),
    Check("cell_fp8_e4m3_p0", _C, "fp8_e4m3: weight switch and flags", "prove", 3,
          lambda: cell_harness("fp8_e4m3", 0)),
    Check("cell_bf16_p2", _C, "bf16, pipeline 2: weight switch and flags", "prove", 5,
          lambda: cell_harness("bf16", 2), fast=False),
    Check("cell_cover", _C, "int4: a switch with a shadow write in its cycle", "cover", 5,
          lambda: cell_harness("int4", 0, covers=True), fast=False),
    Check("cell_fault", _C, "mutant: the cell's debug fault", "prove", 3,
          lambda: cell_harness("int4", 0, mutant="fault"), "FAIL"),
    Check("cell_late_switch", _C, "mutant: expected switch a cycle late", "prove", 3,
          lambda: cell_harness("int4", 0, mutant="late_switch"), "FAIL", fast=False),
    # The systolic array (bounded).
    Check("array_2x2_d6", "hdl/array.py", "2 x 2 int4, a tile's results out", "bmc", 6,
          lambda: array_harness(2, 2)),
    Check("array_2x2_d8", "hdl/array.py", "2 x 2 int4, two tiles back to back", "bmc", 8,
          lambda: array_harness(2, 2), fast=False),
    Check("array_2x2_d12", "hdl/array.py", "2 x 2 int4, three tiles", "bmc", 12,
          lambda: array_harness(2, 2), fast=False),
    Check("array_3x3_d10", "hdl/array.py", "3 x 3 int4, two tiles", "bmc", 10,
          lambda: array_harness(3, 3), fast=False, timeout=1800),
    Check("array_cover", "hdl/array.py", "2 x 2: tiles back to back, results out", "cover", 12,
          lambda: array_harness(2, 2, covers=True), fast=False),
    Check("array_fault", "hdl/array.py", "mutant: the array's debug fault", "bmc", 8,
          lambda: array_harness(2, 2, mutant="fault"), "FAIL", fast=False),
    Check("array_mixed_tile", "hdl/array.py", "mutant: expected a mixed tile", "bmc", 8,
          lambda: array_harness(2, 2, mutant="mixed_tile"), "FAIL", fast=False),
    # The accumulator buffer's read-modify-write.
    Check("acc_rmw", _A, "4 rows x 2 lanes of 16 bits", "prove", 4,
          lambda: accumulator_harness(4, 2)),
    Check("acc_cover", _A, "two accumulations, then a read", "cover", 10,
          lambda: accumulator_harness(4, 2, covers=True), fast=False),
    Check("acc_gap2", _A, "mutant: requests to a row 2 cycles apart", "prove", 6,
          lambda: accumulator_harness(4, 2, mutant="gap2"), "FAIL"),
    Check("acc_overwrite_adds", _A, "mutant: expected overwrite adds", "bmc", 10,
          lambda: accumulator_harness(4, 2, mutant="overwrite_adds"), "FAIL", fast=False),
    # The link: the UART receiver and the frame receiver.
    Check("uart_rx", _U, "4 clocks a bit", "prove", 48, lambda: uart_harness(4)),
    Check("uart_cover", _U, "a byte received after the bound", "cover", 90,
          lambda: uart_harness(4, covers=True), fast=False),
    Check("uart_short_bound", _U, "mutant: a bound 6 cycles short", "bmc", 48,
          lambda: uart_harness(4, mutant="short_bound"), "FAIL"),
    Check("uart_stop_low", _U, "mutant: the stop bit sent low", "bmc", 90,
          lambda: uart_harness(4, mutant="stop_low"), "FAIL", fast=False),
    Check("frame_rx", _R, "1-byte payload, timeout 12, noise first", "bmc", 115,
          lambda: frame_harness(12), fast=False, timeout=1800),
    Check("frame_cover", _R, "a good frame reported after noise", "cover", 115,
          lambda: frame_harness(12, covers=True), fast=False),
    Check("frame_ignore_error", _R, "mutant: the frame's error ignored", "bmc", 115,
          lambda: frame_harness(12, mutant="ignore_error"), "FAIL", fast=False),
    Check("frame_no_quiet", _R, "mutant: no quiet time before the frame", "bmc", 115,
          lambda: frame_harness(12, mutant="no_quiet"), "FAIL", fast=False),
    # The controller's interlocks (bounded): no hazard on a row of the UB or the accumulators.
    Check("interlock_ub", _K, "2 x 2 int4, 4 UB rows, any valid program", "bmc", IL_UB_DEPTH,
          _il("ub"), fast=False, timeout=3600),
    Check("interlock_ub_cover", _K, "every UB hazard, back to back", "cover", IL_UB_DEPTH,
          _il("ub", covers=True), fast=False),
    Check("interlock_ub_raw", _K, "mutant: no READ_HOST interlock for readers", "bmc",
          IL_UB_DEPTH, _il("ub", mutant="ub_raw"), "FAIL", fast=False),
    Check("interlock_ub_war", _K, "mutant: no MATMUL interlock for writers", "bmc",
          IL_UB_DEPTH, _il("ub", mutant="ub_war"), "FAIL", fast=False),
    Check("interlock_acc", _K, "2 x 2 int4, 4 ACC rows, any valid program", "bmc",
          IL_ACC_DEPTH, _il("acc"), fast=False, timeout=5400),
    Check("interlock_acc_cover", _K, "every ACC hazard, back to back", "cover", IL_ACC_DEPTH,
          _il("acc", covers=True), fast=False),
    Check("interlock_acc_raw", _K, "mutant: no drain interlock", "bmc", IL_ACC_DEPTH,
          _il("acc", mutant="acc_raw"), "FAIL", fast=False, timeout=3600),
    Check("interlock_acc_war", _K, "mutant: no ACTIVATE interlock for MATMUL", "bmc",
          IL_ACC_DEPTH, _il("acc", mutant="acc_war"), "FAIL", fast=False, timeout=3600),
    # The stream rules on every stream port of the core and the link, under free inputs.
    *(Check(f"streams_{kind}", STREAM_PORTS[kind], sizes, mode, depth, _st(kind),
            fast=kind == "activation") for kind, sizes, mode, depth, _ in _LEAVES),
    *(Check(f"streams_{kind}_cover", STREAM_PORTS[kind], "a beat waits, then goes", "cover",
            depth, _st(kind, covers=True), fast=False) for kind, *_, depth in _LEAVES),
    Check("streams_core", STREAM_PORTS["core"], "2 x 2 int4: `host_out` and 7 inner streams",
          "bmc", STREAM_DEPTH, _st("core"), fast=False),
    Check("streams_core_cover", STREAM_PORTS["core"], "a beat of 5 of them waits, then goes",
          "cover", STREAM_DEPTH, _st("core", covers=CORE_COVERS), fast=False),
    Check("streams_bridge", STREAM_PORTS["bridge"], "2 x 2 int4: `rsp`, `core.cmd`, "
          "`core.host_in`", "bmc", STREAM_DEPTH, _st("bridge"), fast=False),
    Check("streams_bridge_cover", STREAM_PORTS["bridge"], "a beat of each waits, then goes",
          "cover", STREAM_DEPTH, _st("bridge", covers=True), fast=False),
    Check("streams_link", STREAM_PORTS["link"], "`req`, 4-byte payloads, the UART cut off",
          "bmc", LINK_DEPTH, _st("link"), fast=False),
    Check("streams_link_cover", STREAM_PORTS["link"], "a request beat waits, then goes",
          "cover", LINK_DEPTH, _st("link", covers=True), fast=False),
    Check("streams_glitch_link", STREAM_PORTS["link"], "mutant: `req.valid` dropped while "
          "waiting", "bmc", LINK_DEPTH, _st("link", glitch="req"), "FAIL", fast=False),
    Check("streams_glitch_frame_tx", STREAM_PORTS["frame_tx"],
          "mutant: `o.valid` dropped while waiting", "bmc", 6,
          _st("frame_tx", glitch="o"), "FAIL", fast=False),
    Check("streams_glitch_command_source", STREAM_PORTS["command_source"],
          "mutant: `o.valid` dropped while waiting", "bmc", 6,
          _st("command_source", glitch="o"), "FAIL", fast=False),
    Check("streams_glitch_activation", STREAM_PORTS["activation"],
          "mutant: `o.valid` dropped while waiting", "bmc", 14,
          _st("activation", glitch="o"), "FAIL"),
    Check("streams_glitch_core", STREAM_PORTS["core"],
          "mutant: `ctrl.q_in.valid` dropped while waiting", "bmc", STREAM_DEPTH,
          _st("core", glitch="ctrl.q_in"), "FAIL", fast=False),
    Check("streams_glitch_bridge", STREAM_PORTS["bridge"],
          "mutant: `rsp.valid` dropped while waiting", "bmc", STREAM_DEPTH,
          _st("bridge", glitch="rsp"), "FAIL", fast=False),
    # The parameter sets' interlock (READ_QUANT / ACTIVATE, bounded).
    Check("qset", _K, "2 x 2 int4, 2 parameter sets, READ_QUANT / ACTIVATE programs", "bmc",
          QSET_DEPTH, lambda: qset_harness(), fast=False, timeout=3600),
    Check("qset_cover", _K, "both parameter-set hazards, back to back", "cover", QSET_DEPTH,
          lambda: qset_harness(covers=True), fast=False),
    Check("qset_raw", _K, "mutant: ACTIVATE no longer waits for READ_QUANT", "bmc", QSET_DEPTH,
          lambda: qset_harness(mutant="raw"), "FAIL", fast=False),
    Check("qset_war", _K, "mutant: READ_QUANT no longer waits for ACTIVATE", "bmc", QSET_DEPTH,
          lambda: qset_harness(mutant="war"), "FAIL", fast=False),
    # The requantizer against its spec (bounded: one row through the pipeline).
    Check("requant_min", _Q, "q = INT32_MIN, 12-bit acc and bias, any shift, zp, bounds",
          "bmc", RQ_DEPTH, _rq("min"), fast=False),
    Check("requant_half", _Q, "q = 2**30 + 1, 12-bit acc and bias, any shift, zp, bounds",
          "bmc", RQ_DEPTH, _rq("half"), fast=False),
    Check("requant_max", _Q, "q = INT32_MAX, 12-bit acc and bias, any shift, zp, bounds",
          "bmc", RQ_DEPTH, _rq("max"), fast=False),
    Check("requant_cover", _Q, "a row out, not the zero point", "cover", RQ_DEPTH,
          _rq("half", covers=True), fast=False),
    Check("requant_half_up", _Q, "mutant: expected halves rounded up", "bmc", RQ_DEPTH,
          _rq("half", mutant="half_up"), "FAIL", fast=False),
    Check("requant_no_window", _Q, "mutant: the window's overflow flag tied to 0", "bmc",
          RQ_DEPTH, _rq("half", mutant="no_window"), "FAIL", fast=False),
)


def check(name: str) -> Check:
    """The check called ``name``."""
    for c in CHECKS:
        if c.name == name:
            return c
    raise KeyError(f"no formal check {name!r}")


def run_check(c: Check) -> FormalResult:
    """Run ``c`` with SBY (into ``build_root()/formal/<name>/``)."""
    return run_sby(c.name, c.build(), mode=c.mode, depth=c.depth, timeout=c.timeout)
