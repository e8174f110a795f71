"""The compiled Verilator harness (tb/harness/core_harness.cpp): its stall generator is
``sim.stalls`` bit for bit, a faulty cell makes it FAIL, Ctrl-C ends a run at once and leaves no
simulator behind, and a cached build is reused. (Its results against the cocotb harnesses:
``test_core_cocotb.py``; its waves: ``test_waves.py``.)"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from helpers import interruptible

from tpugen.backends import get_backend
from tpugen.compiler import compile_gemm
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.program import BINARY_MAGIC, BINARY_VERSION, Program
from tpugen.sim.random_data import int8_data
from tpugen.sim.stalls import StallPattern
from tpugen.tb.harness_timing import RESET_EDGES, RESULT_DELAY
from tpugen.tb.verilator_harness import (
    HARNESS_SOURCES,
    JOB_VERSION,
    RESULT_MAGIC,
    RESULT_VERSION,
    build_harness,
    write_job,
)

CONFIG = Config(rows=3, cols=5, ub_rows=256, acc_rows=128)   # as in test_core_cocotb.py


def test_stall_generator_is_the_documented_one():
    harness = build_harness(CONFIG)
    for p, seed, stream in [(0.3, 11, 2), (0.5, 0, 0), (0.01, 2**40 + 3, 1), (0.99, 7, 5),
                            (0.0, 1, 1)]:
        ref = StallPattern(p, seed, stream)
        want = "".join("1" if ref.stall() else "0" for _ in range(500))
        assert harness.stall_draws(seed, stream, StallPattern(p).threshold, 500) == want


def test_generated_header_carries_the_python_constants():
    """The run timing and the file formats' magics and versions reach the C++ side through the
    generated header, from their one Python home; the C++ source does not retype them."""
    harness = build_harness(CONFIG)
    header = (harness.build_dir / "tpugen_harness_config.h").read_text()
    defines = dict(line.split(" ", 2)[1:] for line in header.splitlines()
                   if line.startswith("#define "))
    assert defines["TPUGEN_RESET_EDGES"] == str(RESET_EDGES)
    assert defines["TPUGEN_RESULT_DELAY"] == str(RESULT_DELAY)
    assert defines["TPUGEN_BINARY_VERSION"] == str(BINARY_VERSION)
    assert defines["TPUGEN_BINARY_MAGIC"] == f'"{BINARY_MAGIC.decode()}"'
    assert defines["TPUGEN_RESULT_VERSION"] == str(RESULT_VERSION)
    assert defines["TPUGEN_RESULT_MAGIC"] == f'"{RESULT_MAGIC.decode()}"'
    assert defines["TPUGEN_JOB_HEADER"] == f'"tpugen-harness-job {JOB_VERSION}"'
    cpp = HARNESS_SOURCES[0].read_text()
    for retyped in ("RESET_EDGES =", "RESULT_DELAY =", BINARY_MAGIC.decode(),
                    RESULT_MAGIC.decode(), "tpugen-harness-job", "h[0] != 2"):
        assert retyped not in cpp, retyped


def _gemm(rng):
    return compile_gemm(CONFIG, int8_data(rng, (9, 7)), int8_data(rng, (7, 11)))


def test_fault_fails_on_the_compiled_harness():
    rng = np.random.default_rng(8)
    backend = get_backend("verilator", CONFIG, fault=(1, 2))
    results = backend.run_many([_gemm(rng).program], stalls=(0.2, 0.3, 0.3))
    assert results[0].mismatches and backend.last_failed == 1


def test_cached_build_is_reused():
    lines = []
    build_harness(CONFIG)
    build_harness(CONFIG, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("reusing cached build")


CHILD = textwrap.dedent("""
    import sys
    from tpugen.hdl.config import Config
    from tpugen.tb.verilator_harness import build_harness
    cfg = Config.from_json(sys.argv[1])
    job, prog = sys.argv[2], sys.argv[3]
    h = build_harness(cfg)
    print("running", flush=True)
    h.run(job, log_path=job + ".log")
""")


def test_ctrl_c_ends_a_run_and_leaves_no_simulator(tmp_path):
    """A program that waits forever for host-in data (no limit): SIGINT to the process group
    ends the Python process and the harness within 2 s."""
    build_harness(CONFIG)
    hang = Program(CONFIG).raw(isa.encode(isa.Op.READ_HOST, dst=0, n=2), data=[[1, 2, 3]],
                               last=[0])      # two rows, one beat: the core waits for more
    prog = tmp_path / "hang.bin"
    hang.save_binary(prog)
    job = tmp_path / "job.txt"
    write_job(job, [{"program": prog, "result": tmp_path / "r.bin", "thresholds": (0, 0, 0),
                     "seed": 0, "expect": 1, "limit": 0}])
    child = interruptible([sys.executable, "-c", CHILD, CONFIG.to_json(), str(job),
                           str(prog)], stdout=subprocess.PIPE, text=True)
    _interrupt_ends_it(child, settle=1.0)


@pytest.mark.parametrize("stalls", [(0.0, 0.0, 0.0), (0.2, 0.3, 0.3)])
def test_harness_agrees_with_the_amaranth_drivers(stalls):
    """The Amaranth simulator's drivers (``sim.amaranth_streams``) draw the same stalls: same
    cycles."""
    rng = np.random.default_rng(4)
    p = _gemm(rng).program
    a = get_backend("amaranth", CONFIG).run(p, stalls=stalls, seed=2)
    v = get_backend("verilator", CONFIG).run(p, stalls=stalls, seed=2)
    assert a.mismatches == v.mismatches == []
    assert a.cycles == v.cycles
    assert {k: a.counters[k] for k in a.counters if k != "cycles"} == \
        {k: v.counters[k] for k in v.counters if k != "cycles"}


COCOTB_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from tpugen.backends import get_backend
    from tpugen.hdl.config import Config
    from tpugen.compiler import compile_gemm
    cfg = Config.from_json(sys.argv[1])
    rng = np.random.default_rng(1)
    p = compile_gemm(cfg, rng.integers(-128, 128, (60, 60)),
                     rng.integers(-128, 128, (60, 60))).program
    b = get_backend(sys.argv[2], cfg)
    b.build()
    print("running", flush=True)
    b.run_many([p] * 20)
""")


@pytest.mark.parametrize("backend", ["icarus", "verilator-cocotb"])
def test_ctrl_c_ends_a_cocotb_run(backend):
    """The cocotb runs (``sim.runner``) end on SIGINT to the process group too, simulator
    included (vvp would otherwise stop at its interactive prompt)."""
    child = interruptible([sys.executable, "-c", COCOTB_CHILD, CONFIG.to_json(), backend],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    _interrupt_ends_it(child, settle=3.0)


def _interrupt_ends_it(child, *, settle: float) -> None:
    """Once ``child`` prints ``running`` and has run ``settle`` more seconds: SIGINT to its
    process group ends it within 2 s and leaves no process of the group."""
    try:
        assert child.stdout.readline().strip() == "running"
        time.sleep(settle)
        assert child.poll() is None
        t0 = time.monotonic()
        os.killpg(child.pid, signal.SIGINT)
        child.wait(timeout=5)
        assert time.monotonic() - t0 < 2.0
        left = subprocess.run(["pgrep", "-g", str(child.pid)], capture_output=True, text=True)
        assert left.stdout.strip() == ""
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
