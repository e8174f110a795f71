"""The multilayer perceptron trained by ``tpugen.training``: dense layers with ReLU between them,
softmax cross-entropy on the last, float32 master weights, and its forward and backward passes
with every matrix product handed to a GEMM engine (``tpugen.training.engines``).

Per layer l (input X_l, B x K; weights W_l, K x N; bias b_l):

  forward       Y_l = X_l W_l + b_l            GEMM B x K x N   (``forward``)
  input grad    dX_l = dY_l W_l^T              GEMM B x N x K   (``input_grad``; not for l = 0,
                                                                 whose input is the data)
  weight grad   dW_l = X_l^T dY_l              GEMM K x B x N   (``weight_grad``)

The hardware reads no transposed tile, so the host transposes: W_l^T and X_l^T are made on the
host (``np.ascontiguousarray(m.T)``, in float32, before the compiler rounds them to the operand
type) and counted in ``Pass.transposed`` (elements). Everything else is host float32 NumPy: the
bias adds, ReLU and its derivative (the mask ``Y_l > 0``), the bias gradients (column sums),
softmax cross-entropy and its gradient ``(softmax - onehot) / B``.
"""

import numpy as np

__all__ = ["MLP", "Pass", "softmax_xent", "check_sizes"]


def check_sizes(sizes) -> tuple[int, ...]:
    """``sizes`` (inputs, hidden..., classes): at least two positive integers."""
    try:
        out = tuple(sizes)
    except TypeError:
        raise TypeError(f"sizes must be a sequence of layer widths, not {sizes!r}") from None
    if len(out) < 2 or any(isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 1
                           for s in out):
        raise ValueError(f"sizes must be 2 or more positive integers (inputs, hidden..., "
                         f"classes), not {sizes!r}")
    return tuple(int(s) for s in out)


class MLP:
    """Dense layers of ``sizes`` (e.g. 784, 128, 10), ReLU after every layer but the last.
    ``weights[l]`` (K x N) and ``biases[l]`` (N) are the float32 master copies. ``MLP.init``
    draws He-normal weights and zero biases from a seed."""

    def __init__(self, weights, biases):
        self.weights = [np.asarray(w, np.float32) for w in weights]
        self.biases = [np.asarray(b, np.float32) for b in biases]
        if len(self.weights) != len(self.biases) or not self.weights:
            raise ValueError("an MLP needs one bias vector per weight matrix")
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if w.ndim != 2 or b.shape != (w.shape[1],) or (
                    i and w.shape[0] != self.weights[i - 1].shape[1]):
                raise ValueError(f"layer {i}: weights {w.shape} and bias {b.shape} do not chain")

    @classmethod
    def init(cls, sizes, seed: int = 0) -> "MLP":
        """He-normal weights (std sqrt(2 / K)) from ``numpy.random.default_rng((seed, 0))``,
        zero biases."""
        sizes = check_sizes(sizes)
        rng = np.random.default_rng((seed, 0))
        weights = [rng.normal(0, np.sqrt(2 / k), (k, n)).astype(np.float32)
                   for k, n in zip(sizes[:-1], sizes[1:], strict=True)]
        return cls(weights, [np.zeros(n, np.float32) for n in sizes[1:]])

    @property
    def sizes(self) -> tuple[int, ...]:
        return (self.weights[0].shape[0], *(w.shape[1] for w in self.weights))

    def params(self) -> list[np.ndarray]:
        """Weights and biases, layer by layer (W0, b0, W1, b1, ...)."""
        return [p for pair in zip(self.weights, self.biases, strict=True) for p in pair]

    def copy(self) -> "MLP":
        return MLP([w.copy() for w in self.weights], [b.copy() for b in self.biases])

    def forward(self, x: np.ndarray, gemms, kind: str = "forward") -> "Pass":
        """The forward pass of ``x`` (B x inputs, float32) with every X W on ``gemms``."""
        p = Pass()
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            p.inputs.append(x)
            y = gemms(x, w, kind) + b
            if i < len(self.weights) - 1:
                p.masks.append(y > 0)
                x = np.maximum(y, np.float32(0))
            else:
                p.logits = y
        return p

    def backward(self, p: "Pass", dlogits: np.ndarray, gemms) -> list[np.ndarray]:
        """The gradients of the loss whose gradient at the logits is ``dlogits``, in
        ``params()`` order; every dY W^T and X^T dY on ``gemms``."""
        grads = [None] * (2 * len(self.weights))
        dy = dlogits.astype(np.float32)
        for i in reversed(range(len(self.weights))):
            x_t = p.transpose(p.inputs[i])
            grads[2 * i] = gemms(x_t, dy, "weight_grad")
            grads[2 * i + 1] = dy.sum(axis=0, dtype=np.float32)
            if i:
                dx = gemms(dy, p.transpose(self.weights[i]), "input_grad")
                dy = np.where(p.masks[i - 1], dx, np.float32(0)).astype(np.float32)
        return grads


class Pass:
    """What a forward pass keeps for the backward pass: each layer's input, the ReLU masks, the
    logits; ``transposed`` counts the elements the host transposed."""

    def __init__(self):
        self.inputs: list[np.ndarray] = []
        self.masks: list[np.ndarray] = []
        self.logits: np.ndarray | None = None
        self.transposed = 0

    def transpose(self, m: np.ndarray) -> np.ndarray:
        """``m.T`` made on the host (contiguous float32): the array has no transposed read."""
        self.transposed += m.size
        return np.ascontiguousarray(m.T, dtype=np.float32)


def softmax_xent(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray, int]:
    """Mean softmax cross-entropy of ``logits`` (B x classes, float32) against labels ``y``:
    ``(loss, dlogits, correct)``, ``dlogits = (softmax - onehot) / B`` in float32, ``correct``
    the number of rows whose largest logit is the label. A non-finite logit gives a NaN loss."""
    n = len(y)
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(n)
    loss = float(np.mean(np.log(s[:, 0]) - z[rows, y]))
    g = e / s
    g[rows, y] -= np.float32(1)
    correct = int(np.count_nonzero(logits.argmax(axis=1) == y))
    return loss, (g / np.float32(n)).astype(np.float32), correct
