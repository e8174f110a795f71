"""Test-suite wide settings.

Place-and-route runs: the small ones (the whole board top at 2x2 on the iCEBreaker and 4x4 on
the ULX3S, an unreachable clock) are in the default suite; full-size builds carry
``@pytest.mark.fpga`` and run with ``make test-fpga``. A cold machine compiles each YoWASP tool
on first use (about 2 minutes each), inside the default suite's budget.
"""
