"""The host side of the link: frame encoding, a streaming frame parser, and ``Link`` (pyserial).

The one module every host-side caller uses::

    from tpugen.fpga.host.serial_link import Link
    with Link("/dev/ttyUSB1") as link:      # protocol.DEFAULT_BAUD
        link.ping()
        info = link.identify()          # {"rows": 8, "cols": 8, "max_payload": 1024, ...}
        rtype, payload = link.request(FrameType.PROGRAM, words_and_data)

``Link`` sends one request frame and waits for its one reply (the board answers every frame
exactly once, and a host that waits for each reply can never overrun the board).

Resynchronisation: a host killed mid-frame leaves the board collecting a frame that never
ends, and replies that nobody read. Before its first request (and after a request failed
with a timeout or a garbled reply), ``Link`` resynchronises (``resync``): it sends PINGs
carrying a fresh nonce and discards everything until the board echoes the latest one; a
PING swallowed by a stale partial frame comes back as the board's ERROR reply (after its idle
timeout), and the next PING, sent once the line is quiet, gets through. A request the board
answers with a link-level ERROR (bad CRC, cut short, framing, overrun: the board did not act
on it) is resent once after resynchronising.
"""

from __future__ import annotations

import os
import struct
import time
from typing import NamedTuple

import serial

from tpugen.fpga.protocol import (
    CRC_SIZE,
    DEFAULT_BAUD,
    HEADER_SIZE,
    MAX_LENGTH,
    REPLY_BIT,
    SYNC,
    ErrorCode,
    FrameType,
    crc16,
    decode_id,
    error_reason,
)

__all__ = ["Frame", "encode_frame", "FrameParser", "LinkError", "LinkTimeout", "RemoteError",
           "LINK_LEVEL_ERRORS", "Link"]


class Frame(NamedTuple):
    """A received frame; ``crc_ok`` is False for one whose CRC did not match."""

    type: int
    payload: bytes
    crc_ok: bool = True


def _check_type(type) -> int:
    if not isinstance(type, int) or isinstance(type, bool) or not 0 <= type <= 0xFF:
        raise ValueError(f"type must be a frame type 0..255, not {type!r}")
    return int(type)


def encode_frame(type: int, payload: bytes = b"") -> bytes:
    """The bytes of a frame: SYNC, type, length (LE), payload, CRC-16 (BE) over type..payload."""
    type = _check_type(type)
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise TypeError(f"payload must be bytes, not {payload!r}")
    payload = bytes(payload)
    if len(payload) > MAX_LENGTH:
        raise ValueError(f"payload must be at most {MAX_LENGTH} bytes, not {len(payload)}")
    body = struct.pack("<BH", type, len(payload)) + payload
    return SYNC + body + crc16(body).to_bytes(CRC_SIZE, "big")


