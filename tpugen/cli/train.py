"""``tpugen train``: train an MLP on MNIST-5k (offline) with every GEMM on the accelerator in a
float operand type (bf16 by default) and binary32 accumulation, beside its float32 NumPy
reference; optionally draw the curves and write the trained model as an int8 ``.tflite``
(``tpugen.training``, docs/training.md)."""

import argparse
import importlib.util
import time

import numpy as np

import tpugen.cli.options as options
import tpugen.cli.port as port
from tpugen.accelerator import Accelerator
from tpugen.backends import BACKENDS
from tpugen.cli.user_errors import CLIError
from tpugen.hdl.config import Config
from tpugen.sim.heartbeat import Heartbeat
from tpugen.tflite.tflite_model import TFLiteModel
from tpugen.training.curves import plot_curves
from tpugen.training.engines import ArrayGemms, Float32Gemms, float_operand
from tpugen.training.epoch_table import epoch_header, epoch_line, gemm_lines, pct
from tpugen.training.int8_export import mlp_to_tflite
from tpugen.training.mnist_data import TEST_SIZE, TRAIN_SIZE, mnist_split
from tpugen.training.trainer import LossNotFinite, Trainer, TrainOptions

__all__ = ["add_parser", "cmd_train", "DEFAULT_CONFIG"]

#: The accelerator ``tpugen train`` runs without ``--config``: 16 x 16, bf16.
DEFAULT_CONFIG = {"rows": 16, "cols": 16, "operand": "bf16"}
_D = TrainOptions()


def _widths(text):
    """``--hidden``: one width or a comma-separated list (``128`` or ``256,64``)."""
    parse = options.positive_int
    return tuple(parse(v) for v in text.split(","))


def _fraction(what, top_open=False):
    """A number in [0, 1) (``top_open``) or (0, 1]."""
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if not (0 <= v < 1 if top_open else 0 < v <= 1):
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return v
    return parse


def add_parser(sub):
    t = sub.add_parser("train", help="train an MLP on MNIST-5k with every GEMM on the "
                                     "accelerator (bf16 operands, fp32 accumulation) beside a "
                                     "float32 reference")
    t.add_argument("--backend", choices=list(BACKENDS), default="model",
                   help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()))
    options.add_shape(t, what="16 x 16, bf16")
    t.add_argument("--hidden", type=_widths, default=_D.hidden, metavar="N[,N...]",
                   help=f"hidden layer widths (default {','.join(map(str, _D.hidden))})")
    t.add_argument("--batch", type=options.positive_int, default=_D.batch,
                   help=f"samples per step (default {_D.batch})")
    t.add_argument("--epochs", type=options.positive_int, default=_D.epochs,
                   help=f"epochs (default {_D.epochs})")
    t.add_argument("--lr", type=options.positive_float("learning rate"), default=_D.lr,
                   help=f"learning rate (default {_D.lr})")
    t.add_argument("--momentum", type=_fraction("a momentum in [0, 1)", True),
                   default=_D.momentum, help=f"SGD momentum (default {_D.momentum})")
    t.add_argument("--lr-decay", dest="lr_decay", type=_fraction("a factor in (0, 1]"),
                   default=_D.lr_decay,
                   help=f"learning-rate factor per epoch after the second (default "
                        f"{_D.lr_decay})")
    t.add_argument("--seed", type=options.nonneg_int, default=_D.seed,
                   help="initial weights and the order of the batches (default 0)")
    t.add_argument("--train", type=options.positive_int, default=TRAIN_SIZE, metavar="N",
                   help=f"training digits, 1..{TRAIN_SIZE} (default {TRAIN_SIZE})")
    t.add_argument("--test", type=options.positive_int, default=TEST_SIZE, metavar="N",
                   help=f"test digits, 1..{TEST_SIZE} (default {TEST_SIZE})")
    t.add_argument("--plot", metavar="FILE.png", help="draw the loss and accuracy curves")
    t.add_argument("--output", metavar="MODEL.tflite",
                   help="write the trained model as an int8 .tflite (post-training "
                        "quantization), for tpugen infer")
    t.add_argument("--save-test", dest="save_test", metavar="X.npy",
                   help="save the int8 test inputs, stacked (N, 1, 784), for tpugen infer")
    port.add_link_options(t)
    t.set_defaults(func=cmd_train)


