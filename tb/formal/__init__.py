"""Formal verification of the core's contracts with SymbiYosys (``docs/formal.md``).

- ``sby``: the runner (``run_sby``: RTLIL and an ``.sby`` file into the build directory,
  ``yowasp-sby`` with the YoWASP tools and the PyPI SMT solvers, the verdict parsed).
- ``whitebox``: a component's internal registers and memory rows, for k-induction invariants.
- ``stream_check``: the ``lib.stream`` rules as properties, free stream ends.
- The harnesses: ``fifo_props`` (the weight FIFO), ``cell_props`` (the MAC cell, delay lines),
  ``array_props`` (the systolic array), ``acc_props`` (the accumulator's read-modify-write),
  ``link_props`` (the UART receiver, the frame receiver).
- ``exhaustive``: every operand pair in the simulator, where a proof is too wide.
- ``catalog``: every check and mutant, in one table (``python -m tpugen.tb.formal`` runs them).
"""
