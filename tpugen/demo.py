"""``make demo``: generate an array, run random tiles on a simulator, compare with NumPy."""

import json
import time

from hdl.config import Config
from sim.array_build import build_array
from sim.runner import BUILD_DIR

__all__ = ["run_demo"]


def run_demo(config: Config, *, sim="verilator", fault=None, seed=1, tiles=6) -> int:
    """Run the demo; print a short report; return 0 on PASS, 1 on FAIL."""
    t0 = time.monotonic()
    print(f"tpugen demo: {config.rows} x {config.cols} array, {config.operand}, "
          f"acc {config.acc_width} bits, simulator {sim}"
          + (f", DEBUG FAULT in cell {fault}" if fault else ""))
    b = build_array(config, sim, fault=fault)
    report = BUILD_DIR / "demo_report.json"
    if report.exists():
        report.unlink()
    env = {"TPUGEN_CONFIG": config.to_json(), "TPUGEN_SEED": str(seed),
           "TPUGEN_TILES": str(tiles), "TPUGEN_REPORT": str(report)}
    tests, failed = b.run("tb.test_array", env=env, testcase="test_demo", seed=seed,
                          name="demo", log_file=BUILD_DIR / "demo_sim.log")
    ok = tests == 1 and failed == 0 and report.exists()
    stats = json.loads(report.read_text()) if report.exists() else {}
    print(f"  shape      {config.rows} x {config.cols}")
    print(f"  tiles      {tiles}")
    print(f"  vectors    {stats.get('vectors', '-')} (each checked against NumPy)")
    print(f"  cycles     {stats.get('cycles', '-')}")
    print(f"  wall time  {time.monotonic() - t0:.1f} s")
    log = BUILD_DIR / "demo_sim.log"
    if not ok and log.exists():
        errors = [ln.strip() for ln in log.read_text().splitlines() if "Error:" in ln]
        if errors:
            print(f"  first error  {errors[0]}")
    print(f"  sim log    {log}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1
