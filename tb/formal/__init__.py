"""Formal verification of the core's contracts with SymbiYosys (``docs/formal.md``).

- ``sby``: the runner (``run_sby``: RTLIL and an ``.sby`` file into the build directory,
  ``yowasp-sby`` with the YoWASP tools and the PyPI SMT solvers, the verdict parsed).
- ``observe``: a component's memories (``lib.memory``'s public ports) and registers (probes bound
  in the netlist), for k-induction invariants; netlist transforms and mutants.
- ``stream_check``: the ``lib.stream`` rules as properties, free stream ends.
- The harnesses: ``fifo_props`` (the weight FIFO), ``cell_props`` (the MAC cell, delay lines),
  ``array_props`` (the systolic array), ``acc_props`` (the accumulator's read-modify-write),
  ``interlock_props`` (the controller's interlocks on the buffers), ``qset_props`` (its
  interlock on the parameter sets), ``requant_props`` (the requantizer against its spec),
  ``link_props`` (the UART receiver, the frame receiver), ``read_ahead_props`` (the engines'
  read-ahead queue), ``stream_props`` (the stream rules on every stream port of a component:
  the core, the link and their parts).
- ``exhaustive``: every operand pair (and every rounding corner of the requantizer) in the
  simulator, where a proof is too wide.
- ``catalog``: every check and mutant, in one table (``python -m tpugen.tb.formal`` runs them).
"""
