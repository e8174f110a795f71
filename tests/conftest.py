"""Test-suite wide settings."""

import pytest

#: Place-and-route runs (tests/test_fpga_build.py) that need the YoWASP tools compiled (about 2
#: minutes per tool on a cold machine) and then a minute or more each: they run with
#: `make test-fpga` (pytest -m fpga), not in the default suite, until their cold-machine cost is
#: measured within the suite's budget.
_PLACE_AND_ROUTE = ("_array", "_board_top", "unreachable_timing")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.endswith("test_fpga_build") and any(
                key in item.name for key in _PLACE_AND_ROUTE):
            item.add_marker(pytest.mark.fpga)
