"""The host link's frame format: the constants and layouts shared by the gateware and the host.

Pure Python (no Amaranth), so that host tools import it cheaply.

A frame on the wire (every multi-byte integer little endian except the CRC):

    offset  size  field
    0       2     SYNC      0xA5 0x5A
    2       1     type      ``FrameType``
    3       2     length    payload bytes, little endian, 0..max payload (at most 65535)
    5       n     payload
    5+n     2     CRC       CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no
                            final XOR) over type, length and payload, sent high byte first,
                            so that the CRC over type..CRC is 0 (what the receiver checks)

Every request frame from the host gets exactly one reply frame from the board. A reply's type is
the request's type with ``REPLY_BIT`` set, or ``ERROR``. An ``ERROR`` payload is at least two bytes:
the ``ErrorCode``, then the type byte of the offending frame as received (0 when it was not
received; for ``REPLY_TOO_LONG`` the type of the reply that did not fit); the inside's own errors
(codes from ``ErrorCode.INSIDE`` up) may append detail bytes, and so may later versions, so
readers must ignore extra bytes.

The board buffers a whole request frame before acting on it; a frame with a bad CRC, a length
above the board's maximum, an unknown type, a UART framing error, or cut short (no byte for the
idle timeout mid-frame) is not acted upon. After such a frame, and after bytes that arrived while
the board was busy with a frame, the board discards input until the line has been idle for the
idle timeout, then sends the one ``ERROR`` reply: so a burst of garbage gets one reply, and the
next good frame works.

The ID reply's payload is ``LINK_ID_FIELDS`` (filled in by the link endpoint) followed by
``BOARD_ID_FIELDS`` (given to the endpoint by the board); ``decode_id`` parses both.
"""

from __future__ import annotations

import enum
import struct

__all__ = [
    "PROTOCOL_VERSION", "SYNC", "HEADER_SIZE", "CRC_SIZE", "OVERHEAD", "MAX_LENGTH", "REPLY_BIT",
    "FrameType", "ErrorCode", "REQUEST_TYPES", "reply_type", "error_reason", "ID_MAGIC",
    "LINK_ID_FIELDS", "BOARD_ID_FIELDS", "LINK_ID_SIZE", "BOARD_ID_SIZE", "encode_link_id",
    "encode_board_id", "board_id_from_config", "decode_id",
]

#: Bumped whenever the frame format, a type's or an error code's meaning, or the ID layout changes.
PROTOCOL_VERSION = 1

#: The bytes that start every frame.
SYNC = b"\xa5\x5a"
#: Bytes before the payload: SYNC, type, length.
HEADER_SIZE = len(SYNC) + 1 + 2
CRC_SIZE = 2
#: Bytes a frame has besides its payload.
OVERHEAD = HEADER_SIZE + CRC_SIZE
#: The largest length the 16-bit length field can carry.
MAX_LENGTH = 0xFFFF

#: Set in the type of every reply (``ERROR`` included).
REPLY_BIT = 0x80


class FrameType(enum.IntEnum):
    """Frame types. Requests go host -> board, replies (``REPLY_BIT`` set) board -> host."""

    PING = 0x01        # request: any payload; the reply echoes it (PING_REPLY)
    ID = 0x02          # request: payload ignored; the reply carries ``decode_id``'s fields
    PROGRAM = 0x10     # request: instruction words and host-in data for the accelerator core
    PING_REPLY = 0x81
    ID_REPLY = 0x82
    RESULT = 0x90      # reply to PROGRAM: the core's host-out data
    ERROR = 0xFF       # reply to any request that failed: [ErrorCode, offending type, ...]


#: The request types a board understands (the link endpoint answers PING and ID itself and passes
#: PROGRAM to the core).
REQUEST_TYPES = (FrameType.PING, FrameType.ID, FrameType.PROGRAM)


def reply_type(request_type: int) -> int:
    """The type of the (non-error) reply to a request of ``request_type``."""
    return int(request_type) | REPLY_BIT


class ErrorCode(enum.IntEnum):
    """The first payload byte of an ``ERROR`` reply."""

    BAD_CRC = 1         # the frame's CRC did not match
    TOO_LONG = 2        # the length field is above the board's maximum payload
    UNKNOWN_TYPE = 3    # the type is not a request type this board understands
    TIMEOUT = 4         # the frame was cut short: no byte for the idle timeout mid-frame
    FRAMING = 5         # a UART framing error (a bad stop bit) inside the frame
    OVERRUN = 6         # bytes arrived while the board was busy with a frame (the host did not
                        # wait for the reply); they were discarded
    REPLY_TOO_LONG = 7  # the board's reply did not fit its reply buffer
    INSIDE = 0x40       # first code of the range 0x40..0xFF the inside (the core bridge) may use


_REASONS = {
    ErrorCode.BAD_CRC: "bad CRC",
    ErrorCode.TOO_LONG: "frame length above the board's maximum payload",
    ErrorCode.UNKNOWN_TYPE: "unknown frame type",
    ErrorCode.TIMEOUT: "frame cut short (idle timeout mid-frame)",
    ErrorCode.FRAMING: "UART framing error (bad stop bit) inside the frame",
    ErrorCode.OVERRUN: "bytes arrived while the board was busy (request sent before the reply)",
    ErrorCode.REPLY_TOO_LONG: "reply longer than the board's reply buffer",
}


