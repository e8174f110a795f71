"""Convolutions as window-walk programs (``hdl.window``), with their expected results from a
direct NumPy convolution that knows nothing of the walk: the input padded with its zero point,
every output pixel's window summed."""

from dataclasses import dataclass

import numpy as np

from tpugen.hdl.config import Config
from tpugen.sim.program import Program


@dataclass(frozen=True)
class Conv:
    """One convolution: input ``h`` x ``w`` x ``cin``, kernel ``kh`` x ``kw`` x ``cin`` x
    ``cout``, ``stride``, ``dilation``, padding ``top`` / ``left`` (SAME or explicit; the
    output size is given), the output ``oh`` x ``ow``, and the output pixels per MATMUL
    (``split``: the accumulator rows a walk fills, not a multiple of ``ow`` in general)."""

    h: int
    w: int
    cin: int
    cout: int
    kh: int
    kw: int
    stride: int = 1
    dilation: int = 1
    top: int = 0
    left: int = 0
    oh: int = 0
    ow: int = 0
    split: int = 0

    def out_shape(self) -> tuple[int, int]:
        if self.oh and self.ow:
            return self.oh, self.ow
        eh = (self.kh - 1) * self.dilation + 1
        ew = (self.kw - 1) * self.dilation + 1
        return ((self.h + 2 * self.top - eh) // self.stride + 1,
                (self.w + 2 * self.left - ew) // self.stride + 1)


def reference(conv: Conv, x: np.ndarray, k: np.ndarray, zp: int) -> np.ndarray:
    """The convolution's sums (oh * ow x cout, raw operands: padding is ``zp``)."""
    oh, ow = conv.out_shape()
    d, s = conv.dilation, conv.stride
    big = np.full((conv.h + 2 * 64, conv.w + 2 * 64, conv.cin), zp, dtype=np.int64)
    big[64:64 + conv.h, 64:64 + conv.w] = x
    out = np.zeros((oh, ow, conv.cout), dtype=np.int64)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = 64 + oy * s - conv.top, 64 + ox * s - conv.left
            win = big[y0:y0 + (conv.kh - 1) * d + 1:d, x0:x0 + (conv.kw - 1) * d + 1:d]
            out[oy, ox] = np.einsum("yxc,yxco->o", win, k)
    return out.reshape(oh * ow, conv.cout)


def program(config: Config, conv: Conv, x: np.ndarray, k: np.ndarray, zp: int,
            *, origin: int = 0) -> Program:
    """The convolution on the core: the input as planes of R channels from UB row ``origin``,
    one weight tile per kernel offset and plane, the sums read from ACC rows 0.."""
    R, C = config.rows, config.cols
    assert conv.cout <= C
    oh, ow = conv.out_shape()
    planes = -(-conv.cin // R)
    plane = conv.h * conv.w
    p = Program(config)
    for c in range(planes):
        rows = np.zeros((plane, R), dtype=np.int64)
        part = x[:, :, c * R:(c + 1) * R].reshape(plane, -1)
        rows[:, :part.shape[1]] = part
        p.read_host(origin + c * plane, rows)
    p.window_shape(in_w=conv.w, in_h=conv.h, out_w=ow, stride=conv.stride, pad=zp)
    split = conv.split or oh * ow
    for p0 in range(0, oh * ow, split):
        n = min(split, oh * ow - p0)
        oy0, ox0 = divmod(p0, ow)
        first = True
        for ky in range(conv.kh):
            for kx in range(conv.kw):
                dy, dx = ky * conv.dilation - conv.top, kx * conv.dilation - conv.left
                p.window_at(iy=oy0 * conv.stride + dy, ix=ox0 * conv.stride + dx, ixr=dx,
                            ox=ox0)
                for c in range(planes):
                    tile = np.zeros((R, C), dtype=np.int64)
                    part = k[ky, kx, c * R:(c + 1) * R]
                    tile[:part.shape[0], :conv.cout] = part
                    p.read_weights(tile[None])
                    p.matmul_window(origin + c * plane, p0, n, extent=plane,
                                    accumulate=not first)
                    first = False
    p.write_host(0, oh * ow, from_acc=True)
    return p


def random_case(config: Config, conv: Conv, rng) -> tuple[Program, np.ndarray]:
    """A program of ``conv`` on full-range random operands, and its expected host-out rows."""
    lo, hi = config.operand_type.min, config.operand_type.max
    x = rng.integers(lo, hi + 1, size=(conv.h, conv.w, conv.cin))
    k = rng.integers(lo, hi + 1, size=(conv.kh, conv.kw, conv.cin, conv.cout))
    zp = int(rng.integers(lo, hi + 1))
    want = np.zeros((len(reference(conv, x, k, zp)), config.cols), dtype=np.int64)
    want[:, :conv.cout] = reference(conv, x, k, zp)
    return program(config, conv, x, k, zp), want


#: Geometries that cover SAME / VALID / explicit padding, strides, dilation, non-square
#: kernels and inputs, several channel planes, and walks split in the middle of a row.
CASES = {
    "3x3_same": Conv(h=5, w=7, cin=3, cout=4, kh=3, kw=3, top=1, left=1),
    "3x3_valid_split": Conv(h=6, w=5, cin=4, cout=3, kh=3, kw=3, split=5),
    "stride2_same": Conv(h=7, w=8, cin=2, cout=4, kh=3, kw=3, stride=2, top=1, left=1,
                         oh=4, ow=4, split=3),
    "dilation2": Conv(h=8, w=6, cin=4, cout=2, kh=3, kw=3, dilation=2, top=2, left=2),
    "1x3_planes": Conv(h=3, w=9, cin=7, cout=4, kh=1, kw=3, left=1, split=7),
    "5x5_pad2_stride3": Conv(h=9, w=10, cin=1, cout=4, kh=5, kw=5, stride=3, top=2, left=2),
}
