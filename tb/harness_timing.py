"""The run timing that the cocotb bench (``tpugen.tb.core_tb``) and the compiled Verilator
harness (``harness/core_harness.cpp``, through the header ``tpugen.tb.verilator_harness``
generates) share. No imports: ``core_tb`` loads it inside the cocotb simulator process."""

__all__ = ["RESET_EDGES", "RESULT_DELAY"]

#: Clock edges with ``rst`` high in a reset (then one idle edge with ``rst`` low, then cycle 0).
RESET_EDGES = 3
#: Cycles from the end of a run (the cycle it is done in) to its status read.
RESULT_DELAY = 4