def _config(args) -> Config:
    """``--config`` (or 16 x 16 bf16) with the typed shape options; a float operand type."""
    base = options.read_config(args.config) if args.config is not None else DEFAULT_CONFIG
    cfg = options.make_config(base, options.typed(args, options.SHAPE_OPTIONS), args.config)
    try:
        float_operand(cfg)
    except TypeError as e:
        where = (f"--operand {args.operand}" if args.operand is not None
                 else f"--config {args.config}")
        raise CLIError(f"{where}: {e}") from None
    return cfg


def _accelerator(args, cfg: Config) -> Accelerator:
    """An accelerator of ``cfg`` on ``--backend``: a simulator or the model, or the board at
    ``--port`` (which must then have ``cfg``; the link checks it on the first GEMM)."""
    if not BACKENDS[args.backend].needs_port:
        if args.port is not None:
            raise CLIError(f"--port {args.port}: only with --backend board")
        return Accelerator(cfg, args.backend)
    if args.port is None:
        raise CLIError(f"--backend {args.backend}: needs --port DEV (the board's serial device, "
                       f"or the simulated board's pty)")
    port.check_port(args.port)
    return port.board_accelerator(args, cfg)


def _check_args(args) -> tuple[TrainOptions, dict]:
    """The hyperparameters and the output files, checked before anything runs."""
    try:
        opts = TrainOptions(hidden=args.hidden, batch=args.batch, epochs=args.epochs,
                            lr=args.lr, momentum=args.momentum, lr_decay=args.lr_decay,
                            seed=args.seed)
    except ValueError as e:
        raise CLIError(str(e)) from None
    if args.batch > args.train:
        raise CLIError(f"--batch {args.batch}: larger than the {args.train} training digits "
                       f"(--train)")
    for option, value, top in (("--train", args.train, TRAIN_SIZE),
                               ("--test", args.test, TEST_SIZE)):
        if value > top:
            raise CLIError(f"{option} {value}: MNIST-5k has {top} digits for it")
    files = {"plot": options.output_file(args.plot, "--plot", ".png"),
             "output": options.output_file(args.output, "--output", ".tflite"),
             "save_test": options.output_file(args.save_test, "--save-test", ".npy")}
    for key, module, extra in (("plot", "matplotlib", "matplotlib"),
                               ("output", "tflite_micro", "the tflite-micro wheel")):
        if files[key] is not None and importlib.util.find_spec(module) is None:
            raise CLIError(f"--{key} {getattr(args, key)}: needs {extra} "
                           f"(pip install 'tpugen[dev]')")
    return opts, files


def _export(trainer, digits, cfg: Config, path) -> list[str]:
    """Write the int8 model; its accuracy on the test digits (tpugen's model backend)."""
    data = mlp_to_tflite(trainer.mlp, digits.x_train[:1000])
    path.write_bytes(data)
    model = TFLiteModel(data, name=path.name)
    int8 = Accelerator(Config(rows=cfg.rows, cols=cfg.cols), "model")
    y = model.run(digits.xq_test, int8)
    acc = float(np.mean(y.reshape(len(y), -1).argmax(axis=1) == digits.y_test))
    return [f"int8 model   {path} ({len(data):,} bytes; post-training quantization of the "
            f"fp32 master weights): test accuracy {pct(acc)} (int8 on tpugen's model "
            f"backend; tpugen infer {path} --input X.npy --check runs it beside TFLite Micro)"]


