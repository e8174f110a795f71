"""Random int8 layers for the ``.tflite`` tests, written with ``tpugen.tflite.writer``: scales,
biases and zero points that exercise TFLite's requantization (a multiplier above 1, zero points
at the ends of the range)."""

__all__ = ["random_zp", "random_layer", "random_fc", "random_conv"]


def random_zp(rng):
    """A zero point: often an end of the int8 range."""
    return int(rng.choice([-128, 127, int(rng.integers(-100, 100))]))


def random_layer(rng, n, *, per_channel=True, s_in=0.05):
    """Random scales and bias of a GEMM layer with ``n`` outputs: one channel's multiplier
    above 1 (a left shift)."""
    s_out = float(rng.uniform(0.02, 0.3))
    if per_channel:
        s_w = rng.uniform(0.0005, 0.02, n)
        s_w[0] = s_out / s_in * 2.5
    else:
        s_w = float(rng.uniform(0.0005, 0.02))
    bias = rng.integers(-(1 << 14), 1 << 14, n)
    return s_w, bias, s_out, random_zp(rng)


def random_fc(mw, x, rng, n, activation="NONE", per_channel=True, **kw):
    """A FULLY_CONNECTED of ``x``'s last axis to ``n`` outputs, random weights and scales."""
    k = x.shape[-1]
    s_w, bias, s_out, zp = random_layer(rng, n, per_channel=per_channel, s_in=x.scale)
    w = rng.integers(-127, 128, (n, k))
    return mw.fully_connected(x, w, bias, s_w, s_out, zp, activation, **kw)


def random_conv(mw, x, rng, cout, k=3, stride=1, padding="SAME", activation="NONE",
                dilation=1):
    """A k x k CONV_2D of NHWC ``x`` to ``cout`` channels, random per-channel weights."""
    s_w, bias, s_out, zp = random_layer(rng, cout, s_in=x.scale)
    w = rng.integers(-127, 128, (cout, k, k, x.shape[3]))
    return mw.conv2d(x, w, bias, s_w, s_out, zp, stride=stride, padding=padding,
                     activation=activation, dilation=dilation)
