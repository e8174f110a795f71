"""Packing lanes of signed integers into the flat vectors of the generated Verilog ports."""

__all__ = ["pack", "unpack"]


def pack(values, width: int) -> int:
    """Lane ``k`` of ``values`` at bits ``[k*width, (k+1)*width)``, two's complement."""
    mask = (1 << width) - 1
    word = 0
    for k, v in enumerate(values):
        v = int(v)
        if not -(1 << (width - 1)) <= v < (1 << width):
            raise ValueError(f"lane {k} value {v} does not fit in {width} bits")
        word |= (v & mask) << (k * width)
    return word


def unpack(word: int, width: int, lanes: int, *, signed: bool = True) -> list:
    """Inverse of ``pack``: ``lanes`` lanes of ``width`` bits, sign-extended if ``signed``."""
    mask = (1 << width) - 1
    out = []
    for k in range(lanes):
        v = (word >> (k * width)) & mask
        if signed and v >> (width - 1):
            v -= 1 << width
        out.append(v)
    return out
