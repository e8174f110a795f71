"""Fixed delay lines, one packed shift register each (cheap to elaborate at any depth)."""

from amaranth.hdl import Cat, Signal, Value

__all__ = ["delay", "delay_taps"]


def delay(m, value, cycles, *, name="dly"):
    """Return ``value`` delayed by ``cycles`` clock cycles of ``m.d.sync`` (0: ``value``).

    The line is one shift register of ``len(value) * cycles`` bits, so that an R-deep skew
    costs one signal and one statement, not R of each. Reset to zero.
    """
    value = Value.cast(value)
    if cycles == 0:
        return value
    w = len(value)
    sr = Signal(w * cycles, name=name)
    if cycles == 1:
        m.d.sync += sr.eq(value)
    else:
        m.d.sync += sr.eq(Cat(value, sr[:w * (cycles - 1)]))
    out = sr[w * (cycles - 1):]
    return out.as_signed() if value.shape().signed else out


def delay_taps(m, value, cycles, *, name="taps"):
    """Return ``[value delayed by 1, 2, ..., cycles]``: the taps of one shift register."""
    value = Value.cast(value)
    if cycles == 0:
        return []
    w = len(value)
    sr = Signal(w * cycles, name=name)
    m.d.sync += sr.eq(Cat(value, sr[:w * (cycles - 1)]) if cycles > 1 else value)
    taps = [sr[w * k:w * (k + 1)] for k in range(cycles)]
    return [t.as_signed() for t in taps] if value.shape().signed else taps
