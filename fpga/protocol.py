"""The host link's wire format: every constant, size and layout shared by the gateware and the
host, and the link's defaults.

No gateware: the host side (``fpga.host``, the board backend) imports this module and never the
Amaranth components (``fpga.gateware``). It imports only ``hdl.isa`` (the counter set, the ISA
version), ``hdl.config`` (the board ID carries a ``Config``) and ``hdl.layouts.host_lanes`` (the
lanes of a host-in beat).

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

The ID reply's payload is ``ID_MAGIC``, the ``LINK_ID_FIELDS`` (filled in by the link endpoint),
then the ``BOARD_ID_FIELDS`` (given to the endpoint by the board: ``board_id_from_config``);
``decode_id`` parses both and ``config_from_board_id`` turns the board part back into the
``Config``. The board part carries every ``Config`` field, so the host can check that a board
is exactly the accelerator it expects.
"""

from __future__ import annotations

import binascii
import dataclasses
import enum
import struct

from tpugen.hdl import isa
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.layouts import host_lane_width, host_lanes

__all__ = [
    "PROTOCOL_VERSION", "DEFAULT_BAUD", "DEFAULT_MAX_PAYLOAD", "SYNC", "HEADER_SIZE", "CRC_SIZE",
    "OVERHEAD", "MAX_LENGTH", "REPLY_BIT", "CRC_POLY", "CRC_INIT", "CRC_CHECK", "crc16",
    "FrameType", "ErrorCode", "reply_type", "error_reason",
    "ID_MAGIC", "LINK_ID_FIELDS", "BOARD_ID_FIELDS", "OPERAND_CODES", "ACT_MULT_CODES",
    "LINK_ID_SIZE", "BOARD_ID_SIZE", "encode_link_id", "encode_board_id",
    "board_id_from_config", "config_from_board_id", "decode_id",
]

#: Bumped whenever the frame format, a type's or an error code's meaning, or the ID layout
#: changes. 2: the board ID carries every ``Config`` field (operand and act_mult as codes,
#: counter_width, cell_pipeline). 3: and quant_sets (ISA 2: TFLite requantization). 4: and
#: weight_tiles, program_words (ISA 3: the weight and program memories); RESULT beats start
#: with a flags byte and go narrow (a byte a lane) when every lane fits 8 bits. 5: and window
#: (ISA 4: the window walk).
PROTOCOL_VERSION = 5

#: The link's bit rate unless told otherwise: what the iCEBreaker's FT2232H and the ULX3S's
#: FT231X carry (a slower link would make the link, not the array, the whole story).
DEFAULT_BAUD = 3_000_000
#: The largest request payload a board accepts unless told otherwise (its request buffer).
DEFAULT_MAX_PAYLOAD = 1024

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

#: The frame CRC, CRC-16/CCITT-FALSE: polynomial, initial value, and the CRC of b"123456789".
CRC_POLY = 0x1021
CRC_INIT = 0xFFFF
CRC_CHECK = 0x29B1


def crc16(data: bytes, crc: int = CRC_INIT) -> int:
    """CRC-16/CCITT-FALSE of ``data``, continuing from ``crc`` if given (``binascii.crc_hqx``,
    which is this CRC with the initial value given)."""
    return binascii.crc_hqx(data, crc)


class FrameType(enum.IntEnum):
    """Frame types. Requests go host -> board, replies (``REPLY_BIT`` set) board -> host."""

    PING = 0x01        # request: any payload; the reply echoes it (PING_REPLY)
    ID = 0x02          # request: payload ignored; the reply carries ``decode_id``'s fields
    PROGRAM = 0x10     # request: instruction words and host-in data for the accelerator core
    CONTROL = 0x11     # request: reset the core, clear its error / counters (the bridge)
    PING_REPLY = 0x81
    ID_REPLY = 0x82
    RESULT = 0x90      # reply to PROGRAM: the core's host-out data
    CONTROL_REPLY = 0x91  # reply to CONTROL: the core's status
    ERROR = 0xFF       # reply to any request that failed: [ErrorCode, offending type, ...]


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


# --- The ID reply -----------------------------------------------------------------------------

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

#: (name, bytes) of the board part of the ID payload; little endian. ``isa_version`` is
#: ``hdl.isa.ISA_VERSION``; every other name is a ``Config`` field, all of them (the encoder
#: refuses a Config with a field missing here), the string fields as codes (below).
BOARD_ID_FIELDS = (
    ("isa_version", 1),
    ("rows", 2),
    ("cols", 2),
    ("operand", 1),
    ("acc_width", 1),
    ("weight_fifo_depth", 1),
    ("ub_rows", 4),
    ("acc_rows", 4),
    ("act_lanes", 2),
    ("act_mult", 1),
    ("counter_width", 1),
    ("cell_pipeline", 1),
    ("quant_sets", 1),
    ("weight_tiles", 2),
    ("program_words", 2),
    ("window", 1),
)

