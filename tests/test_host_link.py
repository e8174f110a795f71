# amaranth: UnusedElaboratable=no
"""Host side: frame encoding and parsing, the ID layout, and ``Link`` over ``loop://``, over a
pty to a Python fake board, and over a pty to the simulated gateware."""

import asyncio
import dataclasses
import json
import random
import struct
import subprocess
import sys
import threading
import time

import pytest
import serial

from tpugen.fpga.host.serial_link import (
    Frame,
    FrameParser,
    Link,
    LinkError,
    LinkTimeout,
    RemoteError,
    encode_frame,
)
from tpugen.fpga.protocol import (
    ACT_MULT_CODES,
    BOARD_ID_FIELDS,
    BOARD_ID_SIZE,
    LINK_ID_SIZE,
    OPERAND_CODES,
    PROTOCOL_VERSION,
    SYNC,
    ErrorCode,
    FrameType,
    board_id_from_config,
    config_from_board_id,
    crc16,
    decode_id,
    encode_board_id,
    encode_link_id,
    error_reason,
    reply_type,
)
from tpugen.hdl import isa
from tpugen.hdl.config import ACT_MULTS, OPERAND_TYPES, Config
from tpugen.tb.linksim import SimulatedEndpoint
from tpugen.tb.ptyserver import PtyServer

# --- encoding and parsing ---------------------------------------------------------------------


def test_encode_frame_bytes():
    # The exact bytes the gateware sends for a PING_REPLY of b"abc" (see test_framing).
    assert encode_frame(0x81, b"abc") == bytes.fromhex("a55a810300616263ec94")
    frame = encode_frame(FrameType.PROGRAM, bytes(300))
    assert frame[:5] == SYNC + bytes([0x10]) + struct.pack("<H", 300)
    assert crc16(frame[2:]) == 0
    assert len(encode_frame(FrameType.PING)) == 7


@pytest.mark.parametrize("args, exc", [
    ((256, b""), ValueError), ((-1, b""), ValueError), ((True, b""), ValueError),
    ((1, "text"), TypeError), ((1, bytes(65536)), ValueError),
])
def test_encode_frame_validation(args, exc):
    with pytest.raises(exc, match="type|payload"):
        encode_frame(*args)


def test_parser_round_trip_in_random_chunks():
    rng = random.Random(4)
    frames = [(rng.randrange(256), bytes(rng.randrange(256) for _ in range(rng.randrange(80))))
              for _ in range(40)]
    frames += [(1, b""), (2, SYNC * 4), (3, b"\xa5")]
    stream = bytearray()
    for t, p in frames:
        stream += bytes(rng.randrange(256) for _ in range(rng.randrange(3)))  # noise between
        stream += encode_frame(t, p)
    for chunking in ("bytes", "random", "whole"):
        parser = FrameParser()
        got, i = [], 0
        while i < len(stream):
            n = {"bytes": 1, "random": rng.randrange(1, 50), "whole": len(stream)}[chunking]
            got += parser.feed(bytes(stream[i:i + n]))
            i += n
        # Noise may occasionally look like a frame start; every real frame must come through
        # intact and in order, and nothing the parser calls good can be noise (CRC).
        good = [(f.type, f.payload) for f in got if f.crc_ok]
        assert good == frames, chunking
        assert parser.pending == 0


def test_parser_reports_bad_crc_and_resyncs():
    a, b = encode_frame(1, b"hello"), encode_frame(2, b"world")
    bad = bytearray(a)
    bad[6] ^= 1
    parser = FrameParser()
    assert parser.feed(bytes(bad) + b) == [Frame(1, b"hdllo", False), Frame(2, b"world")]
    assert parser.bad_crc == 1
    # A false SYNC with a length above the limit is skipped, the frame behind it found.
    parser = FrameParser(max_payload=16)
    got = parser.feed(SYNC + b"\x01\xff\x00" + a)
    assert got == [Frame(1, b"hello")]
    assert parser.bad_length == 1
    # Stray bytes are counted; a SYNC split over two feeds is kept.
    parser = FrameParser()
    assert parser.feed(b"xyz" + a[:1]) == []
    assert parser.feed(a[1:]) == [Frame(1, b"hello")]
    assert parser.skipped == 3


# --- the ID layout and error codes ------------------------------------------------------------


