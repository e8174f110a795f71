"""Time and peak memory of generating the array's Verilog, for square arrays up to 256 x 256.

Each size runs in a fresh process (peak RSS is per process). Prints a table and writes
build/bench/gen_scale.png when matplotlib is installed.

    python bench/gen_scale.py [--sizes 8 16 32 64 128 256] [--operand bf16]
    python bench/gen_scale.py --docs    # every operand type at 8, 32, 64: records
                                        # bench/gen_scale.json and rewrites its table in
                                        # docs/number-formats.md (tests/test_bench_tables.py
                                        # checks that the two agree)
"""

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from tpugen.hdl.config import OPERAND_TYPES, Config
from tpugen.hdl.verilog import array_verilog
from tpugen.sim.cache import build_root

OUT = build_root() / "bench"
REPO = Path(__file__).resolve().parent.parent
#: The recorded sweep (``--docs``) and the page whose table renders it.
RECORD = REPO / "bench" / "gen_scale.json"
DOCS = REPO / "docs" / "number-formats.md"
BEGIN = "<!-- BEGIN generation table: generated from bench/gen_scale.json by " \
        "bench/gen_scale.py --docs -->"
END = "<!-- END generation table -->"
DOCS_SIZES = (8, 32, 64)


def render(record: dict) -> str:
    """The markdown table of a recorded sweep (``RECORD``'s contents), between the markers."""
    lines = [BEGIN, "", f"Measured {record['date']} on {record['machine']} (one process per "
             "size; seconds and peak memory of `array_verilog`, Yosys included).", "",
             "| operand | R x C | seconds | peak MiB | Verilog MiB |", "|---|---|---|---|---|"]
    for r in record["rows"]:
        lines.append(f"| {r['operand']} | {r['n']} x {r['n']} | {r['seconds']:.1f} | "
                     f"{r['peak_mib']:.0f} | {r['verilog_mib']:.2f} |")
    return "\n".join([*lines, "", END])


def replace_table(text: str, table: str) -> str:
    """``text`` (the page) with its generated table replaced by ``table``."""
    i, j = text.index(BEGIN), text.index(END) + len(END)
    return text[:i] + table + text[j:]


def _measure(n: int, operand: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", str(n), "--operand", operand],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def record_docs() -> int:
    rows = []
    for operand in OPERAND_TYPES:
        for n in DOCS_SIZES:
            r = {"operand": operand, **_measure(n, operand)}
            rows.append(r)
            print(f"{operand:>9} {n:>4} x {n:<4} {r['seconds']:6.1f} s {r['peak_mib']:6.0f} MiB "
                  f"{r['verilog_mib']:6.2f} MiB of Verilog", flush=True)
    record = {"date": date.today().isoformat(),
              "machine": f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} "
                         "cores", "rows": rows}
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    DOCS.write_text(replace_table(DOCS.read_text(), render(record)))
    print(f"recorded {RECORD} and rewrote the table in {DOCS}")
    return 0


def one(n: int, operand: str = "int8") -> dict:
    t = time.perf_counter()
    text = array_verilog(Config(rows=n, cols=n, operand=operand))
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # yosys
    path = OUT / f"array_{n}x{n}_{operand}.v"
    path.write_text(text)
    return {"n": n, "seconds": seconds, "peak_mib": max(peak, children),
            "verilog_mib": len(text.encode()) / 2**20}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    ap.add_argument("--operand", default="int8", help="operand type (default int8)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--docs", action="store_true",
                    help="measure every operand type at 8, 32, 64 and rewrite the docs' table")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.docs:
        return record_docs()
    if args.one:
        print(json.dumps(one(args.one, args.operand)))
        return 0
    rows = []
    print(f"{args.operand}:")
    print(f"{'R x C':>11} {'seconds':>8} {'peak MiB':>9} {'Verilog MiB':>12}")
    for n in args.sizes:
        r = _measure(n, args.operand)
        rows.append(r)
        print(f"{f'{n} x {n}':>11} {r['seconds']:8.1f} {r['peak_mib']:9.0f} "
              f"{r['verilog_mib']:12.2f}", flush=True)
    worst = rows[-1]
    if worst["n"] == 256:
        ok = worst["seconds"] <= 60 and worst["peak_mib"] <= 4096
        print(f"256 x 256: {'within' if ok else 'OUTSIDE'} the 60 s / 4 GiB budget")
    # matplotlib is a dev extra, deferred: the table is the result, the plot an extra.
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    fig, ax = plt.subplots(figsize=(6, 4))
    ns = [r["n"] for r in rows]
    ax.plot(ns, [r["seconds"] for r in rows], "o-", label="seconds")
    ax.plot(ns, [r["peak_mib"] / 100 for r in rows], "s-", label="peak memory (100 MiB)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("R = C")
    ax.set_title("tpugen: Verilog generation cost")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / f"gen_scale_{args.operand}.png", dpi=100)
    print(f"plot: {OUT / f'gen_scale_{args.operand}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
