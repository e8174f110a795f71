"""Test-suite wide settings: the test tiers.

Every test gets one tier marker, assigned here and nowhere else (``TIERS``: each file's tier,
the heaviest tool its tests use; ``HEAVIER``: single tests above their file's tier):

  ``unit``      pure Python (golden model, compiler, configs, host link over fakes, the CLI's
                argument checks): seconds.            ``make test-unit``
  ``gateware``  the Amaranth simulator.               ``make test-gateware``
  ``rtl``       generated Verilog in Icarus or Verilator (cocotb, the simulated board), and
                Verilator lint.                       ``make test-rtl``
  ``pnr``       place and route with the YoWASP tools: small builds (the iCEBreaker board top
                at its default) in the default suite.  ``make test-pnr``

Orthogonal to the tiers, ``slow`` (64 x 64 arrays, 256 x 256 lint: ``make test-slow``) and
``fpga`` (full-size place-and-route: ``make test-fpga``) are left out of ``make test``, which
runs everything else. A cold machine compiles each YoWASP tool on first use (about 2 minutes
each), inside the default suite's budget. ``tests/test_tiers.py`` checks that every test file
has a tier.
"""

import pytest

#: The tiers, lightest first.
TIER_NAMES = ("unit", "gateware", "rtl", "pnr")

#: Each test file's tier: the heaviest tool its tests use (``HEAVIER`` lists the exceptions).
TIERS = {
    "test_accelerator.py": "unit",
    "test_batching.py": "unit",
    "test_cache.py": "unit",
    "test_new_user.py": "unit",
    "test_bench_tables.py": "unit",
    "test_house.py": "unit",
    "test_cli.py": "unit",
    "test_chain.py": "unit",
    "test_compiler.py": "unit",
    "test_config.py": "unit",
    "test_float_golden.py": "unit",
    "test_formats.py": "unit",
    "test_formats_backends.py": "rtl",
    "test_fuzz.py": "unit",
    "test_host_link.py": "unit",
    "test_imports.py": "unit",
    "test_isa.py": "unit",
    "test_machine.py": "unit",
    "test_measured.py": "unit",
    "test_packaging.py": "unit",
    "test_program.py": "unit",
    "test_tiers.py": "unit",
    "test_traffic.py": "unit",
    "test_resident.py": "unit",
    "test_window.py": "unit",
    "test_pool_quant.py": "unit",
    "test_planes.py": "unit",
    "test_tflite_window.py": "unit",
    "test_tflite_pool_window.py": "unit",
    "test_tflite_window_rtl.py": "rtl",
    "test_resident_rtl.py": "rtl",
    "test_window_rtl.py": "rtl",
    "test_board_resident.py": "rtl",
    "test_mnist_resident.py": "rtl",
    "test_trace.py": "unit",
    "test_floorplan.py": "unit",
    "test_requant.py": "unit",
    "test_references.py": "unit",
    "test_tflite_models.py": "unit",
    "test_tflite_infer.py": "unit",
    "test_tflite_ops.py": "unit",
    "test_corpus.py": "rtl",
    "test_mnist_example.py": "unit",
    "test_training.py": "unit",
    "test_readme.py": "rtl",
    "test_accumulator.py": "gateware",
    "test_activation.py": "gateware",
    "test_array_amaranth.py": "gateware",
    "test_bridge.py": "gateware",
    "test_cell.py": "gateware",
    "test_core_amaranth.py": "gateware",
    "test_float_convert.py": "gateware",
    "test_float_mul.py": "gateware",
    "test_fp32_add.py": "gateware",
    "test_framing.py": "gateware",
    "test_uart.py": "gateware",
    "test_unified_buffer.py": "gateware",
    "test_weight_fifo.py": "gateware",
    "test_array_cocotb.py": "rtl",
    "test_board_e2e.py": "rtl",
    "test_board_run.py": "rtl",
    "test_tflite_backends.py": "rtl",
    "test_training_rtl.py": "rtl",
    "test_cell_pipeline.py": "rtl",
    "test_core_cocotb.py": "rtl",
    "test_dsp_cells.py": "rtl",
    "test_harness.py": "rtl",
    "test_trace_rtl.py": "rtl",
    "test_lint.py": "rtl",
    "test_waves.py": "rtl",
    "test_formal.py": "rtl",
    "test_formal_slow.py": "rtl",
    "test_fpga_build.py": "pnr",
    "test_fpga_build_ecp5.py": "pnr",
}

#: Tests above their file's tier: ``file::test`` (any parameters) -> tier. A test whose
#: parameters name a simulator is at least that simulator's tier (``_from_params``).
HEAVIER = {
    "test_accelerator.py::test_a_wrong_result_raises_with_the_first_mismatch": "gateware",
    "test_accelerator.py::test_simulator_options_are_checked": "gateware",
    "test_cli.py::test_verilog_writes_files_that_both_simulators_accept": "rtl",
    "test_compiler.py::test_40x5000x9_on_verilator": "rtl",
    "test_cli.py::test_ctrl_c_is_one_line_exit_130": "rtl",
    "test_cli.py::test_sim_icarus_config_and_operands": "rtl",
    "test_cli.py::test_demo_fails_with_a_fault": "rtl",
    "test_fuzz.py::test_fuzz_on_amaranth_with_stalls": "gateware",
    "test_host_link.py::test_link_with_simulated_gateware": "gateware",
    "test_host_link.py::test_link_resynchronises_after_a_half_sent_frame": "gateware",
}

#: Parameter ids that name a simulator, and its tier.
_SIMULATOR_TIERS = {"amaranth": "gateware", "icarus": "rtl", "verilator": "rtl"}


def _from_params(item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return "unit"
    words = set()
    for value in callspec.params.values():
        if isinstance(value, str):
            words.add(value)
    return max((_SIMULATOR_TIERS.get(w, "unit") for w in words), key=TIER_NAMES.index,
               default="unit")


def tier_of(item) -> str | None:
    """The tier of a collected test (None for a file without one)."""
    path = item.path.name
    tier = TIERS.get(path)
    if tier is None:
        return None
    tier = max(tier, HEAVIER.get(f"{path}::{item.originalname}", "unit"), _from_params(item),
               key=TIER_NAMES.index)
    return tier


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = tier_of(item)
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))
