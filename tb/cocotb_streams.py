"""cocotb stream drivers and monitors for Amaranth ``lib.stream`` ports (valid/ready/payload).

The stream rules are those of ``tpugen.sim.amaranth_streams`` (the Amaranth-simulator drivers): a
transfer happens in a cycle with ``valid`` and ``ready`` high; once ``valid`` is high, it stays
high with the same payload until the transfer; ``ready`` may change in any cycle. Stalls come
from ``tpugen.sim.stalls.StallPattern``, drawn as there (a source draws when it has an item and
no standing offer, a sink every cycle).

All of them sample in the ``ReadOnly`` phase of a cycle (the settled values that the next rising
edge will register) and drive right after the edge.
"""

from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.types import Logic

from tpugen.sim.stalls import StallPattern
from tpugen.sim.stream_rules import StreamRuleError

__all__ = ["StreamSource", "StreamSink", "StreamMonitor", "StreamRuleError", "resolved"]


def resolved(handle, what):
    """The integer value of ``handle``, failing on any X or Z bit."""
    v = handle.value
    if not v.is_resolvable:
        raise StreamRuleError(f"{what} is not resolvable: {v}")
    return int(v) if isinstance(v, Logic) else v.to_unsigned()


class StreamSource:
    """Drives ``<prefix>__valid``/``__payload`` from a queue, with random stalls.

    ``stalls`` (a ``StallPattern``) decides, in each cycle in which an item waits and nothing is
    offered, whether to withhold ``valid``; once ``valid`` is raised it holds, with a stable
    payload, until the transfer. ``transfers`` records the cycle (``cycle()``) of every
    transfer.
    """

    def __init__(self, dut, prefix, clk, *, stalls=None, cycle=None):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.clk = clk
        self.stalls = stalls or StallPattern()
        self.cycle = cycle or (lambda: 0)
        self.queue = []
        self.transfers = []
        self.valid.value = 0
        self.payload.value = 0

    def send(self, word: int):
        self.queue.append(word)

    def flush(self):
        """Forget every queued item and stop driving (for a reset of the DUT)."""
        self.queue.clear()
        self.driving = False
        self.valid.value = 0

    def idle(self):
        return not self.queue

    async def run(self):
        self.driving = False
        while True:
            await ReadOnly()
            took = self.driving and resolved(self.ready, f"{self.ready._name}") == 1
            now = self.cycle()
            await RisingEdge(self.clk)
            if took and self.driving:  # a flush() since ReadOnly cancels the transfer
                self.queue.pop(0)
                self.transfers.append(now)
                self.driving = False
            if not self.driving and self.queue and not self.stalls.stall():
                self.driving = True
            self.valid.value = int(self.driving)
            if self.driving:
                self.payload.value = self.queue[0]


class StreamMonitor:
    """Checks the stream rules on a port in every cycle and collects its transfers.

    Rules: after reset, ``valid`` (and ``ready`` when present) are never X/Z; a payload is
    never X/Z while ``valid``; once ``valid`` is high without ``ready``, ``valid`` stays high
    and the payload stays the same until the transfer. ``on_transfer(cycle, payload)`` is
    called for every transfer.
    """

    def __init__(self, dut, prefix, clk, *, has_ready=True, on_transfer=None, cycle=None,
                 in_reset=None):
        self.prefix = prefix
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready") if has_ready else None
        self.payload = getattr(dut, f"{prefix}__payload")
        self.clk = clk
        self.on_transfer = on_transfer
        self.cycle = cycle or (lambda: 0)
        self.in_reset = in_reset or (lambda: False)
        self.count = 0

    async def run(self):
        pending = None  # payload offered but not taken in the previous cycle
        while True:
            await ReadOnly()
            if self.in_reset():
                pending = None
                await RisingEdge(self.clk)
                continue
            valid = resolved(self.valid, f"{self.prefix}.valid")
            ready = 1 if self.ready is None else resolved(self.ready, f"{self.prefix}.ready")
            payload = resolved(self.payload, f"{self.prefix}.payload") if valid else None
            if pending is not None:
                if not valid:
                    raise StreamRuleError(f"{self.prefix}: valid dropped before the transfer "
                                          f"(cycle {self.cycle()})")
                if payload != pending:
                    raise StreamRuleError(f"{self.prefix}: payload changed while waiting for "
                                          f"ready (cycle {self.cycle()})")
            if valid and ready:
                self.count += 1
                if self.on_transfer:
                    self.on_transfer(self.cycle(), payload)
                pending = None
            else:
                pending = payload if valid else None
            await RisingEdge(self.clk)


class StreamSink:
    """Drives ``<prefix>__ready``, held low in the cycles ``stalls`` (a ``StallPattern``) says.

    It draws once per cycle while ``active``; while not active (a harness's reset) it holds
    ``ready`` low and draws nothing, so that its first draw falls in the cycle the harness
    calls 0, as in the other harnesses. Transfers are collected by a ``StreamMonitor`` on the
    same port.
    """

    def __init__(self, dut, prefix, clk, *, stalls=None):
        self.ready = getattr(dut, f"{prefix}__ready")
        self.clk = clk
        self.stalls = stalls or StallPattern()
        self.active = True
        self.ready.value = 0

    async def run(self):
        while True:
            await RisingEdge(self.clk)
            self.ready.value = int(self.active and not self.stalls.stall())
