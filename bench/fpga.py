"""FPGA sweep: place and route a range of array sizes on each board with the YoWASP tools and
print LUTs, FFs, DSPs, BRAMs, clock, Fmax, peak GOPS and build time; plot to
build/bench/fpga.png (the build root is ``tpugen.sim.cache``'s).

    .venv/bin/python bench/fpga.py                      # the default sweep (board tops)
    .venv/bin/python bench/fpga.py --top array          # the array alone (its own Fmax)
    .venv/bin/python bench/fpga.py --board ulx3s --sizes 8x8,16x16 --freq 137.5 -j 2
    .venv/bin/python bench/fpga.py --board icebreaker --sizes 2x2 --record --readme
    .venv/bin/python bench/fpga.py --readme             # only rewrite the README's table

Builds run ``-j`` at a time (each tool is single-threaded). A design that does not fit or
misses timing is still a row (marked), not an error. Results also go to
build/bench/fpga.json. ``--record`` adds each build that produced figures to
``fpga/measured.json``, the measurements of record (replacing an earlier measurement of the
same board, top, config and clock); ``--readme`` rewrites the README's board table from that
file (alone, without ``--record``, it runs no build).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tpugen.fpga.boards import get_board
from tpugen.fpga.build import TOPS, BuildError, build_board
from tpugen.fpga.measured import (
    Measurement,
    dump_measured,
    parse_measured,
    readme_table,
    record,
    replace_readme_table,
)
from tpugen.fpga.tools import tool_versions
from tpugen.sim.cache import build_root

DEFAULT_SWEEP = {
    "icebreaker": ["2x2", "3x3", "4x4"],
    # 12x12 and up: nextpnr-ecp5 (WebAssembly) routes the DSP columns for well over 30 minutes.
    "ulx3s": ["4x4", "8x8"],
}

REPO = Path(__file__).resolve().parent.parent
MEASURED = REPO / "fpga" / "measured.json"
README = REPO / "README.md"


def _config(board, size):
    r, c = (int(v) for v in size.lower().split("x"))
    return board.config.replace(rows=r, cols=c, act_lanes=min(board.config.act_lanes, c))


def run_one(board_name, size, freq, top, out_root, seed):
    """One build: ``(row for the table, BuildReport or None)``."""
    b = get_board(board_name)
    cfg = _config(b, size)
    out_dir = out_root / f"{b.name}_{top}_{size}"
    t0 = time.monotonic()
    try:
        rep = build_board(b, cfg, freq, out_dir=out_dir, top=top, check=False, do_pack=True,
                          seed=seed)
        note = ""
    except BuildError as e:
        rep = e.report
        note = str(e)
        if rep is None:
            return {"board": b.name, "size": size, "error": note,
                    "seconds": round(time.monotonic() - t0, 1)}, None
    row = rep.to_dict()
    row.update(size=size, note=note, fmax_gops=rep.fmax_gops,
               critical=rep.critical_path.splitlines()[1:3] if rep.critical_path else [])
    return row, rep


def record_reports(reports, path=MEASURED):
    """Add the builds of ``reports`` that produced figures (finished, or stopped because the
    design does not fit) to the measurements in ``path``."""
    measurements = parse_measured(path.read_text())
    today = datetime.date.today().isoformat()
    for rep in reports:
        if rep is None or (rep.failed and not rep.failed.startswith("fit")):
            continue
        family = get_board(rep.board).family
        measurements = record(measurements, Measurement.from_report(
            rep, tools=tool_versions(family), date=today))
    path.write_text(dump_measured(measurements))
    print(f"wrote {path}")


def rewrite_readme(measured=MEASURED, readme=README):
    """Rewrite the README's board table from ``measured``."""
    table = readme_table(parse_measured(measured.read_text()))
    readme.write_text(replace_readme_table(readme.read_text(), table))
    print(f"wrote {readme}")


def _pair(p):
    return f"{p[0]}/{p[1]}" if p and p[1] else (str(p[0]) if p else "-")