def test_id_round_trip():
    link = encode_link_id(max_payload=1024, max_reply=4096, clk_freq=12_000_000, baud=3_000_000)
    assert len(link) == LINK_ID_SIZE
    cfg = Config(rows=4, cols=6, ub_rows=65536)
    board = board_id_from_config(cfg)
    assert len(board) == BOARD_ID_SIZE
    info = decode_id(link + board + b"\x99")
    assert info["protocol_version"] == PROTOCOL_VERSION
    assert (info["max_payload"], info["max_reply"]) == (1024, 4096)
    assert (info["clk_freq"], info["baud"]) == (12_000_000, 3_000_000)
    assert (info["rows"], info["cols"], info["operand"], info["acc_width"]) == (4, 6, "int8", 32)
    assert (info["ub_rows"], info["acc_rows"], info["act_lanes"]) == (65536, 512, 6)
    assert info["isa_version"] == isa.ISA_VERSION
    assert info["extra"] == b"\x99"
    assert config_from_board_id(info) == cfg.resolved()
    assert "rows" not in decode_id(link)            # a board part is optional
    with pytest.raises(ValueError, match="no accelerator part"):
        config_from_board_id(decode_id(link))
    # A board of another protocol version: its board part is not parsed (it is "extra").
    other = encode_link_id(max_payload=1024, max_reply=4096, clk_freq=1, baud=1,
                           protocol_version=PROTOCOL_VERSION - 1)
    info = decode_id(other + board)
    assert "rows" not in info and info["extra"] == board
    with pytest.raises(ValueError, match="ID payload"):
        decode_id(b"TPUX" + link[4:])
    wire = dict.fromkeys([name for name, _ in BOARD_ID_FIELDS], 1)
    with pytest.raises(ValueError, match="rows"):
        encode_board_id(**{**wire, "rows": 70000})
    with pytest.raises(ValueError, match="missing"):
        encode_board_id(rows=1)
    with pytest.raises(ValueError, match="operand code 9 is not known"):
        decode_id(link + encode_board_id(**{**wire, "operand": 9}))
    with pytest.raises(TypeError, match="config must be a Config"):
        board_id_from_config({"rows": 4})


#: A value other than the default for every ``Config`` field: a field added to ``Config``
#: fails ``test_board_id_carries_every_config_field`` until it is added here and to the board ID.
_NOT_DEFAULT = {"rows": 3, "cols": 12, "operand": "int4", "acc_width": 18,
                "weight_fifo_depth": 7, "ub_rows": 65536, "acc_rows": 300, "act_lanes": 2,
                "act_mult": "serial", "counter_width": 40, "cell_pipeline": 2, "quant_sets": 11,
                "weight_tiles": 65535, "program_words": 4096, "window": 1}


def test_board_id_carries_every_config_field():
    """The one Config <-> board-ID mapping covers every Config field (each changed on its own
    from the default survives the round trip) and every choice of the string fields."""
    fields = [f.name for f in dataclasses.fields(Config)]
    assert sorted(_NOT_DEFAULT) == sorted(fields), "a Config field is missing from the test"
    assert sorted(name for name, _ in BOARD_ID_FIELDS) == sorted(fields + ["isa_version"])
    link = encode_link_id(max_payload=64, max_reply=64, clk_freq=1, baud=1)

    def round_trip(cfg):
        return config_from_board_id(decode_id(link + board_id_from_config(cfg)))

    base = Config()
    for name in fields:
        cfg = base.replace(**{name: _NOT_DEFAULT[name]})
        assert cfg != base, name
        assert round_trip(cfg) == cfg.resolved(), name
    for operand in OPERAND_TYPES:
        assert round_trip(base.replace(operand=operand)).operand == operand
    for mult in ACT_MULTS:
        assert round_trip(base.replace(act_mult=mult)).act_mult == mult
    assert sorted(OPERAND_CODES) == sorted(OPERAND_TYPES)
    assert sorted(ACT_MULT_CODES) == sorted(ACT_MULTS)


def test_error_reasons():
    assert "CRC" in error_reason(ErrorCode.BAD_CRC)
    assert "core" in error_reason(0x41)
    assert "unknown" in error_reason(0x20)
    assert reply_type(FrameType.PING) == FrameType.PING_REPLY
    assert reply_type(FrameType.PROGRAM) == FrameType.RESULT
    e = RemoteError(ErrorCode.UNKNOWN_TYPE, 0x33)
    assert "UNKNOWN_TYPE" in str(e) and "0x33" in str(e)