#: The wire codes of ``Config.operand`` and ``Config.act_mult`` (fixed: a code never changes
#: meaning; a new choice gets a new code, and a choice without one cannot be put on the wire).
OPERAND_CODES = {"int8": 0, "int4": 1, "bf16": 2, "fp8_e4m3": 3, "fp8_e5m2": 4}
ACT_MULT_CODES = {"parallel": 0, "serial": 1}
_CODES = {"operand": OPERAND_CODES, "act_mult": ACT_MULT_CODES}

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
    """The board part of the ID payload from the ``BOARD_ID_FIELDS`` given by name, as wire
    values (codes for ``operand`` and ``act_mult``)."""
    return _pack(BOARD_ID_FIELDS, _BOARD_STRUCT, fields, "board ID")


def board_id_from_config(config: Config) -> bytes:
    """The board part of the ID payload of an accelerator built from ``config``: the hardware
    it has (``config.resolved()``: ``act_lanes`` as the lanes built); ``config_from_board_id``
    gives that back. Raises ``ValueError`` for a ``Config`` field the ID has no place for, or a
    choice without a wire code."""
    config = check_config(config).resolved()
    values = {"isa_version": isa.ISA_VERSION}
    for f in dataclasses.fields(Config):
        v = getattr(config, f.name)
        if f.name in _CODES:
            if v not in _CODES[f.name]:
                raise ValueError(f"{f.name} {v!r} has no wire code in the board ID")
            v = _CODES[f.name][v]
        values[f.name] = v
    return encode_board_id(**values)


def config_from_board_id(info: dict) -> Config:
    """The ``Config`` of the accelerator an ID describes (``decode_id``'s dict), resolved (see
    ``board_id_from_config``; compare with ``Config.same_hardware``). Raises ``ValueError``
    when the ID has no board part."""
    if not isinstance(info, dict):
        raise TypeError(f"info must be a dict from decode_id, not {info!r}")
    if "rows" not in info:
        raise ValueError("the board's ID has no accelerator part (is it a tpugen board of "
                         f"protocol version {PROTOCOL_VERSION}?)")
    return Config(**{f.name: info[f.name] for f in dataclasses.fields(Config)})


def _name_of(field: str, code: int) -> str:
    for name, c in _CODES[field].items():
        if c == code:
            return name
    raise ValueError(f"the board's {field} code {code} is not known to this host")


def decode_id(payload: bytes) -> dict:
    """Parse an ID reply's payload into a dict of the link fields and, when present and of this
    ``PROTOCOL_VERSION``, the board fields (``operand`` and ``act_mult`` as names, the values
    of a ``Config``: ``config_from_board_id`` makes one). ``"extra"`` holds the bytes after the
    known fields (the whole board part when the board speaks another protocol version), when
    there are any. Raises ``ValueError`` when the payload is not an ID payload, or names an
    operand type or multiplier kind this host does not know.
    """
    payload = bytes(payload)
    n = LINK_ID_SIZE
    if len(payload) < n or not payload.startswith(ID_MAGIC):
        raise ValueError(f"not an ID payload (need {ID_MAGIC!r} and {n} bytes): {payload!r}")
    out = dict(zip([name for name, _ in LINK_ID_FIELDS],
                   _LINK_STRUCT.unpack_from(payload, len(ID_MAGIC)), strict=True))
    rest = payload[n:]
    if out["protocol_version"] == PROTOCOL_VERSION and len(rest) >= _BOARD_STRUCT.size:
        board = dict(zip([name for name, _ in BOARD_ID_FIELDS], _BOARD_STRUCT.unpack_from(rest),
                         strict=True))
        for field in _CODES:
            board[field] = _name_of(field, board[field])
        out.update(board)
        rest = rest[_BOARD_STRUCT.size:]
    if rest:
        out["extra"] = rest
    return out


