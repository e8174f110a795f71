"""Fixed delay lines, cheap to elaborate at any depth."""

from amaranth.hdl import Cat, Signal, Value
from amaranth.lib.memory import Memory

__all__ = ["delay", "delay_taps", "MEMORY_DELAY_MIN"]

#: Delays of at least this many cycles use a ring buffer in a ``Memory``; shorter ones use
#: registers (FPGA arrays up to 16 x 16 stay in flip-flops).
MEMORY_DELAY_MIN = 16


def delay(m, value, cycles, *, name="dly", reset_less_ok=True):
    """Return ``value`` delayed by ``cycles`` clock cycles of ``m.d.sync`` (0: ``value``).

    Short delays are one packed shift register (one signal, one statement). Delays of
    ``MEMORY_DELAY_MIN`` cycles or more are a ring buffer in a ``lib.memory.Memory`` whose cost
    to elaborate does not grow with the depth. With ``reset_less_ok`` (the default) the line is
    not cleared by reset (a shift register without reset, or a memory), so after a reset it
    gives stale data for ``cycles`` cycles: use it only for data whose validity travels in a
    separate (reset) flag; ``reset_less_ok=False`` gives a shift register that reset clears.
    """
    value = Value.cast(value)
    if cycles == 0:
        return value
    w = len(value)
    if cycles >= MEMORY_DELAY_MIN and reset_less_ok:
        out = _memory_delay(m, value, cycles, name)
    else:
        sr = Signal(w * cycles, name=name, reset_less=reset_less_ok)
        m.d.sync += sr.eq(Cat(value, sr[:w * (cycles - 1)]) if cycles > 1 else value)
        out = sr[w * (cycles - 1):]
    return out.as_signed() if value.shape().signed else out


def _memory_delay(m, value, cycles, name):
    # Write at ptr, read (not transparent) at ptr - cycles + 1: the registered read data in
    # cycle t + 1 is what was written in cycle t - cycles + 1.
    depth = 1 << (cycles - 1).bit_length()
    mem = Memory(shape=len(value), depth=depth, init=[])
    m.submodules[name] = mem
    ptr = Signal(range(depth), name=f"{name}_ptr")
    m.d.sync += ptr.eq(ptr + 1)
    wp = mem.write_port()
    rp = mem.read_port()
    m.d.comb += [
        wp.addr.eq(ptr), wp.data.eq(value), wp.en.eq(1),
        rp.addr.eq(ptr - (cycles - 1)),
    ]
    return rp.data


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