def error_reason(code: int) -> str:
    """A human-readable reason for an ``ErrorCode`` (or an inside code)."""
    try:
        return _REASONS[ErrorCode(code)]
    except (ValueError, KeyError):
        if ErrorCode.INSIDE <= code <= 0xFF:
            return f"request rejected by the board's core (code {code:#04x})"
        return f"unknown error code {code:#04x}"


#: The ID reply starts with these bytes.
ID_MAGIC = b"TPUG"

#: (name, bytes) of the link part of the ID payload, after ``ID_MAGIC``; little endian.
LINK_ID_FIELDS = (
    ("protocol_version", 1),
    ("max_payload", 2),   # largest request payload the board accepts
    ("max_reply", 2),     # largest reply payload the board sends
    ("clk_freq", 4),      # board clock of the link, Hz (rounded)
    ("baud", 4),          # UART bit rate (rounded)
)

#: (name, bytes) of the board part of the ID payload; little endian.
BOARD_ID_FIELDS = (
    ("isa_version", 1),
    ("rows", 2),
    ("cols", 2),
    ("operand_width", 1),
    ("operand_signed", 1),
    ("acc_width", 1),
    ("weight_fifo_depth", 1),
    ("ub_rows", 4),
    ("acc_rows", 4),
    ("act_lanes", 2),
)

_SIZE_FORMAT = {1: "B", 2: "H", 4: "I"}


def _struct(fields) -> struct.Struct:
    return struct.Struct("<" + "".join(_SIZE_FORMAT[size] for _, size in fields))


_LINK_STRUCT = _struct(LINK_ID_FIELDS)
_BOARD_STRUCT = _struct(BOARD_ID_FIELDS)
#: Bytes of the link part of the ID payload (``ID_MAGIC`` included) and of the board part.
LINK_ID_SIZE = len(ID_MAGIC) + _LINK_STRUCT.size
BOARD_ID_SIZE = _BOARD_STRUCT.size


def _pack(fields, st: struct.Struct, values: dict, what: str) -> bytes:
    names = [name for name, _ in fields]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"{what} has no field {unknown[0]!r}")
    out = []
    for name, size in fields:
        if name not in values:
            raise ValueError(f"{what} field {name!r} is missing")
        v = values[name]
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} must be an integer, not {v!r}")
        if not 0 <= v < 1 << (8 * size):
            raise ValueError(f"{name} must be in 0..{(1 << (8 * size)) - 1}, not {v!r}")
        out.append(int(v))
    return st.pack(*out)


def encode_link_id(*, max_payload: int, max_reply: int, clk_freq: int, baud: int,
                   protocol_version: int = PROTOCOL_VERSION) -> bytes:
    """The link part of the ID payload (``ID_MAGIC`` included)."""
    return ID_MAGIC + _pack(LINK_ID_FIELDS, _LINK_STRUCT, {
        "protocol_version": protocol_version, "max_payload": max_payload,
        "max_reply": max_reply, "clk_freq": clk_freq, "baud": baud}, "link ID")


def encode_board_id(**fields: int) -> bytes:
    """The board part of the ID payload from the ``BOARD_ID_FIELDS`` given by name."""
    return _pack(BOARD_ID_FIELDS, _BOARD_STRUCT, fields, "board ID")


def board_id_from_config(config) -> bytes:
    """The board part of the ID payload of an accelerator built from an ``hdl.config.Config``."""
    from hdl.config import Config
    from hdl.isa import ISA_VERSION

    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
    return encode_board_id(
        isa_version=ISA_VERSION, rows=config.rows, cols=config.cols,
        operand_width=config.operand_type.width,
        operand_signed=int(config.operand_type.signed), acc_width=config.acc_width,
        weight_fifo_depth=config.weight_fifo_depth, ub_rows=config.ub_rows,
        acc_rows=config.acc_rows, act_lanes=config.act_lanes)


def decode_id(payload: bytes) -> dict:
    """Parse an ID reply's payload into a dict of the link and (when present) board fields.

    Adds ``"operand"`` (e.g. ``"int8"``) when the board part is present, and ``"extra"``
    (the bytes after the known fields) when there are any. Raises ``ValueError`` when the payload
    is not an ID payload.
    """
    payload = bytes(payload)
    n = LINK_ID_SIZE
    if len(payload) < n or not payload.startswith(ID_MAGIC):
        raise ValueError(f"not an ID payload (need {ID_MAGIC!r} and {n} bytes): {payload!r}")
    out = dict(zip([name for name, _ in LINK_ID_FIELDS],
                   _LINK_STRUCT.unpack_from(payload, len(ID_MAGIC)), strict=True))
    rest = payload[n:]
    if len(rest) >= _BOARD_STRUCT.size:
        out.update(zip([name for name, _ in BOARD_ID_FIELDS],
                       _BOARD_STRUCT.unpack_from(rest), strict=True))
        out["operand"] = f"{'int' if out['operand_signed'] else 'uint'}{out['operand_width']}"
        rest = rest[_BOARD_STRUCT.size:]
    if rest:
        out["extra"] = rest
    return out