def table(rows):
    head = (f"{'board':10s} {'R x C':7s} {'LUTs':>12s} {'FFs':>12s} {'DSPs':>8s} "
            f"{'BRAMs':>7s} {'clock':>7s} {'Fmax':>7s} {'GOPS':>6s} {'secs':>6s}  verdict")
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['board']:10s} {r['size']:7s} error: {r['error']}")
            continue
        verdict = ("ok" if r["fits"] and r["timing_met"] else
                   "NO FIT" if not r["fits"] else "timing")
        lines.append(
            f"{r['board']:10s} {r['size']:7s} {_pair(r['luts']):>12s} {_pair(r['ffs']):>12s} "
            f"{_pair(r['dsps']):>8s} {_pair(r['brams']):>7s} {r['clock_mhz']:7.2f} "
            f"{r['fmax_mhz']:7.2f} {r['gops']:6.2f} {r['seconds']:6.0f}  {verdict}")
    return "\n".join(lines)


def plot(rows, path):
    try:
        # Deferred: matplotlib is an optional (dev) dependency, needed only for the plot.
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot; pip install -e '.[dev]')")
        return
    ok = [r for r in rows if "error" not in r]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for board in sorted({r["board"] for r in ok}):
        rs = sorted((r for r in ok if r["board"] == board),
                    key=lambda r: r["config"]["rows"] * r["config"]["cols"])
        cells = [r["config"]["rows"] * r["config"]["cols"] for r in rs]
        a1.plot(cells, [r["fmax_mhz"] for r in rs], "o-", label=f"{board} Fmax")
        a1.plot(cells, [r["clock_mhz"] for r in rs], "x--", label=f"{board} PLL clock")
        a2.plot(cells, [r["fmax_gops"] for r in rs], "o-", label=f"{board} at Fmax")
        a2.plot(cells, [r["gops"] if r["timing_met"] else 0 for r in rs], "x--",
                label=f"{board} at clock (0: timing missed)")
    a1.set_xlabel("array cells (R x C)")
    a1.set_ylabel("MHz")
    a1.set_xscale("log", base=2)
    a1.legend(fontsize=7)
    a1.grid(alpha=0.3)
    a2.set_xlabel("array cells (R x C)")
    a2.set_ylabel("peak GOPS (2 R C f)")
    a2.set_xscale("log", base=2)
    a2.legend(fontsize=7)
    a2.grid(alpha=0.3)
    fig.suptitle("tpugen on FPGAs (YoWASP Yosys + nextpnr)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--board", action="append", help="board(s) to sweep (default both)")
    p.add_argument("--sizes", help="comma-separated RxC list (default per board)")
    p.add_argument("--freq", type=float, help="PLL clock in MHz (default: the board's)")
    p.add_argument("--top", default="board", choices=TOPS)
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--seed", type=int)
    p.add_argument("--out", help="output directory (default <build root>/bench)")
    p.add_argument("--record", action="store_true",
                   help=f"add the builds to {MEASURED.relative_to(REPO)}")
    p.add_argument("--readme", action="store_true",
                   help=f"rewrite the README's board table from {MEASURED.relative_to(REPO)}")
    args = p.parse_args(argv)
    if args.readme and not args.record:
        rewrite_readme()
        return 0
    out_root = Path(args.out) if args.out else build_root() / "bench"
    jobs = []
    for name in args.board or list(DEFAULT_SWEEP):
        sizes = args.sizes.split(",") if args.sizes else DEFAULT_SWEEP.get(name, ["4x4"])
        jobs += [(name, s) for s in sizes]
    # Longest first, so the two workers finish together.
    jobs.sort(key=lambda j: -_cells(j[1]))
    rows, reports = [], []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = [ex.submit(run_one, b, s, args.freq, args.top, out_root / "fpga", args.seed)
                for b, s in jobs]
        for f in futs:
            r, rep = f.result()
            rows.append(r)
            reports.append(rep)
            print(f"done: {r['board']} {r['size']} ({r.get('seconds', 0):.0f} s)", flush=True)
    rows.sort(key=lambda r: (r["board"], _cells(r["size"])))
    print()
    print(table(rows))
    out_root.mkdir(parents=True, exist_ok=True)
    (out_root / "fpga.json").write_text(json.dumps(rows, indent=2, default=str))
    plot(rows, out_root / "fpga.png")
    if args.record:
        record_reports(reports)
    if args.readme:
        rewrite_readme()
    return 0


def _cells(size):
    r, c = (int(v) for v in size.lower().split("x"))
    return r * c


if __name__ == "__main__":
    sys.exit(main())
