"""``tpugen infer``: run an int8 ``.tflite`` model on an accelerator backend.

    tpugen infer MODEL.tflite --input X.npy [--output Y.npy] [--backend NAME]
                 [--rows R --cols C | --config cfg.json] [--port DEV] [--check]

``X.npy`` has the model input's shape and dtype, or one more leading axis of inputs (the
output is stacked the same way). Prints, per op, where it ran, its GEMM, cycles and
utilization. ``--check`` runs the same inputs through the TFLite Micro interpreter and prints
``bit-exact`` or the first mismatch (exit status 1). ``add_infer_parser(sub)`` adds the
subcommand to ``tpugen.cli``'s parser.
"""

import json
from pathlib import Path

import numpy as np

from tpugen.accelerator import Accelerator
from tpugen.backends import BACKENDS
from tpugen.hdl.config import Config

from .model import load_tflite
from .oracle import first_mismatch, run_tflite_micro

__all__ = ["add_infer_parser", "cmd_infer"]


def _config(args) -> Config:
    base = {}
    if args.config:
        path = Path(args.config)
        if not path.is_file():
            raise ValueError(f"--config: no such file {str(path)!r}")
        base = Config.from_json(path.read_text()).to_dict()
    elif args.rows is None or args.cols is None:
        base = {"rows": 8, "cols": 8}
    for field in ("rows", "cols"):
        value = getattr(args, field)
        if value is not None:
            base[field] = value
    return Config(**base)


def cmd_infer(args) -> int:
    if args.config and (args.rows is not None or args.cols is not None):
        raise ValueError("give --rows and --cols, or --config, not both")
    model = load_tflite(args.model)
    path = Path(args.input)
    if not path.is_file():
        raise ValueError(f"--input: no such file {str(path)!r}")
    x = np.load(path, allow_pickle=False)
    stacked = x.shape != model.input_shape
    accel = Accelerator(_config(args), backend=args.backend, port=args.port)
    y = model.run(x, accel)
    print(f"model {model.name}: input {model.input_shape} {model.input_dtype}, "
          f"{x.shape[0] if stacked else 1} input(s)")
    for line in model.last.lines():
        print(line)
    if args.output:
        np.save(args.output, y)
        print(f"output {y.shape} {y.dtype} -> {args.output}")
    else:
        print(f"output {y.shape} {y.dtype}: "
              f"{json.dumps(y.tolist()) if y.size <= 64 else '(use --output to save it)'}")
    if args.check:
        expected = run_tflite_micro(model.data, x, stacked=stacked)
        problem = first_mismatch(y, expected)
        if problem:
            print(f"check: {problem}")
            return 1
        print("check: bit-exact with the TFLite Micro interpreter")
    return 0


def add_infer_parser(sub) -> None:
    """Add ``infer`` to the subparsers ``sub`` of the ``tpugen`` command."""
    p = sub.add_parser("infer", help="run an int8 .tflite model (FULLY_CONNECTED, CONV_2D and "
                                     "DEPTHWISE_CONV_2D on the accelerator, other ops on the "
                                     "host)")
    p.add_argument("model", help="the .tflite file")
    p.add_argument("--input", required=True,
                   help="X.npy: the model input (its shape and dtype), or several stacked "
                        "along a new first axis")
    p.add_argument("--output", help="save the output (stacked like the input) to Y.npy")
    p.add_argument("--backend", choices=list(BACKENDS), default="model",
                   help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()))
    p.add_argument("--rows", type=int, help="array rows R (default 8)")
    p.add_argument("--cols", type=int, help="array columns C (default 8)")
    p.add_argument("--config", help="a config.json (instead of --rows/--cols)")
    p.add_argument("--port", help="serial device of the board (--backend board)")
    p.add_argument("--check", action="store_true",
                   help="also run the TFLite Micro interpreter (tflite-micro from PyPI) and "
                        "compare: prints bit-exact or the first mismatch (exit 1)")
    p.set_defaults(func=cmd_infer)
