"""Convolution chains on chip for ``Config.window`` (``tpugen.compiler.planes``): which GEMM ops
of a model run as one program from the raw input tensor's planes, and how.

``window_steps(steps, consumers, outputs)`` regroups a model's plan (``TFLiteModel.steps``):
a run of consecutive chains whose first op is a convolution, each op reading the previous
one's output (its only reader, not a model output), made of CONV_2D and DEPTHWISE_CONV_2D ops
(a depthwise one as its block-diagonal kernel: the walk skips its zero weight tiles) and
AVERAGE_POOL_2D ops that ``pool_lowering`` turns into identity-tile GEMMs (``pools``: the
lowering, given by the caller), then optionally FULLY_CONNECTED ops (the first one flattening
the last convolution's NHWC output whole, one row per image), becomes one ``WindowChain``. Any
other op ends it (a pool ``pools`` refuses too: it stays a host op).

``WindowChain.run`` compiles it onto planes and runs it as one program (the first op's input
goes to the accelerator as the image's planes, not an im2col matrix), checked against the
host path's NumPy GEMMs (``sim.reference.chain_reference`` of each op's im2col matrix). When
the chain does not fit (``PlaneMisfit``: the unified buffer, a plane over 255 pixels wide, a
stride over 15 or unequal strides, ...), it runs the original chains instead (the host path)
and says why (``fallback``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tpugen.chain import run_layers, run_planes
from tpugen.compiler.planes import ConvLayer, PlaneMisfit
from tpugen.sim.reference import chain_reference

__all__ = ["WindowChain", "Segment", "window_steps", "conv_layer"]

#: The window ops a window chain takes (a depthwise convolution as its block-diagonal kernel,
#: whose zero weight tiles the walk skips; an average pool as identity tiles).
CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D")


def conv_layer(gemm) -> ConvLayer:
    """The ``ConvLayer`` of a lowered CONV_2D or DEPTHWISE_CONV_2D (``lowering.GemmOp``: its
    K x N weights in ``(ky, kx, cin)`` order, block-diagonal for a depthwise one)."""
    wy, wx = gemm.wy, gemm.wx
    cin = gemm.in_shape[3]
    w = np.asarray(gemm.layer.weights).reshape(wy.k, wx.k, cin, gemm.n)
    return ConvLayer(w, gemm.layer.params, gemm.layer.in_zp, (wy.stride, wx.stride),
                     (wy.dilation, wx.dilation), (wy.before, wx.before), (wy.out, wx.out))


def _joins(prev, gemm, consumers, outputs) -> bool:
    if gemm.in_tensor != prev.out_tensor or consumers.get(gemm.in_tensor) != 1 \
            or gemm.in_tensor in outputs:
        return False
    if gemm.op.name in CONVS:
        return prev.op.name in CONVS
    if gemm.op.name != "FULLY_CONNECTED":
        return False
    if prev.op.name == "FULLY_CONNECTED":
        return gemm.k == prev.n
    # A flatten of the whole NHWC tensor: one row per image.
    return (prev.op.name in CONVS and gemm.k == int(np.prod(prev.out_shape[1:]))
            and gemm.out_shape == (prev.out_shape[0], gemm.n))


@dataclass(eq=False)
class WindowChain:
    """GEMM ops run as one program on planes (module docstring); ``chains``: the host path's
    steps it replaces (chains, and the RESHAPEs in ``flattens``); ``fallback``: why the last
    run took the host path (else ``None``); ``flattens``: the RESHAPE ops (``OpInfo``) it
    goes through."""

    gemms: list
    chains: list
    number: int
    fallback: str | None = None
    flattens: list = field(default_factory=list)
    flat_shapes: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)

    @staticmethod
    def layers(gemms) -> list:
        """The ``compile_planes`` layers of ``gemms``."""
        return [conv_layer(g) if g.op.name in CONVS else g.layer for g in gemms]

    def run(self, accelerator, value, samples: int) -> list:
        """Run the chain: the longest run of its ops from the first that fits the planes as
        one program, then the same from the next op, and so on; an op that does not fit
        alone (or a FULLY_CONNECTED run after a cut, with those after it) takes the host
        path. ``value(t)``: a tensor's value (samples first). Returns ``Segment`` s in order
        and sets ``fallback`` (the first misfit's reason, or ``None``)."""
        config = accelerator.config
        env = {}

        def val(t):
            if t in env:
                return env[t]
            return value(t)

        out, start, self.fallback, cut = [], 0, None, None
        while start < len(self.gemms):
            reason, done = None, None
            if self.gemms[start].op.name in CONVS:
                for end in range(len(self.gemms), start, -1):
                    sub = self.gemms[start:end]
                    x = val(sub[0].in_tensor)
                    images = x.reshape((-1,) + tuple(sub[0].in_shape[1:]))
                    try:
                        done = run_planes(accelerator, images, self.layers(sub),
                                          lambda sub=sub, x=x: _reference(config, sub, x,
                                                                          samples))
                        break
                    except PlaneMisfit as e:
                        reason = reason or str(e)
            if done is not None:
                note = "window walk"
            else:
                end = start + 1             # a convolution alone, or the FULLY_CONNECTEDs
                while (self.gemms[start].op.name not in CONVS and end < len(self.gemms)
                       and self.gemms[end].op.name not in CONVS):
                    end += 1
                sub = self.gemms[start:end]
                first = sub[0]
                done = run_layers(accelerator, first.input_matrix(val(first.in_tensor)),
                                  [g.layer for g in sub])
                # A FULLY_CONNECTED after a cut: the reason the run before it stopped.
                note = f"host path: {reason or cut}"
            self.fallback = self.fallback or reason
            cut = reason
            out.append(Segment(sub, *done, note))
            last = sub[-1]
            env[last.out_tensor] = last.output_tensor(done[0], samples)
            for op in self.flattens:
                src, dst = op.inputs[0], op.outputs[0]
                if src in env and dst not in env:
                    env[dst] = env[src].reshape((samples,) + self.flat_shapes[dst])
            start = end
        self.env = env
        return out


@dataclass(eq=False)
class Segment:
    """Ops of a ``WindowChain`` that ran as one program (``note``: ``"window walk"``) or by
    the host path (``note`` says why): their output ``y`` (M x N) and ``ChainReport``."""

    gemms: list
    y: np.ndarray
    report: object
    note: str


def _reference(config, gemms, x: np.ndarray, samples: int) -> np.ndarray:
    """The last op's M x N output of ``gemms`` from ``x`` by the host path's GEMMs in
    NumPy."""
    v, y = x, None
    for g in gemms:
        y = chain_reference(config, g.input_matrix(v), [g.layer])
        v = g.output_tensor(y, samples)
    return y


def _flatten(step, prev, nxt, chain_type, consumers, outputs, shapes) -> bool:
    """Whether host step ``step`` is a RESHAPE flattening convolution ``prev``'s output whole
    (one row per image) for the FULLY_CONNECTED that starts chain ``nxt``: nothing moves on
    planes, so the window chain goes through it."""
    op = getattr(step, "op", None)
    if op is None or op.name != "RESHAPE" or prev is None or prev.op.name not in CONVS:
        return False
    if not isinstance(nxt, chain_type) or nxt.gemms[0].op.name != "FULLY_CONNECTED":
        return False
    src, dst = op.inputs[0], op.outputs[0]
    k = int(np.prod(prev.out_shape[1:]))
    fc = nxt.gemms[0]
    return (src == prev.out_tensor and consumers.get(src) == 1 and src not in outputs
            and consumers.get(dst) == 1 and dst not in outputs and fc.in_tensor == dst
            and tuple(shapes.get(dst, ())) == (prev.out_shape[0], k) and fc.k == k
            and fc.out_shape == (prev.out_shape[0], fc.n))


def _pool(step, prev, pools, consumers, outputs):
    """The ``GemmOp`` of host step ``step`` when it is an AVERAGE_POOL_2D that ``pools`` lowers
    and that reads window op ``prev``'s output, else ``None``."""
    op = getattr(step, "op", None)
    if pools is None or prev is None or op is None or op.name != "AVERAGE_POOL_2D":
        return None
    gemm = pools(op)
    if isinstance(gemm, str) or not _joins(prev, gemm, consumers, outputs):
        return None
    return gemm


def window_steps(steps: list, chain_type, consumers, outputs, shapes=None, pools=None) -> list:
    """``steps`` with runs of chains regrouped into ``WindowChain`` s (module docstring);
    ``chain_type``: the plan's chain class (its ``gemms``, ``number``); ``shapes``: the
    tensors' shapes (a RESHAPE that flattens a convolution's output for a FULLY_CONNECTED
    joins the chain: ``WindowChain.flattens``); ``pools``: op -> ``GemmOp`` or the reason
    it cannot be one (``pool_lowering.lower_average_pool``), for the host's pool steps."""
    shapes = shapes or {}
    out, i = [], 0
    while i < len(steps):
        step = steps[i]
        if not (isinstance(step, chain_type) and step.gemms[0].op.name in CONVS):
            out.append(step)
            i += 1
            continue
        gemms, chains, flattens = [], [], []
        while i < len(steps):
            prev = gemms[-1] if gemms else None
            if i + 1 < len(steps) and _flatten(steps[i], prev, steps[i + 1], chain_type,
                                               consumers, outputs, shapes):
                chains.append(steps[i])
                flattens.append(steps[i].op)
                fc = steps[i + 1].gemms[0]
                cand = steps[i + 1].gemms
                pairs = zip(cand[:-1], cand[1:], strict=True)
                if not all(_joins(p, g, consumers, outputs) for p, g in pairs):
                    chains.pop()
                    flattens.pop()
                    break
                gemms += [fc, *cand[1:]]
                chains.append(steps[i + 1])
                i += 2
                continue
            pool = _pool(steps[i], prev, pools, consumers, outputs)
            if pool is not None:
                gemms.append(pool)
                chains.append(steps[i])
                i += 1
                continue
            if not isinstance(steps[i], chain_type):
                break
            cand = steps[i].gemms
            pairs = zip(cand[:-1], cand[1:], strict=True)
            ok = all(_joins(p, g, consumers, outputs) for p, g in pairs)
            ok &= cand[0].op.name in CONVS if prev is None else \
                _joins(prev, cand[0], consumers, outputs)
            if not ok:
                break
            gemms += cand
            chains.append(steps[i])
            i += 1
        if not chains:
            out.append(step)
            i += 1
            continue
        out.append(WindowChain(gemms, chains, chains[0].number, flattens=flattens,
                               flat_shapes={op.outputs[0]: tuple(shapes[op.outputs[0]])
                                            for op in flattens}))
    return out