def test_host_side_imports_no_gateware():
    """The host side (``fpga.host``, the board backend) imports the wire format from
    ``fpga.protocol``, never the gateware or the build flow."""
    code = ("import json, sys, tpugen.backends.board; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('tpugen.'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                       text=True, check=True).stdout)
    assert "tpugen.fpga.host.board_link" in loaded and "tpugen.fpga.protocol" in loaded
    heavy = ("tpugen.fpga.gateware", "tpugen.fpga.flow", "tpugen.tb")
    assert [m for m in loaded if m.startswith(heavy)] == []


# --- Link -------------------------------------------------------------------------------------


def test_link_over_loop_detects_wrong_reply_type():
    """loop:// returns the request itself: a frame of the request's type, not a reply."""
    with Link("loop://", 115200, timeout=0.5) as link, pytest.raises(
            LinkError, match="has type 0x01, not 0x81"):
        link.ping()


def test_link_argument_validation():
    with pytest.raises(ValueError, match="baud"):
        Link("loop://", 0)
    with pytest.raises(ValueError, match="timeout"):
        Link("loop://", 115200, timeout=-1)
    with pytest.raises(TypeError, match="port"):
        Link(42)
    with Link("loop://", 115200, max_payload=4) as link, pytest.raises(
            ValueError, match="at most the board's 4 bytes"):
        link.request(FrameType.PROGRAM, b"12345")


class FakeBoard:
    """A tiny Python board behind a pty (``PtyServer``): answers like the gateware (PING, ID,
    PROGRAM; ERROR for bad CRC or unknown types), plus test hooks: type 0x20 is never answered,
    0x21 gets a reply with a bad CRC, 0x22 gets a late reply (after ``late`` s)."""

    ID = encode_link_id(max_payload=32, max_reply=64, clk_freq=12_000_000, baud=3_000_000)

    def __init__(self, late=0.0):
        self.pty = PtyServer()
        self.port = self.pty.port
        self.late = late
        self.requests = []
        self.late_sent = threading.Event()
        self.parser = FrameParser()
        self.output = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _reply(self, ftype, payload):
        self.output += encode_frame(ftype, payload)

    async def _receive(self, data):
        for f in self.parser.feed(data):
            self.requests.append(f)
            if not f.crc_ok:
                self._reply(FrameType.ERROR, bytes([ErrorCode.BAD_CRC, f.type]))
            elif f.type == FrameType.PING:
                self._reply(FrameType.PING_REPLY, f.payload)
            elif f.type == FrameType.ID:
                self._reply(FrameType.ID_REPLY, self.ID)
            elif f.type == FrameType.PROGRAM:
                self._reply(FrameType.RESULT, f.payload[::-1])
            elif f.type == 0x20:
                pass
            elif f.type == 0x21:
                frame = bytearray(encode_frame(0xA1, b"data"))
                frame[-1] ^= 0xFF
                self.output += frame
            elif f.type == 0x22:
                time.sleep(self.late)
                self._reply(0xA2, b"late")
                self.late_sent.set()
            else:
                self._reply(FrameType.ERROR, bytes([ErrorCode.UNKNOWN_TYPE, f.type, 7]))

    def _run(self):
        async def nothing():
            pass

        # No simulated time: every poll waits for the host in real time.
        asyncio.run(self.pty.pump(self._receive, nothing, self.output, self._stop.is_set,
                                  idle_polls=0, idle_wait=0.02))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.pty.close()


def test_link_with_fake_board():
    with FakeBoard(late=0.4) as board, Link(board.port, 115200, timeout=0.25) as link:
        assert link.ping(b"hello") < 0.25
        assert link.ping(b"") >= 0
        info = link.identify()
        assert info["max_payload"] == link.max_payload == 32
        assert link.request(FrameType.PROGRAM, b"\x01\x02\x03") == (FrameType.RESULT,
                                                                    b"\x03\x02\x01")
        with pytest.raises(ValueError, match="32 bytes"):
            link.request(FrameType.PROGRAM, bytes(33))
        with pytest.raises(RemoteError) as e:
            link.request(0x33, b"?")
        assert (e.value.code, e.value.frame_type, e.value.detail) == (
            ErrorCode.UNKNOWN_TYPE, 0x33, b"\x07")
        with pytest.raises(LinkTimeout, match="no reply to frame type 0x20"):
            link.request(0x20)
        with pytest.raises(LinkError, match="bad CRC"):
            link.request(0x21)
        # A reply that comes after the timeout must not be taken for the next request's.
        with pytest.raises(LinkTimeout):
            link.request(0x22)
        assert board.late_sent.wait(5)
        time.sleep(0.1)                               # let the pty deliver it
        assert link.ping(b"after") < 0.25
        # A PING with a nonce ("sync") resynchronises the link before the first request and
        # after each request that timed out or got a garbled reply.
        sent = ["sync" if f.type == 1 and f.payload.startswith(b"sync") else f.type
                for f in board.requests]
        assert sent == ["sync", 1, 1, 2, 0x10, 0x33, 0x20, "sync", 0x21, "sync", 0x22, "sync",
                        1]


def test_link_with_simulated_gateware():
    """The host ``Link`` against the real ``LinkEndpoint`` gateware, simulated behind a pty."""
    cfg = Config(rows=2, cols=2, weight_fifo_depth=1, ub_rows=16, acc_rows=16)
    with SimulatedEndpoint(max_payload=16, id_payload=board_id_from_config(cfg),
                           timeout_bits=40) as board, \
            Link(board.port, 115200, timeout=30) as link:
        link.ping(b"hi")
        info = link.identify()
        assert info["max_payload"] == 16 and config_from_board_id(info).same_hardware(cfg)
        assert info["baud"] == 1_000_000
        assert link.request(FrameType.PROGRAM, b"\x05\x06") == (FrameType.RESULT, b"\x05\x06")
        with pytest.raises(RemoteError) as e:
            link.request(0x33, b"")
        assert (e.value.code, e.value.frame_type) == (ErrorCode.UNKNOWN_TYPE, 0x33)
        link.max_payload = None                     # let a too-long frame through
        with pytest.raises(RemoteError) as e:
            link.request(FrameType.PING, bytes(17))
        assert e.value.code == ErrorCode.TOO_LONG
        link.ping(b"ok")
    assert [r[2] for r in board.inside.requests] == [b"\x05\x06"]


class CorruptFirstWrite:
    """A serial port whose first write has one payload bit flipped (line noise)."""

    def __init__(self, port):
        self.port, self.flipped = port, False

    def write(self, data):
        if not self.flipped and len(data) > 6:
            data = bytearray(data)
            data[5] ^= 0x10
            self.flipped = True
        return self.port.write(bytes(data))

    def __getattr__(self, name):
        return getattr(self.port, name)

    def __setattr__(self, name, value):
        if name == "timeout":
            self.port.timeout = value
        else:
            super().__setattr__(name, value)


def test_link_resends_a_request_the_board_dropped_for_its_crc():
    """A request the board answers with ERROR BAD_CRC (it did not act on it) is resent once,
    after resynchronising; an ERROR about the request's content is not."""
    with FakeBoard() as board:
        raw = serial.serial_for_url(board.port, timeout=0.02)
        try:
            port = CorruptFirstWrite(raw)
            link = Link(port, 115200, timeout=2)
            assert link.request(FrameType.PROGRAM, b"\x01\x02") == (FrameType.RESULT,
                                                                     b"\x02\x01")
            with pytest.raises(RemoteError, match="UNKNOWN_TYPE"):
                link.request(0x33)
        finally:
            raw.close()
    # The resync PING (corrupted: ERROR BAD_CRC, then a second PING), then the request.
    assert [(f.type, f.crc_ok) for f in board.requests] == [
        (1, False), (1, True), (0x10, True), (0x33, True)]


@pytest.mark.parametrize("resync", [False, True])
def test_link_resynchronises_after_a_half_sent_frame(resync):
    """A host killed mid-frame leaves the endpoint collecting a frame; the next host's first
    request then lands inside it. Without resynchronisation it fails (the endpoint's idle
    timeout ERROR for the stale frame); with it, it works (the endpoint gateware, simulated
    behind a pty)."""
    with SimulatedEndpoint(max_payload=16, timeout_bits=40) as board:
        raw = serial.serial_for_url(board.port, timeout=0.05)
        try:
            raw.write(encode_frame(FrameType.PING, bytes(12))[:9])   # 10 bytes short
            with Link(raw, 115200, timeout=30, resync=resync) as link:
                if not resync:
                    with pytest.raises(RemoteError, match="TIMEOUT|BAD_CRC"):
                        link.request(FrameType.PROGRAM, b"\x05")
                    return
                assert link.request(FrameType.PROGRAM, b"\x07") == (FrameType.RESULT,
                                                                    b"\x07")
        finally:
            raw.close()
    assert [r[2] for r in board.inside.requests] == [b"\x07"]


def test_pty_server():
    """Bytes cross the pty both ways (more than its buffer holds, too), and ``pump`` moves
    them: the host's to ``send``, the board's ``output`` to the host, until ``stop()``."""
    got = bytearray()
    with PtyServer() as pty:
        port = serial.serial_for_url(pty.port, timeout=2)
        try:
            assert pty.read() == b""
            port.write(b"abc")
            assert pty.read(timeout=2) == b"abc"
            big = bytes(range(256)) * 64
            writer = threading.Thread(target=pty.write, args=(big,))
            writer.start()
            assert port.read(len(big)) == big
            writer.join()
            output = bytearray()

            async def send(data):
                got.extend(data)
                output.extend(data.upper())

            async def wait():
                pass

            port.write(b"hello")
            asyncio.run(pty.pump(send, wait, output, lambda: output.startswith(b"HELLO"),
                                 idle_polls=0, idle_wait=0.01))
            assert bytes(got) == b"hello" and port.read(5) == b"HELLO"
        finally:
            port.close()
    assert pty.closed
