"""The binary program file (``sim.program``'s module docstring gives the format): written and
read for ``Program.save_binary`` / ``Program.from_binary``."""

import struct

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.layouts import host_lane_width, host_lanes

__all__ = ["BINARY_MAGIC", "BINARY_VERSION", "lane_dtype", "write", "read"]

#: The first bytes of a binary program file, and its version.
BINARY_MAGIC = b"TPUGPROG"
BINARY_VERSION = 2


def lane_dtype(config: Config) -> type:
    """The NumPy type a program stores its host-in lanes in (``np.int8`` or ``np.int16``)."""
    return np.int16 if host_lane_width(config) > 8 else np.int8


def write(self, path) -> None:
    """Write ``self`` (a ``Program``) as a binary program file (``sim.program``)."""
    words = self.word_array()
    beats = self.step_beats().astype("<u4")
    data, last = self.host_in_arrays()
    cfg = self.config.to_json().encode()
    head = struct.pack("<8s6I2Q", BINARY_MAGIC, BINARY_VERSION, self.isa_version,
                       self.config.rows, self.config.cols, self.lanes, len(cfg),
                       len(words), len(data))
    with open(path, "wb") as f:
        for chunk in (head, cfg, words.astype("<u8").tobytes(), beats.tobytes(),
                      data.astype(np.dtype(lane_dtype(self.config)).newbyteorder("<")).tobytes(),
                      last.astype(np.uint8).tobytes()):
            f.write(chunk)
            f.write(b"\0" * (-len(chunk) % 8))



def read(cls, raw: bytes):
    """The ``cls`` (``Program``) of a binary program file's contents (``sim.program``)."""
    if len(raw) < 48 or raw[:8] != BINARY_MAGIC:
        raise ValueError("not a binary tpugen program")
    _, version, isa_version, _, _, lanes, jlen, n, b = struct.unpack_from("<8s6I2Q", raw)
    if version != BINARY_VERSION:
        raise ValueError(f"unsupported binary program version {version} (this tpugen reads "
                         f"version {BINARY_VERSION})")
    if isa_version != isa.ISA_VERSION:
        raise ValueError(f"program was made for ISA version {isa_version}, but this tpugen "
                         f"implements ISA version {isa.ISA_VERSION}")
    pos = 48
    try:
        config = Config.from_json(raw[pos:pos + jlen].decode())
    except (UnicodeDecodeError, ValueError, TypeError) as e:
        raise ValueError(f"binary program: bad config: {e}") from None
    if host_lanes(config) != lanes:
        raise ValueError(f"binary program: {lanes} lanes, but its config has "
                         f"{host_lanes(config)}")
    pos += jlen + (-jlen % 8)

    def take(dtype, count, itemsize):
        nonlocal pos
        size = count * itemsize
        if pos + size > len(raw):
            raise ValueError("binary program: truncated")
        arr = np.frombuffer(raw, dtype=dtype, count=count, offset=pos)
        pos += size + (-size % 8)
        return arr

    words = take("<u8", n, 8)
    beats = take("<u4", n, 4)
    dt = np.dtype(lane_dtype(config)).newbyteorder("<")
    data = take(dt, b * lanes, dt.itemsize).reshape(b, lanes)
    last = take(np.uint8, b, 1)
    if int(beats.sum()) != b:
        raise ValueError(f"binary program: steps hold {int(beats.sum())} beats, not {b}")
    if last.size and last.max() > 1:
        raise ValueError("binary program: last flags must be 0 or 1")
    return cls.from_arrays(config, words, beats, data, last.astype(bool),
                           isa_version=isa_version)
