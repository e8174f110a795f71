"""The core bridge's payloads on the host side: PROGRAM records (``word_record``,
``beat_record``) and RESULT / CONTROL_REPLY replies (``decode_reply``). The layouts are in
``fpga.protocol``."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from tpugen.fpga.host.serial_link import LinkError
from tpugen.fpga.protocol import (
    BEAT_LAST,
    BEAT_NARROW,
    REC_BEAT,
    REC_LAST,
    REC_PBEAT,
    REC_PLAST,
    REC_WORD,
    RESULT_BUSY,
    RESULT_ERROR,
    RESULT_HEADER_FORMAT,
    RESULT_HEADER_SIZE,
    RESULT_OVERFLOW,
    RESULT_WAITING,
    acc_bytes,
    operand_bytes,
    packs_int4,
)
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.layouts import host_lanes

__all__ = ["word_record", "beat_record", "Reply", "decode_reply", "COUNTER_NAMES"]

#: The names of a reply's counters, in ``hdl.isa.Counter`` order (``Reply.counters``' keys).
COUNTER_NAMES = tuple(c.name.lower() for c in isa.Counter)


def word_record(word: int) -> bytes:
    """The REC_WORD record of a 64-bit instruction word."""
    if not isinstance(word, int) or isinstance(word, bool) or not 0 <= word < 1 << 64:
        raise ValueError(f"word must be a 64-bit unsigned integer, not {word!r}")
    return bytes([REC_WORD]) + word.to_bytes(8, "little")


def beat_record(config: Config, lanes, last: bool, *, packed: bool | None = None) -> bytes:
    """The record of one host-in beat of ``max(R, C)`` lanes (signed integers of
    ``8 * operand_bytes`` bits): REC_PBEAT / REC_PLAST (two lanes a byte, low nibble first)
    for an int4 config whose lanes are all -8..7 (``packed=None``: whenever it can be), else
    REC_BEAT / REC_LAST."""
    ob = operand_bytes(config)
    lo, hi = -(1 << (8 * ob - 1)), (1 << (8 * ob - 1)) - 1
    values = [int(v) for v in lanes]
    if len(values) != host_lanes(config):
        raise ValueError(f"lanes must have {host_lanes(config)} values, not {len(values)}")
    for v in values:
        if not lo <= v <= hi:
            raise ValueError(f"lane value {v} is not a host-in lane value ({lo}..{hi})")
    can_pack = packs_int4(config) and all(-8 <= v <= 7 for v in values)
    if packed and not can_pack:
        raise ValueError("packed=True needs an int4 config and lanes in -8..7")
    if can_pack and packed is not False:
        nibbles = [v & 0xF for v in values] + [0] * (len(values) % 2)
        return bytes([REC_PLAST if last else REC_PBEAT]) + bytes(
            lo | hi << 4 for lo, hi in zip(nibbles[::2], nibbles[1::2], strict=True))
    out = bytearray([REC_LAST if last else REC_BEAT])
    for v in values:
        out += (v & ((1 << (8 * ob)) - 1)).to_bytes(ob, "little")
    return bytes(out)


def _flag(bit: int, doc: str) -> property:
    """A ``Reply`` property: whether ``bit`` of its ``flags`` is set."""
    return property(lambda self: bool(self.flags & bit), doc=doc)


@dataclass
class Reply:
    """A decoded RESULT (or CONTROL_REPLY) payload."""

    flags: int
    cause: int
    dropped: int
    counters: dict          # COUNTER_NAMES -> value
    host_out: np.ndarray    # (beats, C) int64
    last: np.ndarray        # (beats,) bool

    overflow = _flag(RESULT_OVERFLOW, "Beats were dropped: the reply was full.")
    waiting = _flag(RESULT_WAITING, "The core waits for host-in data the frame did not bring.")
    busy = _flag(RESULT_BUSY, "The core was busy when the reply was made.")
    error = _flag(RESULT_ERROR, "The core's sticky error is set (``cause``).")


def decode_reply(config: Config | None, payload: bytes) -> Reply:
    """Parse a RESULT / CONTROL_REPLY payload (``fpga.protocol`` has the layout); ``config``
    gives the beats' shape (it may be None for a reply without beats). Raises ``LinkError``
    for a payload of the wrong length."""
    payload = bytes(payload)
    if len(payload) < RESULT_HEADER_SIZE:
        raise LinkError(f"a RESULT payload needs the {RESULT_HEADER_SIZE}-byte header, got "
                        f"{len(payload)} bytes")
    flags, cause, beats, dropped, *counters = struct.unpack_from(RESULT_HEADER_FORMAT, payload)
    counters = dict(zip(COUNTER_NAMES, counters, strict=True))
    if config is None:
        if beats or len(payload) != RESULT_HEADER_SIZE:
            raise LinkError(f"expected a reply without beats, got {beats} beats")
        return Reply(flags=flags, cause=cause, dropped=dropped, counters=counters,
                     host_out=np.zeros((0, 0), dtype=np.int64), last=np.zeros(0, dtype=bool))
    host_out, last = _result_beats(config, payload[RESULT_HEADER_SIZE:], beats)
    return Reply(flags=flags, cause=cause, dropped=dropped, counters=counters,
                 host_out=host_out, last=last)


def _result_beats(config: Config, body: bytes, beats: int) -> tuple[np.ndarray, np.ndarray]:
    """The RESULT beats of ``body``: each a flags byte (``BEAT_LAST``, ``BEAT_NARROW``), then
    C lanes of ``acc_bytes`` (narrow: of one byte), little endian, sign-extended."""
    C, oa = config.cols, acc_bytes(config)
    raw = np.frombuffer(body, dtype=np.uint8)
    starts, widths = np.zeros(beats, dtype=np.int64), np.zeros(beats, dtype=np.int64)
    pos = 0
    for b in range(beats):      # the beats' positions (a byte each to look at)
        if pos >= len(body):
            raise LinkError(f"a RESULT with {beats} beats ends in beat {b}")
        starts[b], widths[b] = pos, 1 if body[pos] & BEAT_NARROW else oa
        pos += 1 + C * int(widths[b])
    if pos != len(body):
        raise LinkError(f"a RESULT with {beats} beats needs {pos} bytes after its header, got "
                        f"{len(body)}")
    host_out = np.zeros((beats, C), dtype=np.int64)
    for width in (1, oa):
        sel = np.flatnonzero(widths == width)
        if not len(sel):
            continue
        idx = starts[sel, None, None] + 1 + np.arange(C)[:, None] * width + np.arange(width)
        lanes = raw[idx].astype(np.uint64)
        value = np.zeros((len(sel), C), dtype=np.uint64)
        for k in range(width):
            value |= lanes[:, :, k] << np.uint64(8 * k)
        bits = 8 * width
        v = value.view(np.int64) if bits == 64 else value.astype(np.int64)
        if bits < 64:
            v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
        host_out[sel] = v
    last = (raw[starts] & BEAT_LAST).astype(bool) if beats else np.zeros(0, dtype=bool)
    return host_out, last
