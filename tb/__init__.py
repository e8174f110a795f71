"""cocotb testbenches, run inside the simulators (``tpugen.sim.runner.Build.run``).

The names below are the cocotb test modules, by the import name the simulator's Python uses.
"""

__all__ = ["ARRAY_TEST_MODULE", "CORE_TEST_MODULE", "BOARD_TEST_MODULE"]

#: The array's tests (``test_array.py``).
ARRAY_TEST_MODULE = f"{__name__}.test_array"
#: The core's program runner (``test_core.py``): what the icarus and verilator backends run.
CORE_TEST_MODULE = f"{__name__}.test_core"
#: The board top's tests over its UART (``test_board.py``).
BOARD_TEST_MODULE = f"{__name__}.test_board"
