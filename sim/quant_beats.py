"""The host-in beats of a READ_QUANT parameter set (the format ``hdl.isa`` defines), both ways.

``set_beats(params, cols)`` packs one ``QuantParams`` of ``cols`` channels (the C output lanes
of one n-tile) into ``QUANT_BEATS`` beats of ``cols`` int8 lanes; ``RawSet.from_beats`` reads
beats back the way the hardware does (the golden machine uses it, so that a program with
arbitrary data is modelled exactly).
"""

from dataclasses import dataclass

import numpy as np

import tpugen.hdl.isa as isa
from tpugen.sim.requant import QuantParams, requantize_lanes

__all__ = ["set_beats", "raw_set_beats", "RawSet"]


def _int8(values) -> np.ndarray:
    """Bytes 0..255 as int8 lane values."""
    v = np.asarray(values, dtype=np.int64) & 0xFF
    return np.where(v >= 128, v - 256, v)


def set_beats(params: QuantParams, cols: int) -> np.ndarray:
    """The ``QUANT_BEATS`` x ``cols`` int8 beats of one parameter set for ``cols`` lanes
    (per-channel parameters must have ``cols`` channels; the layer values go in lane 0, the
    other lanes of those beats are 0)."""
    if not isinstance(params, QuantParams):
        raise TypeError(f"params must be QuantParams, not {params!r}")
    bias, mult, shift = params.per_channel(cols)
    return raw_set_beats(bias, mult, shift, params.out_zp, params.act_min, params.act_max)


def raw_set_beats(bias, mult, shift, zp, lo, hi) -> np.ndarray:
    """The beats of one set from raw values (per lane ``bias``, ``mult``, ``shift``: arrays of
    C; ``zp``, ``lo``, ``hi``: int8, ``lo > hi`` allowed), as a fuzzer sends them."""
    bias, mult, shift = (np.asarray(a, dtype=np.int64) for a in (bias, mult, shift))
    cols = len(bias)
    beats = np.zeros((isa.QUANT_BEATS, cols), dtype=np.int64)
    for k, b in enumerate(isa.QUANT_BIAS_BEATS):
        beats[b] = _int8(bias >> (8 * k))
    for k, b in enumerate(isa.QUANT_MULT_BEATS):
        beats[b] = _int8(mult >> (8 * k))
    beats[isa.QUANT_SHIFT_BEAT] = _int8(shift)
    beats[isa.QUANT_ZP_BEAT, 0] = zp
    beats[isa.QUANT_MIN_BEAT, 0] = lo
    beats[isa.QUANT_MAX_BEAT, 0] = hi
    return beats


@dataclass
class RawSet:
    """A parameter set as the hardware holds it: per lane ``bias``, ``mult`` (int32 arrays),
    ``shift`` (-32..31: the low 6 bits of the shift byte, signed); ``zp``, ``lo``, ``hi``."""

    bias: np.ndarray
    mult: np.ndarray
    shift: np.ndarray
    zp: int = 0
    lo: int = 0
    hi: int = 0

    @classmethod
    def zeros(cls, cols: int) -> "RawSet":
        """The power-up contents: everything 0 (every result then is 0)."""
        z = np.zeros(cols, dtype=np.int64)
        return cls(z.copy(), z.copy(), z.copy())

    def write_beat(self, index: int, lanes: np.ndarray) -> None:
        """Beat ``index`` of the set (``lanes``: its int8 lane values, at least C of them)."""
        cols = len(self.bias)
        u = np.asarray(lanes, dtype=np.int64)[:cols] & 0xFF
        if index in isa.QUANT_BIAS_BEATS or index in isa.QUANT_MULT_BEATS:
            word = self.bias if index in isa.QUANT_BIAS_BEATS else self.mult
            k = 8 * (index % 4)
            raw = (word & 0xFFFF_FFFF) & ~(0xFF << k) | (u << k)
            word[:] = np.where(raw >= 1 << 31, raw - (1 << 32), raw)
        elif index == isa.QUANT_SHIFT_BEAT:
            e = u & 0x3F
            self.shift[:] = np.where(e >= 32, e - 64, e)
        else:
            v = int(_int8(u[0]))
            if index == isa.QUANT_ZP_BEAT:
                self.zp = v
            elif index == isa.QUANT_MIN_BEAT:
                self.lo = v
            elif index == isa.QUANT_MAX_BEAT:
                self.hi = v
            else:
                raise ValueError(f"index must be a beat of a set (0..{isa.QUANT_BEATS - 1}), "
                                 f"not {index!r}")

    def apply(self, acc) -> np.ndarray:
        """Requantize accumulator rows (..., C) with this set (``sim.requant``)."""
        return requantize_lanes(acc, self.bias, self.mult, self.shift, self.zp, self.lo,
                                self.hi)
