"""Argument checks shared by every layer, with Amaranth-style messages.

``check_int("rows", value, 1, 256)`` raises ``TypeError("rows must be an integer, not 'x'")``
for a non-integer (a ``bool`` is not an integer; a NumPy integer is, and comes back as ``int``)
and ``ValueError("rows must be in 1..256, not 0")`` for a value out of range (``None`` for a
bound means no bound: ``"must be >= 1"``, ``"must be <= 7"``). ``check_choice`` and
``check_instance`` do the same for a name out of a set and for an object's type.
"""

from typing import Any

import numpy as np

__all__ = ["check_int", "check_choice", "check_instance"]


def check_int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an ``int``: a Python or NumPy integer (not a bool) in ``lo..hi``."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if lo is not None and hi is not None:
            bound = f"in {lo}..{hi}"
        else:
            bound = f">= {lo}" if lo is not None else f"<= {hi}"
        raise ValueError(f"{name} must be {bound}, not {value!r}")
    return value


def check_choice(name: str, value: Any, choices) -> str:
    """``value``, a string that is one of ``choices``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {value!r}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, not {value!r}")
    return value


def check_instance(name: str, value: Any, cls: type, what: str | None = None) -> Any:
    """``value``, an instance of ``cls`` (``TypeError`` naming ``what``, by default "a " and the
    class's name, otherwise)."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be {what or 'a ' + cls.__name__}, not {value!r}")
    return value
