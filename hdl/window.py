"""The window walk: a MATMUL that reads its vectors in the order of a convolution's window.

A convolution's input stays in the unified buffer as planes: a plane is ``in_h`` x ``in_w``
pixels of up to R channels, pixel ``(y, x)`` in row ``origin + y * in_w + x``. A MATMUL with
flag WINDOW (``Config.window``) sends the array one vector per output pixel of a window walk
instead of rows ``src..``: for kernel offset ``(dy, dx)`` and stride ``s``, output pixel
``(oy, ox)`` reads input pixel ``(oy * s + dy, ox * s + dx)``, or the pad vector (every lane
``pad``: the input zero point, so TFLite's SAME / explicit padding needs no rows) when that
pixel is outside the plane. Over the k x k offsets and the channel planes, with
ACCUMULATE, this is the convolution's GEMM without the host's im2col matrix.

Two registers hold the walk, set by NOP words (their body: ``WINDOW_SHAPE_LAYOUT``,
``WINDOW_AT_LAYOUT``):

* NOP SHAPE: ``in_w``, ``in_h`` (the plane), ``out_w`` (output pixels a row), ``stride``,
  ``pad`` (the pad lane's value, in the operand's bits).
* NOP AT: where a walk starts: input pixel ``(iy, ix)`` of the first output pixel, its output
  column ``ox``, and ``ixr``: the input column of a row's first output pixel (``dx``).

A MATMUL WINDOW of n vectors (src: the plane's origin; part: its extent, ``(part + 1) *
WINDOW_BLOCK`` rows from src, which must hold the plane) walks from the AT register (which it
leaves as it is, so MATMULs for other weight tiles repeat the walk): each vector reads
``(iy, ix)``, then ``ix += s`` and ``ox += 1``, or, after the row's last output pixel (``ox ==
out_w - 1``), ``ox = 0``, ``ix = ixr``, ``iy += s``. ``iy`` and ``ix`` wrap as 16-bit signed
numbers. Its unified-buffer range, for the interlocks, is the extent. It is dropped with
OUT_OF_RANGE when the extent passes the buffer (decided by the word), or at issue when the
SHAPE register has a zero ``in_w``, ``in_h``, ``out_w`` or ``stride`` or its plane does not fit
the extent. Both registers are 0 after reset.
"""

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from tpugen.hdl.isa import MEM_FIELDS, WINDOW_BLOCK

__all__ = ["WINDOW_BLOCK", "WINDOW_SHAPE_LAYOUT", "WINDOW_AT_LAYOUT", "WALK_BITS",
           "shape_fields", "at_fields", "unpack_shape", "unpack_at", "extent_part"]

#: Bits of the walk's signed input coordinates.
WALK_BITS = 16
_BODY_BITS = sum(f.width for f in MEM_FIELDS)

WINDOW_SHAPE_LAYOUT = data.StructLayout({
    "in_w": unsigned(8), "in_h": unsigned(8), "out_w": unsigned(8), "stride": unsigned(4),
    "_spare0": unsigned(4), "pad": unsigned(16), "_spare1": unsigned(8),
})
WINDOW_AT_LAYOUT = data.StructLayout({
    "iy": signed(WALK_BITS), "ix": signed(WALK_BITS), "ixr": signed(WALK_BITS),
    "ox": unsigned(8),
})
assert WINDOW_SHAPE_LAYOUT.size == WINDOW_AT_LAYOUT.size == _BODY_BITS


def _int(name: str, value, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")
    return value


def _body(layout: data.StructLayout, values: dict) -> dict:
    """The word's body fields (``src``, ``dst``, ``n``, ``part``) holding ``values`` packed by
    ``layout``."""
    body = 0
    for name, field in layout:
        if name.startswith("_"):
            continue
        width = field.shape.width
        body |= (values[name] & ((1 << width) - 1)) << field.offset
    out, at = {}, 0
    for f in MEM_FIELDS:
        out[f.name] = (body >> at) & f.mask
        at += f.width
    return out


def _unpack(layout: data.StructLayout, fields: dict) -> dict:
    body, at = 0, 0
    for f in MEM_FIELDS:
        body |= (fields[f.name] & f.mask) << at
        at += f.width
    out = {}
    for name, field in layout:
        if name.startswith("_"):
            continue
        width = field.shape.width
        v = (body >> field.offset) & ((1 << width) - 1)
        if field.shape.signed and v >> (width - 1):
            v -= 1 << width
        out[name] = v
    return out


def shape_fields(*, in_w: int, in_h: int, out_w: int, stride: int, pad: int) -> dict:
    """The body fields of a NOP SHAPE word. ``pad`` is the pad lane's value: an integer
    operand's (-32768..32767, truncated to the operand's width) or a float's bits."""
    values = {"in_w": _int("in_w", in_w, 1, 255), "in_h": _int("in_h", in_h, 1, 255),
              "out_w": _int("out_w", out_w, 1, 255), "stride": _int("stride", stride, 1, 15),
              "pad": _int("pad", pad, -(1 << 15), (1 << 16) - 1)}
    return _body(WINDOW_SHAPE_LAYOUT, values)


def at_fields(*, iy: int, ix: int, ixr: int, ox: int) -> dict:
    """The body fields of a NOP AT word."""
    lo, hi = -(1 << (WALK_BITS - 1)), (1 << (WALK_BITS - 1)) - 1
    values = {"iy": _int("iy", iy, lo, hi), "ix": _int("ix", ix, lo, hi),
              "ixr": _int("ixr", ixr, lo, hi), "ox": _int("ox", ox, 0, 255)}
    return _body(WINDOW_AT_LAYOUT, values)


def unpack_shape(fields: dict) -> dict:
    """``in_w``, ``in_h``, ``out_w``, ``stride``, ``pad`` (unsigned 16 bits) of a decoded NOP
    SHAPE word's fields."""
    return _unpack(WINDOW_SHAPE_LAYOUT, fields)


def unpack_at(fields: dict) -> dict:
    """``iy``, ``ix``, ``ixr`` (signed), ``ox`` of a decoded NOP AT word's fields."""
    return _unpack(WINDOW_AT_LAYOUT, fields)


def extent_part(rows: int) -> int:
    """The ``part`` of a window MATMUL whose extent holds ``rows`` rows (1..16384)."""
    _int("rows", rows, 1, 256 * WINDOW_BLOCK)
    return (rows - 1) // WINDOW_BLOCK
