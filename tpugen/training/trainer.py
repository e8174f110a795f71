"""The training loop: minibatch SGD with momentum on float32 master weights, every GEMM on an
engine (``tpugen.training.engines``: the accelerator, or the float32 NumPy reference).

A run is a function of its inputs and ``TrainOptions.seed`` alone: the initial weights come from
``numpy.random.default_rng((seed, 0))`` (``MLP.init``), each epoch's order of the training
samples from ``default_rng((seed, 1))``, and the host's float32 NumPy arithmetic is
deterministic. So two engines whose GEMMs return the same bits (every accelerator backend: each
GEMM is checked bit for bit against the golden model) give bitwise identical weights after the
same steps, and the float32 reference sees the same initial weights and the same batches.

Per step (batch B): the forward pass, softmax cross-entropy, the backward pass (``MLP``), then
for each parameter p with gradient g and velocity v, in float32: ``v = momentum * v - lr * g;
p += v``. The learning rate of epoch e (from 0) is ``lr * lr_decay ** max(0, e - 1)``. The last
batch of an epoch holds the remainder. A loss that is not finite stops the run with
``LossNotFinite``, naming the step (counted from 1 over the whole run), its epoch and batch.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from tpugen.memory import available_memory, gemm_bytes
from tpugen.training.engines import ArrayGemms, Gemms, GemmTally
from tpugen.training.mlp import MLP, softmax_xent

__all__ = ["TrainOptions", "EpochStats", "LossNotFinite", "Trainer", "train", "check_data",
           "check_batch", "step_gemms", "EVAL_ROWS"]

#: The test set's forward pass runs in GEMMs of at most this many rows.
EVAL_ROWS = 1000


_NUMBER = int | float | np.integer | np.floating


def _positive(name, value, kind=int, zero=False):
    """``ValueError`` unless ``value`` is a positive (``zero``: non-negative) finite integer
    (``kind=float``: number)."""
    types = int | np.integer if kind is int else _NUMBER
    ok = (not isinstance(value, bool) and isinstance(value, types)
          and np.isfinite(value) and (value >= 0 if zero else value > 0))
    if not ok:
        what = "integer" if kind is int else "number"
        raise ValueError(f"{name} must be a {'non-negative' if zero else 'positive'} finite "
                         f"{what}, not {value!r}")


@dataclass(frozen=True)
class TrainOptions:
    """The hyperparameters, checked when made (``ValueError``): ``hidden`` layer widths,
    ``batch`` size, ``epochs``, learning rate ``lr``, ``momentum`` (0 <= m < 1), ``lr_decay``
    per epoch after the second (0 < d <= 1), ``seed``."""

    hidden: tuple = (128,)
    batch: int = 128
    epochs: int = 5
    lr: float = 0.2
    momentum: float = 0.9
    lr_decay: float = 0.6
    seed: int = 0

    def __post_init__(self):
        hidden = (self.hidden,) if isinstance(self.hidden, int | np.integer) else self.hidden
        try:
            hidden = tuple(hidden)
        except TypeError:
            raise ValueError(f"hidden must be layer widths, not {self.hidden!r}") from None
        for h in hidden:
            _positive("a hidden width", h)
        object.__setattr__(self, "hidden", tuple(int(h) for h in hidden))
        _positive("batch", self.batch)
        _positive("epochs", self.epochs)
        _positive("lr", self.lr, float)
        _positive("momentum", self.momentum, float, zero=True)
        _positive("lr_decay", self.lr_decay, float)
        _positive("seed", self.seed, zero=True)
        if self.momentum >= 1:
            raise ValueError(f"momentum must be below 1, not {self.momentum!r}")
        if self.lr_decay > 1:
            raise ValueError(f"lr_decay must be at most 1, not {self.lr_decay!r}")

    def lr_at(self, epoch: int) -> np.float32:
        """The learning rate of ``epoch`` (counted from 0)."""
        return np.float32(self.lr * self.lr_decay ** max(0, epoch - 1))


class LossNotFinite(RuntimeError):
    """The loss became NaN or infinite: ``step`` (from 1 over the run), ``epoch`` (from 1),
    ``batch`` (from 1 within the epoch), ``loss``; ``run`` names the run in the message."""

    def __init__(self, step: int, epoch: int, batch: int, loss: float, run: str = ""):
        self.step, self.epoch, self.batch, self.loss = step, epoch, batch, loss
        super().__init__(f"{run + ': ' if run else ''}the loss is {loss} at step {step} (epoch "
                         f"{epoch}, batch {batch}): the training diverged; try a smaller "
                         f"learning rate")


@dataclass
class EpochStats:
    """One epoch: mean training ``loss`` over its steps, ``train_acc`` (the batches' forward
    passes), ``test_acc`` (after the epoch; None without a test set), ``gemms`` (its training
    GEMMs' tally), ``transposed`` (elements the host transposed), ``lr``, ``seconds``, and
    ``step_losses`` (each step's loss)."""

    epoch: int
    steps: int
    loss: float
    train_acc: float
    test_acc: float | None
    gemms: GemmTally
    transposed: int
    lr: float
    seconds: float
    step_losses: list = field(default_factory=list)

    @property
    def cycles_per_step(self) -> float | None:
        """Mean cycles of a step's GEMMs (None on a backend that counts no cycles)."""
        g = self.gemms
        return g.cycles / self.steps if g.timed == g.count and g.count else None

    @property
    def utilization(self) -> float | None:
        return self.gemms.utilization if self.cycles_per_step is not None else None


def check_data(x, y, classes: int, name: str = "x") -> tuple[np.ndarray, np.ndarray]:
    """``x`` (N x features, real numbers, finite as float32) and ``y`` (N integer labels in
    0..classes-1) as float32 and int64 arrays. ``TypeError`` for non-numeric data or labels
    that are not integers; ``ValueError`` for a wrong shape, NaN or infinity (naming the first
    such element), or a label out of range."""
    a = np.asarray(x)
    if a.dtype == bool or a.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers, not {a.dtype}")
    if a.ndim != 2 or 0 in a.shape:
        raise ValueError(f"{name} must be a non-empty 2-D array (samples x features), not "
                         f"shape {a.shape}")
    with np.errstate(over="ignore"):
        f = a.astype(np.float32)
    bad = np.argwhere(~np.isfinite(f))
    if len(bad):
        i, j = (int(v) for v in bad[0])
        raise ValueError(f"{name} holds {a[i, j]} at sample {i}, feature {j} "
                         f"({len(bad)} non-finite values as float32): training data must be "
                         f"finite")
    labels = np.asarray(y)
    if labels.dtype == bool or labels.dtype.kind not in "iu":
        raise TypeError(f"the labels of {name} must be integers, not {labels.dtype}")
    if labels.shape != (len(a),):
        raise ValueError(f"the labels of {name} must be {len(a)} integers (one per sample), "
                         f"not shape {labels.shape}")
    if labels.min() < 0 or labels.max() >= classes:
        bad_label = labels.min() if labels.min() < 0 else labels.max()
        raise ValueError(f"the labels of {name} must be in 0..{classes - 1}, found {bad_label}")
    return f, labels.astype(np.int64)


def step_gemms(sizes, batch: int) -> list[tuple[str, tuple[int, int, int]]]:
    """The GEMMs of one training step of an MLP of ``sizes`` at ``batch``: ``(kind, (M, K,
    N))`` in the order they run."""
    layers = list(zip(sizes[:-1], sizes[1:], strict=True))
    out = [("forward", (batch, k, n)) for k, n in layers]
    for i in reversed(range(len(layers))):
        k, n = layers[i]
        out.append(("weight_grad", (k, batch, n)))
        if i:
            out.append(("input_grad", (batch, n, k)))
    return out


def check_batch(config, sizes, batch: int, n_train: int) -> None:
    """``ValueError`` when a step's largest GEMM at ``batch`` needs more host memory than is
    available (``tpugen.memory``), or when ``batch`` exceeds the ``n_train`` samples."""
    if config is not None:
        shape = max((s for _, s in step_gemms(sizes, batch)),
                    key=lambda s: gemm_bytes(config, *s))
        need, avail = gemm_bytes(config, *shape), available_memory()
        if avail is not None and need > avail:
            raise ValueError(f"batch {batch}: a training step's {' x '.join(map(str, shape))} "
                             f"GEMM needs about {need / 2**30:.1f} GiB of host memory, more "
                             f"than the {avail / 2**30:.1f} GiB available; use a smaller batch")
    if batch > n_train:
        raise ValueError(f"batch {batch}: larger than the {n_train} training samples")


class Trainer:
    """Trains ``MLP.init((features, *options.hidden, classes), options.seed)`` on ``x`` / ``y``
    (checked by ``check_data``, the batch by ``check_batch``) with ``gemms``. ``history`` holds
    an ``EpochStats`` per finished epoch; ``steps`` counts the steps taken."""

    def __init__(self, x, y, options: TrainOptions, gemms: Gemms, *, classes: int = 10):
        if not isinstance(options, TrainOptions):
            raise TypeError(f"options must be a TrainOptions, not {options!r}")
        if not isinstance(gemms, Gemms):
            raise TypeError(f"gemms must be an ArrayGemms or Float32Gemms, not {gemms!r}")
        self.x, self.y = check_data(x, y, classes)
        self.options, self.gemms = options, gemms
        sizes = (self.x.shape[1], *options.hidden, classes)
        config = gemms.accelerator.config if isinstance(gemms, ArrayGemms) else None
        check_batch(config, sizes, options.batch, len(self.x))
        self.mlp = MLP.init(sizes, options.seed)
        self.velocity = [np.zeros_like(p) for p in self.mlp.params()]
        self.order_rng = np.random.default_rng((options.seed, 1))
        self.steps = 0
        self.history: list[EpochStats] = []

    def step(self, idx: np.ndarray, lr: np.float32, epoch: int, batch: int) -> tuple[float, int,
                                                                                       int]:
        """One step on the samples ``idx``: ``(loss, correct, transposed elements)``;
        ``LossNotFinite`` (the weights unchanged) when the loss is not finite."""
        with np.errstate(over="ignore", invalid="ignore"):
            p = self.mlp.forward(self.x[idx], self.gemms)
            loss, dlogits, correct = softmax_xent(p.logits, self.y[idx])
            self.steps += 1
            if not np.isfinite(loss):
                raise LossNotFinite(self.steps, epoch, batch, loss)
            grads = self.mlp.backward(p, dlogits, self.gemms)
            mom = np.float32(self.options.momentum)
            for param, v, g in zip(self.mlp.params(), self.velocity, grads, strict=True):
                v *= mom
                v -= lr * g
                param += v
        return loss, correct, p.transposed

    def run_epoch(self, epoch: int, *, test=None, max_steps: int | None = None) -> EpochStats:
        """Epoch ``epoch`` (from 0): its batches (at most ``max_steps`` of them), then the
        accuracy on ``test`` (``(x, y)``) when given."""
        t0 = time.perf_counter()
        before = self.gemms.total()
        lr = self.options.lr_at(epoch)
        order = self.order_rng.permutation(len(self.x))
        b = self.options.batch
        starts = range(0, len(order), b)[:max_steps]
        losses, correct, transposed = [], 0, 0
        for n, start in enumerate(starts, 1):
            loss, c, t = self.step(order[start:start + b], lr, epoch + 1, n)
            losses.append(loss)
            correct += c
            transposed += t
        seen = min(len(order), starts[-1] + b) if len(starts) else 0
        test_acc = None if test is None else self.evaluate(*test)
        stats = EpochStats(epoch + 1, len(starts), float(np.mean(losses)), correct / seen,
                           test_acc, self.gemms.total().minus(before), transposed, float(lr),
                           time.perf_counter() - t0, losses)
        self.history.append(stats)
        return stats

    def fit(self, *, test=None, on_epoch=None, max_steps: int | None = None) -> "Trainer":
        """Train for ``options.epochs`` epochs, or until ``max_steps`` steps in all; ``test``
        (``(x, y)``) is evaluated after each epoch, then ``on_epoch(stats)`` is called.
        Returns ``self``."""
        if max_steps is not None:
            _positive("max_steps", max_steps)
        if test is not None:
            test = self.check_test(*test)        # before any step
        for epoch in range(len(self.history), self.options.epochs):
            left = None if max_steps is None else max_steps - self.steps
            if left is not None and left <= 0:
                break
            stats = self.run_epoch(epoch, test=test, max_steps=left)
            if on_epoch is not None:
                on_epoch(stats)
        return self

    def check_test(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """A test set, checked like the training data (``check_data``) and against the
        model's inputs (``ValueError``)."""
        x, y = check_data(x, y, self.mlp.sizes[-1], "the test set")
        if x.shape[1] != self.mlp.sizes[0]:
            raise ValueError(f"the test set has {x.shape[1]} features, the model "
                             f"{self.mlp.sizes[0]} inputs")
        return x, y

    def evaluate(self, x, y) -> float:
        """Accuracy on ``x`` / ``y`` (``check_test``): the forward pass on the engine
        (``eval`` GEMMs of at most ``EVAL_ROWS`` rows)."""
        x, y = self.check_test(x, y)
        right = 0
        with np.errstate(over="ignore", invalid="ignore"):
            for i in range(0, len(x), EVAL_ROWS):
                logits = self.mlp.forward(x[i:i + EVAL_ROWS], self.gemms, "eval").logits
                right += int(np.count_nonzero(logits.argmax(axis=1) == y[i:i + EVAL_ROWS]))
        return right / len(x)


def train(x, y, options: TrainOptions, gemms: Gemms, *, test=None, on_epoch=None,
          max_steps: int | None = None, classes: int = 10) -> Trainer:
    """``Trainer(x, y, options, gemms, classes=classes).fit(test=test, on_epoch=on_epoch,
    max_steps=max_steps)``: returns the ``Trainer`` (its ``mlp``, ``history`` and ``steps``)."""
    trainer = Trainer(x, y, options, gemms, classes=classes)
    return trainer.fit(test=test, on_epoch=on_epoch, max_steps=max_steps)
