"""``--timeline FILE.png``: a trace (``tpugen.sim.trace.Trace``) as a Gantt chart, one row per
track, with the array's utilization and each engine's busy share over time below it.

Bars are the instructions (every one, unmerged), coloured by op; the issue row shows the
waits of the instruction held in the issue register, coloured by reason; the program row
shows each run (a network's layers). Utilization is measured per bin of ``cycles / bins``
cycles: the share of cycles in which an activation vector entered the array (ARRAY_BUSY's
event), and each engine's busy share.
"""

import numpy as np

from tpugen.sim.trace import ENGINES, Trace

__all__ = ["plot", "utilization"]

_ROWS = ("program", "command stream", "issue (controller)", "host-in", "weight load", "matmul",
         "MATMUL drain", "activate", "host-out", "link")
_OP_COLOR = {"READ_HOST": "#4c72b0", "READ_WEIGHTS": "#8172b2", "READ_QUANT": "#64b5cd",
             "MATMUL": "#55a868", "ACTIVATE": "#ccb974", "WRITE_HOST": "#c44e52",
             "SYNC": "#8c8c8c", "READ_COUNTERS": "#8c8c8c", "NOP": "#bbbbbb"}
#: The issue row's colours: the wait's reason (an interlock first, else its engine busy).
_WAIT_COLORS = {"its engine busy": "#f2c08f", "rows (interlock)": "#d62728",
                "MATMUL drain": "#2ca02c", "parameter sets": "#17becf",
                "SYNC: all done": "#7f7f7f"}
_WAIT_KIND = {"engine": "its engine busy", "drain": "MATMUL drain", "quant": "parameter sets",
              "quiet": "SYNC: all done"}


def _wait_kind(reasons) -> str:
    kinds = [_WAIT_KIND.get(r, "rows (interlock)") for r in reasons]
    return next((k for k in kinds if k != "its engine busy"), "its engine busy")


def _covered(spans, edges: np.ndarray) -> np.ndarray:
    """Cycles of ``spans`` ([start, end], sorted, disjoint) in each bin between ``edges``."""
    if not spans:
        return np.zeros(len(edges) - 1)
    s = np.asarray([x[0] for x in spans], dtype=np.float64)
    e = np.asarray([x[1] for x in spans], dtype=np.float64)
    # The covered-cycles function is piecewise linear: 0 at s[0], rising over each span.
    xs = np.empty(2 * len(s))
    xs[0::2], xs[1::2] = s, e
    ys = np.zeros(2 * len(s))
    ys[1::2] = np.cumsum(e - s)
    ys[2::2] = ys[1:-1:2]
    cum = np.interp(edges, xs, ys, left=0.0, right=ys[-1])
    return np.diff(cum)


def utilization(trace: Trace, bins: int = 400):
    """``(centres, array, engines)``: bin centres (cycles on the trace's axis), the array's
    utilization per bin (0..1) and ``{engine: busy share per bin}``."""
    total = max(1, sum(r.cycles for r in trace.runs))
    bins = max(1, min(bins, total))
    edges = np.linspace(0, total, bins + 1)
    width = np.diff(edges)
    feed, busy = [], {e: [] for e in ENGINES}
    for run, off in zip(trace.runs, trace.offsets(), strict=True):
        feed += [[off + a, off + b] for a, b in run.feed]
        for j in run.jobs:
            for e in ENGINES:
                if j.track == e or (e == "host-in" and j.track == "weight load"):
                    if j.end > j.start:
                        busy[e].append([off + j.start, off + j.end])
    array = _covered(feed, edges) / width
    engines = {e: _covered(sorted(v), edges) / width for e, v in busy.items()}
    return (edges[:-1] + edges[1:]) / 2, array, engines


def plot(trace: Trace, path, *, title: str | None = None, bins: int = 200) -> None:
    """Draw ``trace`` to ``path`` (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, (ax, au) = plt.subplots(2, 1, figsize=(14, 6.5), sharex=True,
                                 gridspec_kw={"height_ratios": [3, 1.3]})
    rows = {name: len(_ROWS) - 1 - i for i, name in enumerate(_ROWS)}
    bars = {}                                  # (row, colour) -> [(start, width)]

    def bar(row, start, width, colour):
        bars.setdefault((row, colour), []).append((start, max(width, 0.6)))

    for k, (run, off) in enumerate(zip(trace.runs, trace.offsets(), strict=True)):
        colour = "#dddddd" if k % 2 else "#bbbbbb"
        bar("program", off, run.cycles, colour)
        if len(trace.runs) <= 40:
            ax.text(off + run.cycles / 2, rows["program"], run.name, ha="center",
                    va="center", fontsize=7, clip_on=True)
        for j in run.jobs:
            if j.track == "issue (controller)":
                continue
            f = j.fields
            bar(j.track, off + j.start, j.end - j.start, _OP_COLOR.get(f["op"], "#999999"))
        for s, e, _, reasons in run.issue_waits:
            bar("issue (controller)", off + s, e - s, _WAIT_COLORS[_wait_kind(reasons)])
        for s, e in run.drains:
            bar("MATMUL drain", off + s, e - s, "#a6d8a8")
        for s, e in run.cmd_waits:
            bar("command stream", off + s, e - s, "#dd8452")
        for s in run.link:
            bar("link", off + s["start"], s["end"] - s["start"], "#937860")
    for (row, colour), spans in bars.items():
        ax.broken_barh(spans, (rows[row] - 0.38, 0.76), facecolors=colour, linewidth=0)
    ax.set_yticks(list(rows.values()), list(rows.keys()))
    ax.set_ylim(-0.6, len(_ROWS) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=[Patch(color=c, label=n) for n, c in _OP_COLOR.items()
                       if n not in ("READ_COUNTERS", "NOP")]
              + [Patch(color=c, label=f"waits: {n}") for n, c in _WAIT_COLORS.items()],
              loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False)
    x, array, engines = utilization(trace, bins)
    au.fill_between(x, 100 * array, step="mid", color="#55a868", alpha=0.45,
                    label="array (vectors in)")
    for e, share in engines.items():
        au.plot(x, 100 * share, drawstyle="steps-mid", linewidth=0.8, alpha=0.8,
                label=f"{e} busy")
    au.set_ylim(0, 105)
    au.set_ylabel("utilization %")
    au.set_xlabel("clock cycle")
    au.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    au.grid(alpha=0.3)
    total = sum(r.cycles for r in trace.runs)
    fed = sum(r.totals.get("array_busy", 0) for r in trace.runs)
    src = ", ".join(sorted({r.source for r in trace.runs}))
    fig.suptitle(title or f"{trace.title}: {total:,} cycles, array busy {fed:,} "
                 f"({100 * fed / max(1, total):.1f} %), from {src}", fontsize=10, y=0.995)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
