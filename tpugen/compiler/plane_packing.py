"""Packed planes: the first convolutions of a chain rewritten onto space-to-depth tensors, so
that an input with few channels fills the unified buffer's lanes (and the link's beats).

An image of ``Cin < R`` channels as planes uses ``Cin`` of a row's ``R`` lanes: the MNIST
image (one channel) would cross the link as 784 rows of 16 lanes. Packed ``p`` x ``p``, a row
holds a block of ``p * p`` pixels, lane ``(i * p + j) * Cin + c`` pixel ``(Y * p + i, X * p
+ j)``'s channel c: the image's own bytes, 49 rows of 16 for MNIST with ``p = 4``.

A convolution of stride ``s`` from a tensor packed ``p_in = s * p_out`` into one packed
``p_out`` is a stride-1 convolution of the packed tensors: output block ``(OY, OX)``, sub-pixel
``(io, jo)``, channel co reads input ``y = (OY * p_out + io) * s + ky * dy - top = OY * p_in
+ v`` with ``v = io * s + ky * dy - top``: packed row ``OY + v // p_in``, sub-row ``v % p_in``.
So its kernel has an offset per distinct ``v // p_in`` (and x alike), and maps input lanes
``(v % p_in, u % p_in, c)`` to output columns ``(io, jo, co)`` with the original weight; no two
taps share a place. Its parameters repeat per sub-pixel; its input zero point and padding
stay exact (a packed pixel outside the packed plane is outside the image; the host fills the
input's last partial blocks with the input zero point). ``pack_chain`` packs the longest
prefix of convolutions whose strides multiply to a ``p`` with ``p * p * Cin <= R`` and whose
outputs (but the prefix's last, unpacked) divide into blocks.
"""

from __future__ import annotations

import numpy as np

from tpugen.compiler.plane_layout import ConvLayer
from tpugen.sim.requant import QuantParams

__all__ = ["pack_chain", "packed_conv", "pack_input"]


def _offsets(p_in: int, p_out: int, s: int, k: int, d: int, before: int):
    """Per (sub-pixel io, tap) the packed offset and input sub-row; the lowest offset."""
    table = {(io, t): divmod(io * s + t * d - before, p_in) for io in range(p_out)
             for t in range(k)}
    return table, min(v[0] for v in table.values()), max(v[0] for v in table.values())


def packed_conv(conv: ConvLayer, p_in: int, p_out: int) -> ConvLayer:
    """``conv`` (stride ``p_in / p_out``) as a stride-1 convolution from a tensor packed
    ``p_in`` into one packed ``p_out`` (module docstring)."""
    kh, kw, ci, co = conv.weights.shape
    s = conv.stride[0]
    (dy, dx), (top, left) = conv.dilation, conv.padding
    ty, y0, y1 = _offsets(p_in, p_out, s, kh, dy, top)
    tx, x0, x1 = _offsets(p_in, p_out, s, kw, dx, left)
    K = np.zeros((y1 - y0 + 1, x1 - x0 + 1, p_in * p_in * ci, p_out * p_out * co),
                 dtype=np.int64)
    for io in range(p_out):
        for jo in range(p_out):
            col = (io * p_out + jo) * co
            for ky in range(kh):
                oy, iy = ty[(io, ky)]
                for kx in range(kw):
                    ox, ix = tx[(jo, kx)]
                    lane = (iy * p_in + ix) * ci
                    K[oy - y0, ox - x0, lane:lane + ci, col:col + co] = conv.weights[ky, kx]
    bias, mult, shift = conv.params.per_channel(co)
    rep = p_out * p_out
    q = conv.params
    params = QuantParams(bias=np.tile(bias, rep), multiplier=np.tile(mult, rep),
                         shift=np.tile(shift, rep), out_zp=q.out_zp, act_min=q.act_min,
                         act_max=q.act_max)
    oh, ow = conv.out_hw
    return ConvLayer(K, params, conv.in_zp, (1, 1), (1, 1), (-y0, -x0),
                     (oh // p_out, ow // p_out))


def pack_input(x: np.ndarray, p: int, fill: int) -> np.ndarray:
    """``x`` (B x H x W x C) packed ``p`` x ``p`` (partial blocks filled with ``fill``)."""
    B, H, W, C = x.shape
    hp, wp = -(-H // p), -(-W // p)
    big = np.full((B, hp * p, wp * p, C), fill, dtype=np.int64)
    big[:, :H, :W] = x
    return big.reshape(B, hp, p, wp, p, C).transpose(0, 1, 3, 2, 4, 5).reshape(
        B, hp, wp, p * p * C)


def _packing(R: int, cin: int, convs: list) -> tuple[int, list[int]]:
    """The longest packable prefix (module docstring): its length and each layer's input
    packing (``[p_0, .., p_j]``, ``p_j = 1``)."""
    best = (0, [1])
    for j in range(1, len(convs) + 1):
        if convs[j - 1].stride[0] != convs[j - 1].stride[1]:
            break
        strides = [c.stride[0] for c in convs[:j]]
        p = [int(np.prod(strides[i:])) for i in range(j)] + [1]
        if p[0] * p[0] * cin > R:
            break
        if all(convs[i].out_hw[0] % p[i + 1] == 0 and convs[i].out_hw[1] % p[i + 1] == 0
               for i in range(j)) and p[0] > 1:
            best = (j, p)
    return best


def pack_chain(R: int, x: np.ndarray, convs: list) -> tuple[np.ndarray, list]:
    """``x`` and ``convs`` with the longest packable prefix packed (module docstring;
    unchanged when none is worth it: ``Cin >= R`` or no stride above 1)."""
    cin = x.shape[3]
    j, p = _packing(R, cin, convs)
    if j == 0:
        return x, list(convs)
    out = [packed_conv(convs[i], p[i], p[i + 1]) for i in range(j)] + list(convs[j:])
    return pack_input(x, p[0], convs[0].in_zp), out
