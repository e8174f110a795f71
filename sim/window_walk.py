"""The window walk's golden model (``hdl.window`` states the contract): the SHAPE and AT
registers, a window MATMUL's checks at issue, and the vectors it sends the array."""

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.window import WALK_BITS, unpack_at, unpack_shape

__all__ = ["WindowWalk", "walk_pixels"]

_SHAPE, _AT = int(isa.Flag.SHAPE), int(isa.Flag.AT)


def _wrap(v: int) -> int:
    half = 1 << (WALK_BITS - 1)
    return (v + half) % (1 << WALK_BITS) - half


def walk_pixels(shape: dict, at: dict, n: int) -> list[tuple[int, int]]:
    """The input pixels ``(iy, ix)`` of a walk of ``n`` vectors, in order (``hdl.window``)."""
    iy, ix, ox = at["iy"], at["ix"], at["ox"]
    out = []
    for _ in range(n):
        out.append((iy, ix))
        if ox == shape["out_w"] - 1:
            ox, ix, iy = 0, at["ixr"], _wrap(iy + shape["stride"])
        else:
            ox, ix = (ox + 1) & 0xFF, _wrap(ix + shape["stride"])
    return out


class WindowWalk:
    """The two registers and what a window MATMUL does with them, for ``Machine``."""

    def __init__(self, config: Config):
        self.config = config
        self.reset()

    def reset(self) -> None:
        zero = {"src": 0, "dst": 0, "n": 0, "part": 0}
        self.shape, self.at = unpack_shape(zero), unpack_at(zero)

    def nop(self, flags: int, fields: dict) -> None:
        """A NOP: SHAPE and AT set their register (both when both are set)."""
        if not self.config.window:
            return
        if flags & _SHAPE:
            self.shape = unpack_shape(fields)
        if flags & _AT:
            self.at = unpack_at(fields)

    def cause(self, fields: dict) -> isa.Cause:
        """OUT_OF_RANGE at issue: a zero in the SHAPE register, or a plane past the extent."""
        s = self.shape
        if 0 in (s["in_w"], s["in_h"], s["out_w"], s["stride"]):
            return isa.Cause.OUT_OF_RANGE
        if s["in_w"] * s["in_h"] > (fields["part"] + 1) * isa.WINDOW_BLOCK:
            return isa.Cause.OUT_OF_RANGE
        return isa.Cause.NONE

    def pad_lane(self) -> int:
        """The pad lane as the unified buffer holds it (an integer operand sign-extended)."""
        ot = self.config.operand_type
        v = self.shape["pad"] & ((1 << ot.width) - 1)
        if not ot.is_float and v >> (ot.width - 1):
            v -= 1 << ot.width
        return v

    def vectors(self, ub: np.ndarray, src: int, n: int) -> np.ndarray:
        """The ``n`` vectors of a window MATMUL over the plane at ``src`` (n x R)."""
        s = self.shape
        pix = np.array(walk_pixels(s, self.at, n), dtype=np.int64).reshape(n, 2)
        iy, ix = pix[:, 0], pix[:, 1]
        inside = (iy >= 0) & (iy < s["in_h"]) & (ix >= 0) & (ix < s["in_w"])
        rows = np.where(inside, src + iy * s["in_w"] + ix, 0)
        out = ub[rows].copy()
        out[~inside] = self.pad_lane()
        return out