# --- The core bridge (``fpga.gateware.bridge``): PROGRAM, CONTROL and their replies ------------
#
# PROGRAM payload: a sequence of records, each a record byte and a fixed number of bytes.
#
#   record          bytes                    effect
#   REC_WORD  0x01  1 + 8                    one 64-bit instruction word (little endian) -> cmd
#   REC_BEAT  0x02  1 + max(R, C) * OB       one host-in beat, last = 0                  -> host_in
#   REC_LAST  0x03  1 + max(R, C) * OB       one host-in beat, last = 1                  -> host_in
#   REC_PBEAT 0x04  1 + ceil(max(R, C) / 2)  int4 configs: one packed beat, last = 0     -> host_in
#   REC_PLAST 0x05  1 + ceil(max(R, C) / 2)  int4 configs: one packed beat, last = 1     -> host_in
#
# OB = host_lane_width / 8 bytes per lane (``operand_bytes``; ``hdl.layouts.host_lane_width``),
# little endian two's complement (1 for int8, int4 and fp8, 2 for bf16); lane k of the beat is
# bytes 1 + k*OB .. of the record. A packed record (int4 configs only; elsewhere BAD_RECORD)
# carries two lanes a byte, lane 2i in the low nibble of byte 1 + i and lane 2i + 1 in its high
# nibble, each sign-extended into its 8-bit lane: the host sends a beat packed when every lane
# is an int4 value (operand data), and byte-wide otherwise (READ_QUANT's bytes). The bridge
# pushes each record as soon as it has read it, in order, so each instruction word must be
# followed by exactly the host-in beats the core consumes for it (``fpga.host.frame_plan``
# attaches them using the golden model). A program may span many frames; a frame may end inside an
# instruction's data (the rest follows in the next frame). A record byte other than these
# (BAD_RECORD), or a frame ending inside a record (TRUNCATED_RECORD), stops the frame there: that
# record and the rest of the frame are ignored, the records before it have been executed. A
# record the core can never take (a host-in beat while the core is idle, or an instruction word
# while the core waits for host-in data that the frame holds behind it) stops the frame likewise
# (NOT_TAKEN). In those cases the reply is ERROR ``[code, 0x10, offset low, offset high]``
# (offset: of the record's first byte in the payload) and the frame's host-out beats are dropped.
#
# RESULT payload (after the frame's records have been pushed, the bridge waits until the core
# is idle, or until it waits for host-in data that the frame did not bring: flag WAITING; every
# host-out beat that arrived until then is in the reply):
#
#   offset  size           field
#   0       1              flags      RESULT_OVERFLOW, RESULT_WAITING, RESULT_BUSY, RESULT_ERROR
#   1       1              cause      the core's sticky error cause (``hdl.isa.Cause``), 0 none
#   2       2              beats      host-out beats in this reply
#   4       2              dropped    host-out beats dropped because the reply was full
#                                     (saturates)
#   6       8*N_COUNTERS   counters   the 64-bit counters (``hdl.isa.Counter`` order), taken
#                                     when the reply was made
#   RESULT_HEADER_SIZE ... beats      each a flags byte (bit 0 ``BEAT_LAST``: the beat's
#                                     ``last``; bit 1 ``BEAT_NARROW``), then C lanes of OA =
#                                     ceil(acc_width / 8) bytes (little endian, the lane's
#                                     signed value sign-extended to OA bytes), or, NARROW (the
#                                     board sends a beat so when every lane's value fits 8
#                                     bits: int8 results), C lanes of one byte
#
# Beats that do not fit the reply (more than ``reply_capacity``) are drained from the core and
# dropped (counted in ``dropped``, flag RESULT_OVERFLOW): the host must split programs so that
# this never happens. With RESULT_WAITING, instructions before the waiting one may still send
# host-out beats: they come in the next frame's reply.
#
# CONTROL payload: one byte of CTRL_* bits (others must be 0). Reset (a one-clock core reset:
# engines, counters and the error return to idle; the buffers keep their contents) comes
# first, then the clears. The CONTROL_REPLY payload is the RESULT header (beats 0) taken
# afterwards. A payload that is not one byte of known bits gets ERROR
# ``[BAD_CONTROL, 0x11, 0, 0]`` and does nothing.

#: PROGRAM record bytes.
REC_WORD = 0x01
REC_BEAT = 0x02
REC_LAST = 0x03
REC_PBEAT = 0x04
REC_PLAST = 0x05
#: Bytes of an instruction-word record.
REC_WORD_SIZE = 9
#: A RESULT beat's flags byte.
BEAT_LAST = 0x01
BEAT_NARROW = 0x02

#: RESULT / CONTROL_REPLY header: flags, cause, beats, dropped, then the ``hdl.isa.Counter``s.
_RESULT_FIELDS_FORMAT = "<BBHH"
#: Offset of the first counter in the RESULT header.
RESULT_COUNTERS_OFFSET = struct.calcsize(_RESULT_FIELDS_FORMAT)
RESULT_HEADER_FORMAT = f"{_RESULT_FIELDS_FORMAT}{isa.N_COUNTERS}Q"
RESULT_HEADER_SIZE = struct.calcsize(RESULT_HEADER_FORMAT)
#: RESULT flag bits.
RESULT_OVERFLOW = 0x01  # beats were dropped: the reply was full
RESULT_WAITING = 0x02   # the core waits for host-in data the frame did not bring
RESULT_BUSY = 0x04      # the core was busy when the reply was made
RESULT_ERROR = 0x08     # the core's sticky error is set (``cause``)

