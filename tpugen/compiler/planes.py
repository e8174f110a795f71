"""Convolution chains on chip: activations kept as unified-buffer planes, read by window walks.

``compile_planes(config, x, layers)`` compiles a chain of ``ConvLayer`` s, optionally followed
by ``ChainLayer`` s (fully connected; the first of them flattens the last convolution's NHWC
output), into ONE program for the whole batch (``Config.window``; ``hdl.window`` is the
walk's contract). It returns a ``CompiledGemm``: the result is ``B * OH * OW`` x ``Cout`` (the
last convolution's output pixels, image by image) or ``B`` x ``N`` (the last fully connected
layer's).

Planes. A tensor ``H`` x ``W`` x ``Cch`` of one image is kept as ``T`` planes of ``H * W``
rows, pixel ``(y, x)`` in row ``y * W + x``; ``Plan.chan`` says which channel lane ``r`` of
plane ``t`` holds (the host's input: plane t lane r = channel ``t * R + r``; a layer's output:
part p of n-tile nt is plane ``nt * P + p``, lane r = channel ``nt * C + p * R + r`` for
``p * R + r < C``: ACTIVATE's ``part``, ``P = ceil(C / R)``).

A convolution runs walk by walk: a walk is ``rows`` whole output rows (at most half the
accumulators over its n-tiles, so that a walk's ACTIVATEs overlap the next walk's MATMULs).
Its input is the band of input rows the walk reads (a sub-plane: NOP SHAPE with the band's
``in_h``, so a plane over 255 rows still walks and the extent stays small); rows outside the
band are outside the image, so the walk's padding (the input zero point) is right. Per kernel
offset ``(ky, kx)`` a NOP AT, and per input plane and n-tile a READ_WEIGHTS tile and a MATMUL
WINDOW (ACCUMULATE after the first). Then ACTIVATE of each n-tile part into the output
planes' rows of the walk's pixels. The first layer's input comes from the host band by band
(READ_HOST of the band's plane rows into one of two band buffers, in turn), so an image need
not fit the unified buffer; later layers' inputs must fit whole.

Images run one after another (their planes reuse the same rows); the last convolution's
output (when fully connected layers follow) keeps every image's planes, plane t of image b in
rows ``base + (t * B + b) * H * W``. The first fully connected layer reads it per k-tile
(pixel q, plane t): for a batch, one window walk over all images (``in_w = H * W``,
``in_h = B``, ``out_w = 1``: rows ``q, q + H * W, ..``), else a MATMUL of one row. Later ones
read the previous one's ACTIVATE output (``layers`` module docstring's re-laid k-tiles).

``PlaneMisfit`` (a ``ValueError``) names what does not fit (the unified buffer, a plane
wider than 255 pixels, a stride over 15 or unequal strides, an output row over the
accumulators): the caller then takes the host path.
"""

from __future__ import annotations

import numpy as np

from tpugen.compiler.gemm import CompiledGemm
from tpugen.compiler.operands import ceil_div, check_lookahead, require_integer_operands
from tpugen.compiler.plan import MATMUL_GAP, MAX_ROWS
from tpugen.compiler.plane_layout import (
    ConvLayer,
    PlaneMisfit,
    check_layers,
    conv_plans,
    plane_tensors,
)
from tpugen.compiler.plane_packing import pack_chain
from tpugen.compiler.plane_program import PlaneBuilder
from tpugen.hdl import isa
from tpugen.hdl.activation import activation_timing
from tpugen.hdl.config import Config, check_config

__all__ = ["ConvLayer", "PlaneMisfit", "compile_planes", "plane_estimate"]


