"""Every test file has a tier (tests/conftest.py), and every exception listed there names a
test that exists."""

import ast
from pathlib import Path

from conftest import HEAVIER, TIER_NAMES, TIERS

HERE = Path(__file__).resolve().parent


def test_every_test_file_has_a_tier():
    files = sorted(p.name for p in HERE.glob("test_*.py"))
    assert [f for f in files if f not in TIERS] == [], "add them to TIERS in tests/conftest.py"
    assert [f for f in TIERS if f not in files] == []
    assert set(TIERS.values()) <= set(TIER_NAMES)


def test_heavier_tests_exist():
    for key, tier in HEAVIER.items():
        name, test = key.split("::")
        tree = ast.parse((HERE / name).read_text())
        tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert test in tests, key
        assert TIER_NAMES.index(tier) > TIER_NAMES.index(TIERS[name]), key
