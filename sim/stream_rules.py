"""The stream rules every driver and monitor checks, and the error they raise.

A transfer happens in a cycle in which ``valid`` and ``ready`` are both high; once a source
raises ``valid``, it keeps ``valid`` high and the payload unchanged until that transfer;
``ready`` may change in any cycle; a stream carries no beat after its last one. The Amaranth
simulator's drivers (``tpugen.sim.amaranth_streams``) and the cocotb drivers
(``tpugen.tb.cocotb_streams``) raise ``StreamRuleError`` when a port breaks them (cocotb's also
when a port carries X or Z where a value is required).
"""

__all__ = ["StreamRuleError"]


class StreamRuleError(AssertionError):
    """A port broke the stream rules (or carried X/Z where a value was required)."""
