"""The slower formal checks (``formal`` marker: ``make test-formal``): the wide proofs, the
array's, the frame receiver's, the interlocks' and the requantizer's bounded checks, covers and
mutants that take more than seconds, every fp8 product through the float multiplier and every
rounding corner of the requantizer."""

import pytest
from test_formal import assert_verdict

from tpugen.tb.formal.catalog import CHECKS, check, run_check
from tpugen.tb.formal.exhaustive import fp8_products, requant_corners

pytestmark = pytest.mark.formal


@pytest.mark.parametrize("name", [c.name for c in CHECKS if not c.fast])
def test_slow_checks(name):
    c = check(name)
    assert_verdict(c, run_check(c))


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_every_product(name):
    """Every operand pair through ``FloatMul``, against ``sim.float_golden``."""
    bad, first = fp8_products(name)
    assert bad == 0, first


@pytest.mark.parametrize("act_mult", ["parallel", "serial"])
def test_requant_every_corner(act_mult):
    """Every rounding corner of ``exhaustive.requant_cases`` through the activation unit,
    against ``sim.requant``."""
    bad, first = requant_corners(act_mult)
    assert bad == 0, first
