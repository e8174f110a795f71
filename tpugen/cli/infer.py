"""``tpugen infer``: an int8 ``.tflite`` model on an accelerator (the layers it supports) and
the host (the rest), optionally checked against the TFLite Micro interpreter."""


import numpy as np

import tpugen.cli.options as options
import tpugen.cli.port as port
from tpugen.accelerator import Accelerator
from tpugen.backends import BACKENDS
from tpugen.cli.user_errors import CLIError
from tpugen.files import check_input_file
from tpugen.sim.heartbeat import Heartbeat
from tpugen.simulate import (
    finish_trace,
    inference_traffic_lines,
    layer_names,
    record_programs,
    start_trace,
)
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro, tflite_micro_runtime
from tpugen.tflite.tflite_model import TFLiteModel, check_model_config, list_ops

__all__ = ["add_parser", "cmd_infer"]


def add_parser(sub):
    i = sub.add_parser("infer", help="run an int8 .tflite model: FULLY_CONNECTED, CONV_2D and "
                                     "DEPTHWISE_CONV_2D on the accelerator, other ops on the "
                                     "host")
    i.add_argument("model", metavar="MODEL.tflite", help="the int8 .tflite model")
    i.add_argument("--input", metavar="X.npy",
                   help="the model input (its shape and dtype), or several stacked along a new "
                        "first axis (they run together); required unless --list-ops")
    i.add_argument("--list-ops", action="store_true",
                   help="list the model's ops, where each would run (array / host / folded) "
                        "and its MACs, without running anything")
    i.add_argument("--output", metavar="Y.npy",
                   help="save the output (stacked like the input) to this .npy file")
    i.add_argument("--backend", choices=list(BACKENDS), default="model",
                   help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()))
    options.add_shape(i, what="8; with --backend board: the board's")
    port.add_link_options(i)
    i.add_argument("--check", action="store_true",
                   help="also run the TFLite Micro interpreter (tflite-micro from PyPI) and "
                        "compare: prints bit-exact or the first mismatch (exit status 1)")
    options.add_trace(i)
    i.add_argument("--traffic", action="store_true",
                   help="print the run's memory traffic and energy estimate per input")
    i.set_defaults(func=cmd_infer)


def _load_model(text: str) -> TFLiteModel:
    """The ``.tflite`` model at ``text``, read and planned (one line naming the file for a
    missing, unreadable, corrupt or unsupported model)."""
    try:
        path = check_input_file(text, text or "MODEL.tflite", "a .tflite model")
    except ValueError as e:
        raise CLIError(str(e)) from None
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CLIError(f"{text}: cannot read it: {e.strerror}") from None
    try:
        return TFLiteModel(data, name=path.name)
    except (TypeError, ValueError) as e:
        raise CLIError(f"{text}: {e}") from None


def _accelerator(args) -> Accelerator:
    """The accelerator of ``tpugen infer``: a simulator of ``config(args)``, or the board at
    ``--port`` with its own config (``--config`` / the shape options, when given, must match
    it)."""
    if not BACKENDS[args.backend].needs_port:
        if args.port is not None:
            raise CLIError(f"--port {args.port}: only with --backend board")
        return Accelerator(options.config(args), args.backend)
    if args.port is None:
        raise CLIError(f"--backend {args.backend}: needs --port DEV (the board's serial device, "
                       f"or the simulated board's pty)")
    port.check_port(args.port)
    if args.config is not None:
        cfg = options.config(args)
    else:   # the board's config, with the options typed (the board then says if they differ)
        typed = options.typed(args, options.SHAPE_OPTIONS)
        cfg = options.make_config(port.board_config(args).to_dict(), typed, None)
    return port.board_accelerator(args, cfg)


def _check_config(cfg, args) -> None:
    """An accelerator whose results would differ from TFLite Micro's is refused, naming the
    option (or the board) that chose it."""
    try:
        check_model_config(cfg)
    except ValueError as e:
        if args.operand is not None and cfg.operand != "int8":
            raise CLIError(f"--operand {args.operand}: tpugen infer runs int8 models: {e}") \
                from None
        if args.acc_width is not None and cfg.acc_width < 32:
            raise CLIError(f"--acc-width {args.acc_width}: {e}") from None
        where = (f"--config {args.config}" if args.config is not None
                 else f"--port {args.port}" if args.port is not None else "the config")
        raise CLIError(f"{where}: {e}") from None


def _print_output(y, out_file) -> None:
    if out_file is not None:
        np.save(out_file, y)
        print(f"output {y.shape} {y.dtype} -> {out_file}")
    else:
        shown = (np.array2string(y, separator=", ").replace("\n", "") if y.size <= 64
                 else "(--output Y.npy saves it)")
        print(f"output {y.shape} {y.dtype}: {shown}")


def _list_ops(text: str) -> int:
    """``--list-ops``: the plan of the model at ``text`` (a refused model's ops too)."""
    try:
        path = check_input_file(text, text or "MODEL.tflite", "a .tflite model")
    except ValueError as e:
        raise CLIError(str(e)) from None
    try:
        lines = list_ops(path.read_bytes())
    except OSError as e:
        raise CLIError(f"{text}: cannot read it: {e.strerror}") from None
    except (TypeError, ValueError) as e:
        raise CLIError(f"{text}: {e}") from None
    print(f"model {text}:")
    for line in lines:
        print(line)
    return 0


def cmd_infer(args):
    if args.list_ops:
        return _list_ops(args.model)
    if args.input is None:
        raise CLIError("--input X.npy is required (or --list-ops)")
    model = _load_model(args.model)
    x = options.load_npy(args.input, "--input")
    try:
        _, stacked = model.check_input(x, name=f"--input {args.input}")
    except (TypeError, ValueError) as e:
        raise CLIError(str(e)) from None
    out_file = options.output_file(args.output, "--output", ".npy")
    trace, timeline = options.trace_files(args, args.backend)
    if args.check:
        tflite_micro_runtime()           # a missing interpreter fails before any run
    accel = _accelerator(args)
    _check_config(accel.config, args)
    tracer = (start_trace(accel, f"tpugen infer: {args.model} on {args.backend}")
              if trace or timeline else None)
    programs = record_programs(accel) if args.traffic else None
    try:
        with Heartbeat(f"tpugen infer: running {args.model} on {args.backend}", announce=False):
            y = model.run(x, accel)
    except port.LINK_ERRORS as e:
        raise port.link_error(args.port, args.timeout, e) from None
    finally:
        close = getattr(accel.backend, "close", None)
        if close is not None:
            close()
    n = x.shape[0] if stacked else 1
    print(f"model {args.model}: input {model.input_shape} {model.input_dtype}, {n} input(s), "
          f"output {model.output_shape}")
    for line in model.last.lines():
        print(line)
    if programs:
        for line in inference_traffic_lines(programs, accel.config, n)[0]:
            print(line)
    if tracer is not None:         # one span per program, named after its layers
        tracer.label(layer_names(model.last))
        lines = []
        finish_trace(tracer, trace, timeline, lines=lines)
        for line in lines:
            print(line)
    _print_output(y, out_file)
    if args.check:
        problem = first_mismatch(y, run_tflite_micro(model.data, x, stacked=stacked))
        if problem:
            print(f"check: {problem}")
            return 1
        print("check: bit-exact with the TFLite Micro interpreter")
    return 0
