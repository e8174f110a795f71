"""FPGA sweep: place and route a range of array sizes on each board with the YoWASP tools and
print LUTs, FFs, DSPs, BRAMs, clock, Fmax, peak GOPS and build time (the whole board tops by
default: UART link, bridge, core).

    .venv/bin/python bench/fpga.py                      # the default sweep (board tops)
    .venv/bin/python bench/fpga.py --top array          # the array alone (its own Fmax)
    .venv/bin/python bench/fpga.py --board ulx3s --sizes 8x8,16x16 --freq 100 -j 1
    .venv/bin/python bench/fpga.py --board icebreaker --sizes 8x2 --record --readme
    .venv/bin/python bench/fpga.py --board ulx3s --sizes 4x4 --operand bf16 --record --readme
    .venv/bin/python bench/fpga.py --readme             # only rewrite the README's table+plot
    .venv/bin/python bench/fpga.py --builds build/fpga/ulx3s_* --record --readme

Builds run ``-j`` at a time (each tool is single-threaded). A design that does not fit or
misses timing is still a row (marked), not an error. Results also go to
<build root>/bench/fpga.json (the build root is ``tpugen.sim.cache``'s). ``--record`` adds
each build that produced figures to ``fpga/flow/measured.json``, the measurements of record
(replacing an earlier measurement of the same board, top, config and clock); ``--readme``
rewrites the README's board table and the plot it shows, ``bench/fpga.png`` (peak GOPS and
LUT use against array size, per board), from that file (alone, without ``--record``, it runs
no build). A size ``RxC`` keeps the board's default config but the array shape (the
activation lanes within the columns) and ``--operand`` (int8 by default). The plot shows the
int8 board tops; the table has every measurement. ``--builds DIR ...`` records builds already
run (each folder's ``build_report.json``, from ``tpugen build`` or this script) instead of
building.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tpugen.fpga.flow.bitstream import DEFAULT_TIMEOUT, TOPS, BuildError, build_board
from tpugen.fpga.flow.boards import get_board
from tpugen.fpga.flow.measured import (
    Measurement,
    dump_measured,
    parse_measured,
    readme_table,
    record,
    replace_readme_table,
)
from tpugen.fpga.flow.report import BuildReport
from tpugen.fpga.flow.toolchain import tool_versions
from tpugen.sim.cache import build_root

DEFAULT_SWEEP = {
    "icebreaker": ["2x2", "4x2", "8x2", "4x4"],
    "ulx3s": ["4x4", "8x8", "12x12", "16x16"],
}

REPO = Path(__file__).resolve().parent.parent
MEASURED = REPO / "fpga" / "flow" / "measured.json"
README = REPO / "README.md"
PLOT = REPO / "bench" / "fpga.png"


def _config(board, size, operand="int8"):
    r, c = (int(v) for v in size.lower().split("x"))
    return board.config.replace(rows=r, cols=c, act_lanes=min(board.config.act_lanes, c),
                                operand=operand)


def run_one(board_name, size, freq, top, out_root, seed, timeout=DEFAULT_TIMEOUT,
            operand="int8"):
    """One build: ``(row for the table, BuildReport or None)``."""
    b = get_board(board_name)
    cfg = _config(b, size, operand)
    out_dir = out_root / f"{b.name}_{top}_{size}_{operand}"
    t0 = time.monotonic()
    try:
        rep = build_board(b, cfg, freq, out_dir=out_dir, top=top, check=False, do_pack=True,
                          seed=seed, timeout=timeout)
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


def load_report(build_dir) -> BuildReport:
    """The ``BuildReport`` a finished build left in ``build_dir``."""
    path = Path(build_dir) / "build_report.json"
    if not path.is_file():
        raise SystemExit(f"bench/fpga.py: error: --builds: no build report {path}")
    return BuildReport.from_dict(json.loads(path.read_text()))


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


def rewrite_readme(measured=MEASURED, readme=README, plot_path=PLOT):
    """Rewrite the README's board table and its plot from ``measured``."""
    measurements = parse_measured(measured.read_text())
    table = readme_table(measurements)
    readme.write_text(replace_readme_table(readme.read_text(), table))
    print(f"wrote {readme}")
    plot_measured(measurements, plot_path)


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


def plot_measured(measurements, path):
    """The README's plot: per board, peak GOPS (at the clock, of the board tops that meet
    timing) and LUT use (% of the device) against the array's cells, from the measurements of
    record; each board's default marked."""
    try:
        # Deferred: matplotlib is an optional (dev) dependency, needed only for the plot.
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot; pip install -e '.[dev]')")
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for name in dict.fromkeys(m.board for m in measurements):
        board = get_board(name)
        tops = sorted((m for m in measurements if m.board == name and m.top == "board"
                       and m.config.operand == "int8"),
                      key=lambda m: (m.cells, m.clock_mhz or 0))
        ok = [m for m in tops if m.fits and m.timing_met]
        if ok:
            line, = a1.plot([m.cells for m in ok], [m.gops for m in ok], "o-",
                            label=f"{board.label} board top")
            for m in ok:
                if m.is_default(board):
                    a1.plot([m.cells], [m.gops], "*", ms=14, color=line.get_color())
                    a1.annotate(f"{m.config.rows}x{m.config.cols} at {m.clock_mhz:g} MHz",
                                (m.cells, m.gops), textcoords="offset points", xytext=(6, -12),
                                fontsize=7)
        used = [m for m in tops if m.luts is not None]
        if used:
            a2.plot([m.cells for m in used], [100 * m.luts[0] / m.luts[1] for m in used], "o-",
                    label=f"{board.label} ({board.device})")
    for ax, label in ((a1, "peak GOPS (2 R C f, timing met)"),
                      (a2, "LUTs used (% of the device)")):
        ax.set_xlabel("array cells (R x C)")
        ax.set_ylabel(label)
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    a1.set_yscale("log")
    a2.axhline(100, color="grey", lw=0.8, ls="--")
    fig.suptitle("tpugen board tops (UART link + bridge + core), YoWASP Yosys + nextpnr; "
                 "star: the board's default")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--board", action="append", help="board(s) to sweep (default both)")
    p.add_argument("--sizes", help="comma-separated RxC list (default per board)")
    p.add_argument("--freq", type=float, help="PLL clock in MHz (default: the board's)")
    p.add_argument("--top", default="board", choices=TOPS)
    p.add_argument("--operand", default="int8",
                   help="operand type of the swept configs (int8, int4, bf16, fp8_e4m3, ...)")
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--seed", type=int)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help="seconds a build may take (then its tools are stopped)")
    p.add_argument("--out", help="output directory (default <build root>/bench)")
    p.add_argument("--record", action="store_true",
                   help=f"add the builds to {MEASURED.relative_to(REPO)}")
    p.add_argument("--readme", action="store_true",
                   help=f"rewrite the README's board table from {MEASURED.relative_to(REPO)}")
    p.add_argument("--builds", nargs="+", metavar="DIR",
                   help="record these finished build folders (their build_report.json) "
                        "instead of building")
    args = p.parse_args(argv)
    if args.builds:
        reports = [load_report(d) for d in args.builds]
        if args.record:
            record_reports(reports)
        if args.readme:
            rewrite_readme()
        return 0
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
        futs = [ex.submit(run_one, b, s, args.freq, args.top, out_root / "fpga", args.seed,
                          args.timeout, args.operand) for b, s in jobs]
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