#: CONTROL payload bits.
CTRL_CLEAR_ERROR = 0x01
CTRL_CLEAR_COUNTERS = 0x02
CTRL_RESET = 0x04


class BridgeError(enum.IntEnum):
    """The bridge's ERROR codes (the inside range from ``ErrorCode.INSIDE``)."""

    BAD_RECORD = 0x40        # an unknown record byte
    TRUNCATED_RECORD = 0x41  # the frame ended inside a record
    NOT_TAKEN = 0x42         # the core could never take the record (see above)
    BAD_CONTROL = 0x43       # a CONTROL payload that is not one byte of known bits


BRIDGE_REASONS = {
    BridgeError.BAD_RECORD: "unknown PROGRAM record byte",
    BridgeError.TRUNCATED_RECORD: "PROGRAM frame ended inside a record",
    BridgeError.NOT_TAKEN: "the core could never take a PROGRAM record (host-in data not "
                           "attached to the instruction that consumes it)",
    BridgeError.BAD_CONTROL: "CONTROL payload is not one byte of known bits",
}


def _check_config(config) -> Config:
    check_config(config)
    return config


def operand_bytes(config: Config) -> int:
    """Bytes of one host-in lane in a beat record: ``host_lane_width / 8``."""
    return host_lane_width(_check_config(config)) // 8


def acc_bytes(config: Config) -> int:
    """Bytes of one host-out lane in a RESULT beat: ceil(acc_width / 8)."""
    return -(-_check_config(config).acc_width // 8)


def packs_int4(config: Config) -> bool:
    """Whether the link takes packed beat records (REC_PBEAT / REC_PLAST): int4 configs."""
    return _check_config(config).operand_width == 4


def packed_beat_record_size(config: Config) -> int:
    """Bytes of a REC_PBEAT / REC_PLAST record: the record byte and ceil(max(R, C) / 2)."""
    return 1 + (host_lanes(_check_config(config)) + 1) // 2


def beat_record_size(config: Config) -> int:
    """Bytes of a REC_BEAT / REC_LAST record: the record byte and max(R, C) lanes."""
    return 1 + host_lanes(config) * operand_bytes(config)


def result_beat_size(config: Config) -> int:
    """Bytes of one host-out beat in a RESULT payload at most (a wide one): the flags byte and
    C lanes of ``acc_bytes``."""
    return config.cols * acc_bytes(config) + 1


def narrow_beat_size(config: Config) -> int:
    """Bytes of a NARROW RESULT beat: the flags byte and C one-byte lanes."""
    return config.cols + 1


def reply_capacity(config: Config, max_reply: int) -> int:
    """Host-out beats a RESULT reply of at most ``max_reply`` bytes holds."""
    return (max_reply - RESULT_HEADER_SIZE) // result_beat_size(config)


def default_max_reply(config: Config, max_payload: int) -> int:
    """A board's reply buffer unless told otherwise: ``max_payload``, but at least a RESULT
    with one whole READ_COUNTERS (``hdl.isa.COUNTER_BEATS`` beats: the longest instruction
    output, and one the host cannot split) and at least the ID reply."""
    return max(max_payload,
               RESULT_HEADER_SIZE + isa.COUNTER_BEATS * result_beat_size(config),
               LINK_ID_SIZE + BOARD_ID_SIZE)


__all__ += [
    "REC_WORD", "REC_BEAT", "REC_LAST", "REC_PBEAT", "REC_PLAST", "REC_WORD_SIZE",
    "BEAT_LAST", "BEAT_NARROW", "narrow_beat_size",
    "RESULT_COUNTERS_OFFSET",
    "RESULT_HEADER_FORMAT", "RESULT_HEADER_SIZE", "RESULT_OVERFLOW", "RESULT_WAITING",
    "RESULT_BUSY", "RESULT_ERROR", "CTRL_CLEAR_ERROR", "CTRL_CLEAR_COUNTERS", "CTRL_RESET",
    "BridgeError", "BRIDGE_REASONS", "operand_bytes", "acc_bytes", "beat_record_size",
    "packed_beat_record_size", "packs_int4",
    "result_beat_size", "reply_capacity", "default_max_reply",
]