class FrameParser:
    """Turn a byte stream into frames: ``feed(data)`` returns the frames ``data`` completed.

    Bytes outside frames are skipped (counted in ``skipped``). A frame whose CRC does not match
    is returned with ``crc_ok=False`` (and counted in ``bad_crc``) and skipped as a whole; a
    header whose length is above ``max_payload`` is taken as a false SYNC (counted in
    ``bad_length``) and the search goes on from the byte after it.
    """

    def __init__(self, max_payload: int = MAX_LENGTH):
        if (not isinstance(max_payload, int) or isinstance(max_payload, bool)
                or not 0 <= max_payload <= MAX_LENGTH):
            raise ValueError(f"max_payload must be in 0..{MAX_LENGTH}, not {max_payload!r}")
        self.max_payload = max_payload
        self.reset()

    def reset(self):
        """Forget buffered bytes and counts."""
        self._buf = bytearray()
        self.skipped = 0
        self.bad_crc = 0
        self.bad_length = 0

    @property
    def pending(self) -> int:
        """Bytes buffered towards a frame not yet complete."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames = []
        buf = self._buf
        while True:
            start = buf.find(SYNC)
            if start < 0:
                # Keep a trailing partial SYNC.
                keep = 1 if buf[-1:] == SYNC[:1] else 0
                self.skipped += len(buf) - keep
                del buf[:len(buf) - keep]
                break
            self.skipped += start
            del buf[:start]
            if len(buf) < HEADER_SIZE:
                break
            ftype, length = struct.unpack_from("<BH", buf, len(SYNC))
            if length > self.max_payload:
                self.bad_length += 1
                self.skipped += 1
                del buf[:1]
                continue
            end = HEADER_SIZE + length + CRC_SIZE
            if len(buf) < end:
                break
            ok = crc16(buf[len(SYNC):end]) == 0
            if not ok:
                self.bad_crc += 1
            frames.append(Frame(ftype, bytes(buf[HEADER_SIZE:HEADER_SIZE + length]), ok))
            del buf[:end]
        return frames


class LinkError(Exception):
    """The link failed: a corrupt or unexpected reply."""


class LinkTimeout(LinkError):
    """No reply within the timeout."""


class RemoteError(LinkError):
    """The board answered with an ERROR frame.

    ``code`` is its ``ErrorCode`` (or an inside code >= ``ErrorCode.INSIDE``), ``reason`` the
    text for it, ``frame_type`` the type of the offending frame as the board received it (0 when
    it did not get that far), ``detail`` any further payload bytes.
    """

    def __init__(self, code: int, frame_type: int = 0, detail: bytes = b""):
        self.code = code
        self.frame_type = frame_type
        self.detail = detail
        self.reason = error_reason(code)
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"{code:#04x}"
        super().__init__(f"board replied ERROR {name}: {self.reason} "
                         f"(frame type {frame_type:#04x})")


#: ERROR codes that mean the board dropped the frame without acting on it, because of the
#: transport (not its content): a request answered so may be sent again.
LINK_LEVEL_ERRORS = frozenset({ErrorCode.BAD_CRC, ErrorCode.TIMEOUT, ErrorCode.FRAMING,
                               ErrorCode.OVERRUN})


class Link:
    """A request/reply link to a board over a serial port (pyserial).

    ``port`` is a pyserial URL or device path (``"/dev/ttyUSB1"``, a pty path, ``"loop://"``),
    opened with ``serial.serial_for_url``, or an already open serial-like object (with
    ``read``, ``write``, ``in_waiting``, ``reset_input_buffer`` and a settable ``timeout``).
    ``timeout`` is the seconds to wait for a reply. ``max_payload``, if given (``identify``
    fills it in from the board), makes ``request`` refuse larger payloads before sending.
    ``resync``: resynchronise before the first request (see the module docstring; ``synced``
    says whether the link is in step with the board).
    """

    #: Seconds each read waits at most, so that the reply timeout is checked often.
    POLL = 0.02
    #: Seconds the line must stay quiet after an ERROR before ``resync`` sends its next PING
    #: (longer than a board's idle timeout: 10 ms by default, ``fpga.gateware.link_endpoint``).
    QUIET = 0.1
    #: PINGs ``resync`` sends at most.
    RESYNC_PINGS = 4

    def __init__(self, port, baud: int = DEFAULT_BAUD, timeout: float = 1.0, *,
                 max_payload: int | None = None, resync: bool = True):
        if isinstance(baud, bool) or not isinstance(baud, int | float) or not baud > 0:
            raise ValueError(f"baud must be a positive number, not {baud!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if max_payload is not None and (not isinstance(max_payload, int)
                                        or not 0 <= max_payload <= MAX_LENGTH):
            raise ValueError(f"max_payload must be in 0..{MAX_LENGTH}, not {max_payload!r}")
        self.timeout = float(timeout)
        self.max_payload = max_payload
        self.info: dict | None = None
        self.synced = not resync
        if isinstance(port, str):
            self._port = serial.serial_for_url(port, baudrate=baud, timeout=self.POLL)
            self._owned = True
        elif hasattr(port, "read") and hasattr(port, "write"):
            self._port = port
            self._port.timeout = self.POLL
            self._owned = False
        else:
            raise TypeError(f"port must be a pyserial URL/path or a serial port, not {port!r}")
        self._parser = FrameParser()

    def close(self):
        if self._owned:
            self._port.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, frame: bytes) -> None:
        self._port.reset_input_buffer()      # a late reply to an earlier, timed-out request
        self._parser.reset()
        self._port.write(frame)
        if hasattr(self._port, "flush"):
            self._port.flush()

    def _read(self) -> bytes:
        return self._port.read(max(1, self._port.in_waiting))

    def resync(self) -> None:
        """Bring the link in step with the board (see the module docstring): PING with a fresh
        nonce until the board echoes the latest one, discarding every other frame; after an
        ERROR, the next PING goes once the line has been quiet for ``QUIET`` seconds. Raises
        ``LinkTimeout`` when the board does not echo within ``timeout``, the last
        ``RemoteError`` after ``RESYNC_PINGS`` ERROR replies, and ``LinkError`` when the far
        end sends requests (an echo, not a board)."""
        deadline = time.monotonic() + self.timeout
        nonce, pings, quiet_until, last_error = b"", 0, 0.0, None
        while True:
            now = time.monotonic()
            if quiet_until is not None and now >= quiet_until:
                if pings == self.RESYNC_PINGS:
                    raise last_error
                nonce = b"sync" + os.urandom(4)
                self._send(encode_frame(FrameType.PING, nonce))
                pings, quiet_until = pings + 1, None
            elif now > deadline:
                raise LinkTimeout(f"no reply to frame type {FrameType.PING:#04x} within "
                                  f"{self.timeout:g} s (resynchronising with {pings} PINGs)")
            chunk = self._read()
            if not chunk:
                continue
            for f in self._parser.feed(chunk):
                if not f.crc_ok:
                    continue
                if f.type == FrameType.PING_REPLY and f.payload == nonce:
                    self.synced = True
                    return
                if not f.type & REPLY_BIT:
                    raise LinkError(f"the reply to frame type {FrameType.PING:#04x} has type "
                                    f"{f.type:#04x}, not {FrameType.PING_REPLY:#04x} (the far "
                                    f"end sends requests: an echo, not a board)")
                if f.type == FrameType.ERROR:
                    p = f.payload
                    last_error = RemoteError(p[0] if p else 0, p[1] if len(p) > 1 else 0,
                                             p[2:])
                    quiet_until = now + self.QUIET
            if quiet_until is not None:
                quiet_until = max(quiet_until, now + self.QUIET)   # bytes still coming

    def request(self, type: int, payload: bytes = b"") -> tuple[int, bytes]:
        """Send one request frame and return its reply's ``(type, payload)``.

        Resynchronises first when the link is not in step (``resync``); resends the request
        once after a link-level ERROR reply (``LINK_LEVEL_ERRORS``). Raises ``ValueError`` for
        a payload above ``max_payload``, ``LinkTimeout`` when no reply comes within
        ``timeout``, ``RemoteError`` for an ERROR reply and ``LinkError`` for a reply with a
        bad CRC or a type other than ``type | REPLY_BIT``.
        """
        frame = encode_frame(type, payload)
        if self.max_payload is not None and len(payload) > self.max_payload:
            raise ValueError(f"payload must be at most the board's {self.max_payload} bytes, "
                             f"not {len(payload)}")
        for attempt in (1, 2):
            if not self.synced:
                self.resync()
            try:
                return self._exchange(type, frame)
            except RemoteError as e:
                if e.code in LINK_LEVEL_ERRORS and e.frame_type == type:
                    self.synced = False
                    if attempt == 1:
                        continue
                raise
            except LinkError:
                self.synced = False
                raise
        raise AssertionError("unreachable")

    def _exchange(self, type: int, frame: bytes) -> tuple[int, bytes]:
        self._send(frame)
        deadline = time.monotonic() + self.timeout
        while True:
            chunk = self._read()
            frames = self._parser.feed(chunk) if chunk else []
            if frames:
                reply = frames[0]
                break
            if time.monotonic() > deadline:
                raise LinkTimeout(
                    f"no reply to frame type {type:#04x} within {self.timeout:g} s "
                    f"({self._parser.pending} bytes of a partial reply, "
                    f"{self._parser.skipped} stray bytes)")
        if not reply.crc_ok:
            raise LinkError(f"the reply to frame type {type:#04x} has a bad CRC")
        if reply.type == FrameType.ERROR:
            p = reply.payload
            raise RemoteError(p[0] if p else 0, p[1] if len(p) > 1 else 0, p[2:])
        if reply.type != type | REPLY_BIT:
            raise LinkError(f"the reply to frame type {type:#04x} has type {reply.type:#04x}, "
                            f"not {type | REPLY_BIT:#04x}")
        return reply.type, reply.payload

    def ping(self, payload: bytes = b"tpugen") -> float:
        """Send a PING and check the echo; returns the round-trip time in seconds."""
        t = time.monotonic()
        _, echo = self.request(FrameType.PING, payload)
        if echo != bytes(payload):
            raise LinkError(f"PING echo differs: sent {bytes(payload)!r}, got {echo!r}")
        return time.monotonic() - t

    def identify(self) -> dict:
        """Ask for the board's ID and parse it (``protocol.decode_id``); sets ``max_payload``."""
        _, payload = self.request(FrameType.ID)
        try:
            self.info = decode_id(payload)
        except ValueError as e:
            raise LinkError(f"bad ID reply: {e}") from None
        self.max_payload = self.info["max_payload"]
        return self.info