def compile_planes(config: Config, x, layers, *, weight_lookahead: int | None = None,
                   pack: bool = True) -> CompiledGemm:
    """One program of the chain ``layers`` (``ConvLayer`` s, then optionally ``ChainLayer``
    s) over ``x`` (B x H x W x Cin int8), for a ``config`` with ``window=1`` (module
    docstring). ``PlaneMisfit`` when the chain does not fit; ``TypeError`` / ``ValueError``
    for bad input."""
    check_config(config)
    require_integer_operands(config, "compile_planes")
    if not config.window:
        raise PlaneMisfit(f"config {config.name} has no window walk (window=0)")
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise ValueError(f"x must be an integer array, not {x.dtype}")
    convs, fcs = check_layers(config, x, layers)
    ot = config.operand_type
    if x.size and (x.min() < ot.min or x.max() > ot.max):
        raise ValueError(f"x values must be in {ot.min}..{ot.max}")
    lookahead = check_lookahead(config, weight_lookahead)
    if not isinstance(pack, bool):
        raise TypeError(f"pack must be a bool, not {pack!r}")
    plane_tensors(config, x.astype(np.int64), convs, fcs)      # the checks, unpacked
    if pack:
        x, convs = pack_chain(config.rows, x.astype(np.int64), convs)
    tensors = plane_tensors(config, x.astype(np.int64), convs, fcs)
    B = x.shape[0]
    best, misfit = None, None
    for G in sorted({B, *(g for g in (64, 32, 16, 8, 4, 2, 1) if g < B)}, reverse=True):
        mb = 0
        if fcs:
            nts = max(ceil_div(fc.weights.shape[1], config.cols) for fc in fcs)
            mb = min(G, config.acc_rows // 2 // nts, MAX_ROWS)
            if mb < 1:
                raise PlaneMisfit("a fully connected layer's n-tiles do not fit half the "
                                  "accumulators")
        try:
            plans, layout, per_image = conv_plans(config, G, tensors, convs, fcs, mb)
        except PlaneMisfit as e:
            misfit = misfit or e
            continue
        # Each group sends the fully connected layers' weights again.
        cost = B * per_image + ceil_div(B, G) * sum(
            ceil_div(fc.weights.shape[0], config.rows) * ceil_div(fc.weights.shape[1],
                                                                  config.cols)
            for fc in fcs) * config.rows
        if best is None or cost < best[0]:
            best = (cost, G, mb, plans, layout)
        if not fcs:
            break
    if best is None:
        raise misfit
    _, G, mb, plans, layout = best
    fit = plans, layout
    plans, layout = fit
    b = PlaneBuilder(config, x.astype(np.int64), convs, fcs, tensors, lookahead)
    b.G = G
    conv_tiles = [b.conv_tiles(i) for i in range(len(convs))]
    if fcs:
        b.fc_layers(layout, mb)
    for g0 in range(0, B, G):
        b.g0 = g0
        count = min(G, B - g0)
        for img in range(g0, g0 + count):
            for i in range(len(convs)):
                b.conv_image(i, img, plans[i], conv_tiles[i], layout,
                             to_host=not fcs and i == len(convs) - 1)
        if fcs:
            b.fc_group(layout, mb, count)
    program, blocks = b.program()
    if fcs:
        shape = (B, fcs[-1].weights.shape[1])
    else:
        oh, ow = convs[-1].out_hw
        shape = (B * oh * ow, convs[-1].weights.shape[3])
    info = dict(kind="planes", group=G, walk_px=[p.px for p in plans], bands=len(layout.band),
                ub_rows_used=layout.used, matmuls=b.matmuls,
                estimate=plane_estimate(config, program))
    return CompiledGemm(config, program, shape, "int8", info, blocks)


def plane_estimate(config: Config, program) -> int:
    """A rough cycle estimate: every MATMUL (a window MATMUL like a GEMM MATMUL of n rows)
    takes ``max(n + 3, R)`` cycles and every ACTIVATE its rows' activation time, one after
    the other (a layer's ACTIVATEs feed the next layer's MATMULs); the host-in beats overlap
    them. (The MNIST CNN at batch 1 on the ULX3S array: 3,776 estimated, 4,722 on
    Verilator.)"""
    compute = host_in = 0
    act_row = activation_timing(config)[0]
    for step in program:
        f = isa.decode(step.word)
        if f["op"] == isa.Op.MATMUL:
            compute += max(f["n"] + MATMUL_GAP, config.rows)
        elif f["op"] == isa.Op.ACTIVATE:
            compute += f["n"] * act_row
        host_in += isa.host_in_beats(f, config)
    return max(compute, host_in)
