"""Output sizes and padding of TFLite's 2-D windows (CONV_2D, DEPTHWISE_CONV_2D, pools), and
the host-side window gather (im2col) that the convolution lowering and the pools share.

TFLite's ``ComputeOutSize`` and ``ComputePaddingHeightWidth``, with ``k' = (k - 1) * d + 1``
(the dilated window): SAME ``out = ceil(in / stride)``; VALID ``out = (in - k' + stride) //
stride``; ``pad_before = max(((out - 1) * stride + k' - in) // 2, 0)``, the odd row or column
of padding after. TFLite Micro does not check a model's declared output shape, so the
importer computes shapes with these and never reads them from the model.
"""

import numpy as np

__all__ = ["PADDINGS", "Window", "window"]

PADDINGS = ("SAME", "VALID")


class Window:
    """One spatial axis of a window op: ``size`` (input), ``k`` (window), ``stride``,
    ``dilation``; ``out`` (output size), ``before`` / ``after`` (padding rows)."""

    def __init__(self, size: int, k: int, stride: int, dilation: int, padding: str):
        for name, v, lo in (("size", size, 1), ("k", k, 1), ("stride", stride, 1),
                            ("dilation", dilation, 1)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                raise TypeError(f"{name} must be an integer, not {v!r}")
            if v < lo:
                raise ValueError(f"{name} must be at least {lo}, not {v!r}")
        if padding not in PADDINGS:
            raise ValueError(f"padding must be SAME or VALID, not {padding!r}")
        self.size, self.k, self.stride, self.dilation = int(size), int(k), int(stride), \
            int(dilation)
        span = (self.k - 1) * self.dilation + 1
        if padding == "SAME":
            self.out = (self.size + self.stride - 1) // self.stride
        else:
            self.out = (self.size - span + self.stride) // self.stride
        if self.out < 1:
            raise ValueError(f"a VALID window of {span} does not fit an input of {self.size}")
        total = max((self.out - 1) * self.stride + span - self.size, 0)
        self.before = total // 2
        self.after = total - self.before

    def unpadded(self, before: int, after: int) -> "Window":
        """This (VALID) window read from an input that a PAD op padded with ``before`` /
        ``after`` rows: the same window on the unpadded input, padded by the gather."""
        if self.before or self.after or before < 0 or after < 0 or \
                self.size - before - after < 1:
            raise ValueError(f"cannot take padding {before}, {after} out of a window on "
                             f"{self.size} rows padded {self.before}, {self.after}")
        w = Window.__new__(Window)
        w.__dict__.update(self.__dict__)
        w.size, w.before, w.after = self.size - before - after, int(before), int(after)
        return w

    def taps(self):
        """``(tap, slice)`` per window tap: the padded input's rows that tap reads."""
        last = (self.out - 1) * self.stride + 1
        return [(t, slice(t * self.dilation, t * self.dilation + last, self.stride))
                for t in range(self.k)]


def window(x: np.ndarray, wy: Window, wx: Window, fill) -> np.ndarray:
    """Gather the windows of NHWC ``x`` (padded with ``fill``): shape ``(B, OH, OW, KH * KW,
    C)``, taps in row-major ``(ky, kx)`` order."""
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"x must be NHWC (4-D), not shape {x.shape}")
    padded = np.pad(x, ((0, 0), (wy.before, wy.after), (wx.before, wx.after), (0, 0)),
                    constant_values=fill)
    taps = [padded[:, sy, sx, :] for _, sy in wy.taps() for _, sx in wx.taps()]
    return np.stack(taps, axis=3)
