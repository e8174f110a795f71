"""Random valid/ready stalls that every harness draws the same way.

One ``StallPattern`` per stream decides, cycle by cycle, whether that stream stalls: a source
withholds a new offer, a sink holds ``ready`` low. The generator is a 32-bit xorshift with a
documented seeding, so that the Amaranth-simulator drivers (``tpugen.sim.amaranth_streams``), the
cocotb drivers (``tpugen.tb.cocotb_streams``) and a compiled harness can draw the very same
decisions and
reach the same cycle counts on the same program.

Contract (everything modulo 2**32):

    state0 = seed * 0x9E3779B1 + (stream + 1) * 0x85EBCA6B      (1 if that is 0)
    next:    x ^= x << 13;  x ^= x >> 17;  x ^= x << 5
    stall:   (x >> 16) < round(p * 65536)

``p`` is the stall probability per draw, 0 <= p < 1 (1 would stall forever). A source draws
only in cycles where it has an item and no offer standing (an offer, once made, stands until it
is taken); a sink draws every cycle.
"""

__all__ = ["StallPattern"]

_MASK = 0xFFFF_FFFF


class StallPattern:
    """The stall decisions of one stream: ``stall()`` draws the next one.

    ``p``: probability of a stall per draw (0 <= p < 1); ``seed`` (an integer >= 0) and
    ``stream`` (the stream's index in its harness, >= 0) select the sequence.
    """

    def __init__(self, p: float = 0.0, seed: int = 0, stream: int = 0):
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p < 1:
            raise ValueError(f"p must be a probability in [0, 1), not {p!r}")
        for name, v in (("seed", seed), ("stream", stream)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {v!r}")
        self.p = p
        self.threshold = round(p * 65536)
        self.state = (seed * 0x9E3779B1 + (stream + 1) * 0x85EBCA6B) & _MASK or 1

    def stall(self) -> bool:
        """The next decision: True means stall in this cycle."""
        if not self.threshold:            # p == 0: never stalls (the state is not used)
            return False
        x = self.state
        x ^= (x << 13) & _MASK
        x ^= x >> 17
        x ^= (x << 5) & _MASK
        self.state = x
        return (x >> 16) < self.threshold