def _train_both(args, opts: TrainOptions, gemms: ArrayGemms, digits) -> tuple[Trainer, Trainer]:
    """The accelerator run and its float32 reference, epoch by epoch (the accelerator's epoch
    first), a line per epoch; a diverging run stops with ``LossNotFinite`` naming it."""
    name = gemms.operand
    try:
        run = Trainer(digits.x_train, digits.y_train, opts, gemms)
    except ValueError as e:       # a batch larger than host memory allows
        raise CLIError(f"--{e}" if str(e).startswith("batch ") else str(e)) from None
    ref = Trainer(digits.x_train, digits.y_train, opts, Float32Gemms())
    test = (digits.x_test, digits.y_test)
    for line in epoch_header(name):
        print(line)
    with Heartbeat(f"tpugen train: training on {args.backend}", announce=False, every=60):
        for epoch in range(opts.epochs):
            for trainer, label in ((run, f"the {name} run on {args.backend}"),
                                   (ref, "the float32 reference")):
                try:
                    trainer.run_epoch(epoch, test=test)
                except LossNotFinite as e:
                    raise LossNotFinite(e.step, e.epoch, e.batch, e.loss, label) from None
            print(epoch_line(run.history[-1], ref.history[-1]), flush=True)
    return run, ref


def cmd_train(args):
    opts, files = _check_args(args)
    cfg = _config(args)
    accel = _accelerator(args, cfg)
    gemms = ArrayGemms(accel)
    t_start = time.perf_counter()
    digits = mnist_split(0, args.train, args.test)
    sizes = "-".join(map(str, (784, *opts.hidden, 10)))
    print(f"tpugen train: MLP {sizes} on MNIST-5k ({args.train} training, {args.test} test "
          f"digits), batch {opts.batch}, {opts.epochs} epochs, SGD lr {opts.lr:g} momentum "
          f"{opts.momentum:g} decay {opts.lr_decay:g}, seed {opts.seed}")
    print(f"accelerator  {cfg.operand} operands, fp32 accumulation, on {args.backend} "
          f"({cfg.rows} x {cfg.cols} array, {cfg.name}); reference: NumPy float32 (same "
          f"initial weights and batches)", flush=True)
    try:
        run, ref = _train_both(args, opts, gemms, digits)
    except port.LINK_ERRORS as e:
        raise port.link_error(args.port, args.timeout, e) from None
    finally:
        close = getattr(accel.backend, "close", None)
        if close is not None:
            close()
    seconds = time.perf_counter() - t_start
    last, last_ref = run.history[-1], ref.history[-1]
    print(f"test accuracy {cfg.operand} {pct(last.test_acc)}, fp32 {pct(last_ref.test_acc)} "
          f"(difference {100 * (last.test_acc - last_ref.test_acc):+.1f} points) after "
          f"{run.steps} steps")
    print(f"GEMMs        every one on {args.backend}, checked bit for bit against the golden "
          f"model:")
    for line in gemm_lines(gemms, run.steps, sum(s.transposed for s in run.history)):
        print(line)
    if files["output"] is not None:
        for line in _export(run, digits, cfg, files["output"]):
            print(line)
    if files["save_test"] is not None:
        np.save(files["save_test"], digits.xq_test)
        print(f"test inputs  {files['save_test']} ({digits.xq_test.shape} int8; labels not "
              f"saved)")
    if files["plot"] is not None:
        plot_curves(files["plot"], {f"{cfg.operand} on {args.backend}": run.history,
                                    "fp32 reference": ref.history},
                    f"MLP {sizes} on MNIST-5k, batch {opts.batch}")
        print(f"curves       {files['plot']}")
    print(f"wall time    {seconds:.1f} s in all; training and testing: {cfg.operand} on "
          f"{args.backend} {sum(s.seconds for s in run.history):.1f} s, float32 reference "
          f"{sum(s.seconds for s in ref.history):.1f} s")
    return 0
