"""cocotb tests of the generated core Verilog: programs against the golden model.

Environment: ``TPUGEN_CONFIG`` (the Config as JSON) and ``TPUGEN_JOB`` (a JSON file written by
``sim.backend_base``): ``{"runs": [{"program", "result", "stalls", "seed"}], "reset_midway": ...}``.
Every run's host-out beats and error cause are compared with ``sim.machine.Machine`` here, and
written to its ``result`` file for the caller.
"""

import json
import os

import cocotb
from cocotb.triggers import ClockCycles

from tpugen.hdl.config import Config
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.tb.core_tb import CoreTB


def _job():
    cfg = Config.from_json(os.environ["TPUGEN_CONFIG"])
    with open(os.environ["TPUGEN_JOB"]) as f:
        return cfg, json.load(f)


def _save(path, res, mismatches):
    with open(path, "w") as f:
        json.dump({
            "host_out": res["host_out"].tolist(),
            "last": res["last"].astype(int).tolist(),
            "status": res["status"],
            "cycles": res["cycles"],
            "first_cmd": res["first_cmd"],
            "last_out": res["last_out"],
            "mismatches": mismatches,
        }, f)


@cocotb.test()
async def test_programs(dut):
    """Each program of the job, from reset, with its stalls; results equal the golden model."""
    cfg, job = _job()
    tb = CoreTB(dut, cfg, seed=job.get("seed", 1))
    await tb.start()
    failures = []
    for k, run in enumerate(job["runs"]):
        program = Program.load(run["program"])
        expected = Machine(cfg).run(program)
        tb.set_stalls(run.get("stalls", (0, 0, 0)), run.get("seed", k))
        res = await tb.run_program(program, len(expected.host_out))
        problems = expected.mismatches(res["host_out"], res["last"])
        if res["status"]["cause"] != int(expected.error):
            problems.append(f"error cause {res['status']['cause']}, expected "
                            f"{int(expected.error)}")
        if res["status"]["retired"] != expected.retired:
            problems.append(f"retired {res['status']['retired']}, expected {expected.retired}")
        _save(run["result"], res, problems)
        if problems:
            failures.append(f"run {k} ({run['program']}): " + "; ".join(problems[:4]))
    assert not failures, "\n".join(failures)


@cocotb.test()
async def test_reset_midway(dut):
    """Reset in the middle of a program; a fresh program then gives correct results."""
    cfg, job = _job()
    mid = job.get("reset_midway")
    if not mid:
        return
    tb = CoreTB(dut, cfg, seed=7, stalls=(0.2, 0.2, 0.2))
    await tb.start()
    first = Program.load(mid["interrupted"])
    await tb.reset(program=first)
    await ClockCycles(dut.clk, mid["after_cycles"])
    fresh = Program.load(mid["fresh"])
    expected = Machine(cfg).run(fresh)
    res = await tb.run_program(fresh, len(expected.host_out))
    problems = expected.mismatches(res["host_out"], res["last"])
    assert res["status"]["cause"] == int(expected.error), res["status"]
    assert not problems, problems
