"""NumPy golden model of the activation unit's requantization (bit-exact to ``hdl.activation``)."""

import numpy as np

__all__ = ["requantize", "check_quant_params"]


def check_quant_params(mult, shift, zp, relu) -> tuple[int, int, int, int]:
    """Validate QUANT parameters (``hdl.isa.QUANT_LAYOUT`` ranges); return them as ints."""
    for name, v, lo, hi in (("mult", mult, -(1 << 31), (1 << 31) - 1), ("shift", shift, 0, 63),
                            ("zp", zp, -128, 127), ("relu", relu, 0, 1)):
        if isinstance(v, bool) and name != "relu":
            raise TypeError(f"{name} must be an integer, not {v!r}")
        if not isinstance(v, int | np.integer | bool):
            raise TypeError(f"{name} must be an integer, not {v!r}")
        if not lo <= int(v) <= hi:
            raise ValueError(f"{name} must be in {lo}..{hi}, not {v!r}")
    return int(mult), int(shift), int(zp), int(relu)


def requantize(acc, mult, shift, zp, relu) -> np.ndarray:
    """Requantize accumulator values to int8, exactly as the activation unit does.

    Per element: ``t = (acc * mult + r) mod 2**64`` as a 64-bit two's-complement number, with
    ``r = 1 << (shift - 1)`` for ``shift >= 1`` and ``r = 0`` for ``shift == 0`` (round half
    toward +infinity); ``y = t >> shift`` (arithmetic); ``q = clamp(y + zp, lo, 127)`` with an
    exact addition and ``lo = zp`` if ``relu`` else ``-128``.

    ``acc`` is any integer array whose values fit in int64 (accumulators of up to 64 bits);
    the result has the same shape, dtype int64, values in -128..127.
    """
    mult, shift, zp, relu = check_quant_params(mult, shift, zp, relu)
    acc = np.asarray(acc)
    if acc.dtype.kind not in "iu" and acc.size:
        raise TypeError(f"acc must be an integer array, not dtype {acc.dtype}")
    acc = acc.astype(np.int64)
    r = np.int64(1 << (shift - 1)) if shift else np.int64(0)
    with np.errstate(over="ignore"):
        t = acc * np.int64(mult) + r          # int64 arithmetic wraps modulo 2**64
    y = t >> np.int64(shift)                  # arithmetic shift of int64
    lo = zp if relu else -128
    # y + zp is exact: clip y first (the bounds are within -255..255), then add.
    return np.clip(y, lo - zp, 127 - zp) + np.int64(zp)
