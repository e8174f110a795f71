"""The slower formal checks (``formal`` marker: ``make test-formal``): the wide proofs, the
array and the frame receiver's bounded checks, covers and mutants that take more than seconds,
and every fp8 product through the float multiplier."""

import pytest
from test_formal import assert_verdict

from tpugen.tb.formal.catalog import CHECKS, check, run_check
from tpugen.tb.formal.exhaustive import fp8_products

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
