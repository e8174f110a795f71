"""Helpers shared by the test files."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

__all__ = ["assert_rejects"]


def assert_rejects(make, exc, match):
    """``make()`` raises ``exc`` matching ``match``. The component object that Amaranth created
    before ``__init__`` raised is collected here, so its "created but never used" warning
    (it never was elaborated) does not surface in a later test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(exc, match=match):
            make()
        gc.collect()
