# amaranth: UnusedElaboratable=no
"""CRC (software vs gateware), frame transmitter, and the link endpoint at the UART bit level:
good frames of random payloads, and every error class answered by the right ERROR reply."""

import random

import pytest
from amaranth.sim import Simulator

from tpugen.fpga.gateware.crc import FRAME_CRC, SerialCRC16
from tpugen.fpga.gateware.framing import FrameReceiver, FrameTransmitter
from tpugen.fpga.gateware.link_endpoint import LinkEndpoint
from tpugen.fpga.host.serial_link import FrameParser, encode_frame
from tpugen.fpga.protocol import (
    CRC_CHECK,
    ID_MAGIC,
    PROTOCOL_VERSION,
    SYNC,
    ErrorCode,
    FrameType,
    board_id_from_config,
    config_from_board_id,
    crc16,
    decode_id,
)
from tpugen.hdl.config import Config
from tpugen.tb.linksim import HostSide, InsideStub

# --- CRC --------------------------------------------------------------------------------------


def _crc_bitwise(data: bytes) -> int:
    crc = 0xFFFF
    for byte in data:
        for k in range(7, -1, -1):
            fb = (crc >> 15) ^ (byte >> k) & 1
            crc = (crc << 1) & 0xFFFF
            if fb:
                crc ^= 0x1021
    return crc


def test_crc_software():
    """The host's CRC (``binascii.crc_hqx``) is CRC-16/CCITT-FALSE, bit by bit."""
    assert crc16(b"123456789") == CRC_CHECK == 0x29B1
    assert crc16(b"") == 0xFFFF
    rng = random.Random(1)
    for n in (1, 2, 7, 64):
        data = bytes(rng.randrange(256) for _ in range(n))
        assert crc16(data) == _crc_bitwise(data)
        # Appended high byte first, the CRC of message + CRC is 0.
        assert crc16(data + crc16(data).to_bytes(2, "big")) == 0
        assert crc16(data[n // 2:], crc16(data[:n // 2])) == crc16(data)


def test_crc_gateware_algorithm_matches_software():
    """``amaranth.lib.crc`` with the gateware's parameters computes the host's CRC, a byte or a
    bit at a time, and its residue (what a receiver checks) is 0."""
    rng = random.Random(2)
    messages = [b"123456789", b"", b"\x00", b"\xff" * 5] + [
        bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(8)]
    for msg in messages:
        assert FRAME_CRC(8).compute(msg) == crc16(msg)
        bits = [(byte >> k) & 1 for byte in msg for k in range(7, -1, -1)]
        assert FRAME_CRC(1).compute(bits) == crc16(msg)
    assert FRAME_CRC(8).residue() == 0


def test_serial_crc_gateware_matches_software():
    """The bit-serial CRC: a byte taken in one clock is folded in over eight (``busy``); idle
    clocks change nothing; ``clear`` with a byte starts a message with it; folding the CRC's
    own high byte in shifts it left by eight bits (what the frame transmitter relies on)."""
    rng = random.Random(4)
    messages = [b"123456789", b"", b"\x00", b"\xff" * 5] + [
        bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(8)]
    dut = SerialCRC16()
    results, shifted = [], []

    async def give(ctx, byte, clear=0):
        ctx.set(dut.clear, clear)
        ctx.set(dut.valid, 1)
        ctx.set(dut.data, byte)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        ctx.set(dut.valid, 0)
        n = 0
        while ctx.get(dut.busy):
            await ctx.tick()
            n += 1
        assert n == 8

    async def bench(ctx):
        for msg in messages:
            if msg:
                await give(ctx, msg[0], clear=1)
            else:
                ctx.set(dut.clear, 1)
                await ctx.tick()
                ctx.set(dut.clear, 0)
            for b in msg[1:]:
                for _ in range(rng.randrange(3)):
                    await ctx.tick()
                await give(ctx, b)
            results.append(ctx.get(dut.crc))
            crc = ctx.get(dut.crc)
            await give(ctx, crc >> 8)
            shifted.append((crc, ctx.get(dut.crc)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert results == [crc16(m) for m in messages]
    assert all(after == (crc << 8) & 0xFFFF for crc, after in shifted)


# --- frame transmitter alone (bytes, no UART) ------------------------------------------------


def test_frame_transmitter():
    """Random replies (with stalls on both sides) come out as frames the host parser accepts;
    an empty reply is a frame with length 0; one longer than the maximum becomes an ERROR."""
    rng = random.Random(3)
    cap = 16
    replies = [(0x90, bytes(rng.randrange(256) for _ in range(rng.randrange(1, cap + 1))))
               for _ in range(6)]
    replies[2] = (0x81, b"")
    replies[4] = (0x90, bytes(cap))
    replies.insert(3, (0x90, bytes(range(cap + 3))))     # overflows
    dut = FrameTransmitter(cap)
    out = bytearray()

    want = [(t, p) if len(p) <= cap else (FrameType.ERROR, bytes([ErrorCode.REPLY_TOO_LONG, t]))
            for t, p in replies]
    size = sum(len(encode_frame(t, p)) for t, p in want)

    async def producer(ctx):
        for rtype, payload in replies:
            beats = [{"data": b, "type": rtype, "length": len(payload),
                      "last": i == len(payload) - 1, "empty": 0}
                     for i, b in enumerate(payload)] or [
                {"data": 0, "type": rtype, "length": 0, "last": 1, "empty": 1}]
            for beat in beats:
                while rng.random() < 0.3:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload, beat)
                await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)

    async def consumer(ctx):
        for _ in range(100 * size):
            ready = rng.random() < 0.6
            ctx.set(dut.o.ready, ready)
            _, _, valid, byte = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid and ready:
                out.append(byte)
            if len(out) == size:
                break
        await ctx.tick().repeat(20)      # and nothing more

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(producer, background=True)
    sim.add_testbench(consumer)
    sim.run()
    frames = FrameParser().feed(bytes(out))
    assert [(f.type, f.payload) for f in frames] == want
    assert all(f.crc_ok for f in frames)
    # Byte-exact against the host's encoder.
    assert bytes(out) == b"".join(encode_frame(t, p) for t, p in want)


def test_framing_argument_validation():
    with pytest.raises(ValueError, match="max_payload"):
        FrameTransmitter(0)
    with pytest.raises(TypeError, match="max_payload"):
        FrameReceiver(1.5, 10, [1])
    with pytest.raises(ValueError, match="timeout"):
        FrameReceiver(16, 0, [1])
    with pytest.raises(TypeError, match="timeout"):
        FrameReceiver(16, 1.5, [1])
    with pytest.raises(ValueError, match="types"):
        FrameReceiver(16, 10, [256])
    with pytest.raises(ValueError, match="max_payload"):
        LinkEndpoint(4e6, 1e6, max_payload=70000)
    with pytest.raises(ValueError, match="max_reply"):
        LinkEndpoint(4e6, 1e6, max_reply=1)
    with pytest.raises(ValueError, match="timeout_bits"):
        LinkEndpoint(4e6, 1e6, timeout_bits=10)
    with pytest.raises(TypeError, match="id_payload"):
        LinkEndpoint(4e6, 1e6, id_payload="abc")
    with pytest.raises(ValueError, match="id_payload"):
        LinkEndpoint(4e6, 1e6, max_reply=20, id_payload=bytes(8))
    with pytest.raises(ValueError, match="inside_types"):
        LinkEndpoint(4e6, 1e6, inside_types=[FrameType.PING])
    with pytest.raises(ValueError, match="inside_types"):
        LinkEndpoint(4e6, 1e6, inside_types=[0x90])
    with pytest.raises(ValueError, match="clk_freq"):
        LinkEndpoint(10e6, 3e6)


# --- the link endpoint at the UART bit level --------------------------------------------------

CLK, BAUD = 4e6, 1e6          # 4 clocks per bit
MAX = 24                      # request payload limit
TIMEOUT = 40                  # idle timeout, bit-times
BOARD_CFG = Config(rows=4, cols=3, weight_fifo_depth=2, ub_rows=64, acc_rows=32)
BOARD_ID = board_id_from_config(BOARD_CFG)


def _result(ftype, length, payload):
    """The stub inside's answer to PROGRAM: RESULT = length byte + reversed payload."""
    return FrameType.RESULT, bytes([length & 0xFF]) + payload[::-1]


def _run_link(script, *, answer=_result, stall=0.0, delay=0, rate_error=0.0, max_reply=None,
              clk=CLK, baud=BAUD):
    dut = LinkEndpoint(clk, baud, max_payload=MAX, max_reply=max_reply, id_payload=BOARD_ID,
                       timeout_bits=TIMEOUT)
    host = HostSide(dut.rx, dut.tx, baud, rate_error=rate_error)
    inside = InsideStub(dut, answer, stall=stall, delay=delay, seed=5)

    async def bench(ctx):
        await ctx.delay(3 / baud)
        await script(ctx, host)
        extra = await host.quiet(ctx, 3 * TIMEOUT)
        assert extra == [], "a frame got more than one reply"

    sim = Simulator(dut)
    sim.add_clock(1 / clk)
    sim.add_testbench(bench)
    sim.add_testbench(host.monitor.run, background=True)
    sim.add_testbench(inside.run, background=True)
    sim.run()
    assert host.monitor.errors == 0
    return host, inside


async def _exchange(ctx, host, data, **kwargs):
    await host.send(ctx, data, **kwargs)
    frames = await host.receive(ctx, 1, within_bits=20 * (len(data) + MAX) + 4 * TIMEOUT)
    assert len(frames) == 1, "no reply"
    assert frames[0].crc_ok
    return frames[0].type, frames[0].payload


def _error(code, ftype):
    return FrameType.ERROR, bytes([code, ftype])


def test_link_good_frames():
    """PING echoes random payloads (empty and full-size ones too), ID, PROGRAM to the inside."""
    rng = random.Random(10)
    pings = [b"", b"\xa5", SYNC * 3, bytes(range(MAX))] + [
        bytes(rng.randrange(256) for _ in range(rng.randrange(MAX + 1))) for _ in range(3)]
    programs = [b"", b"\x01\x02\x03", bytes(rng.randrange(256) for _ in range(MAX))]

    async def script(ctx, host):
        for p in pings:
            assert await _exchange(ctx, host, encode_frame(FrameType.PING, p)) == (
                FrameType.PING_REPLY, p)
        rtype, payload = await _exchange(ctx, host, encode_frame(FrameType.ID, b"ignored"))
        assert rtype == FrameType.ID_REPLY
        info = decode_id(payload)
        assert payload.startswith(ID_MAGIC)
        assert info["protocol_version"] == PROTOCOL_VERSION
        assert (info["max_payload"], info["max_reply"]) == (MAX, len(payload))
        assert (info["clk_freq"], info["baud"]) == (CLK, BAUD)
        assert config_from_board_id(info).same_hardware(BOARD_CFG)
        for p in programs:
            assert await _exchange(ctx, host, encode_frame(FrameType.PROGRAM, p)) == (
                _result(FrameType.PROGRAM, len(p), p))

    _, inside = _run_link(script, stall=0.3)
    assert inside.requests == [(FrameType.PROGRAM, len(p), p) for p in programs]


def test_link_error_classes():
    """Each bad frame gets exactly one ERROR with its code and nothing of it reaches the
    inside; the next good frame works."""
    good = encode_frame(FrameType.PROGRAM, b"ok")
    bad_crc = bytearray(encode_frame(FrameType.PROGRAM, b"payload"))
    bad_crc[7] ^= 0x10
    too_long = encode_frame(FrameType.PING, bytes(MAX + 1))
    # A length field far above the maximum with little behind it: TOO_LONG after the quiet.
    huge = SYNC + bytes([FrameType.PING, 0xff, 0xff]) + b"abc"
    unknown = encode_frame(0x33, b"xyz")
    reply_type_as_request = encode_frame(FrameType.RESULT, b"")
    cut = encode_frame(FrameType.PROGRAM, b"0123456789")[:9]
    cut_in_header = SYNC + bytes([FrameType.PING])

    async def script(ctx, host):
        cases = [
            (bad_crc, _error(ErrorCode.BAD_CRC, FrameType.PROGRAM)),
            (too_long, _error(ErrorCode.TOO_LONG, FrameType.PING)),
            (huge, _error(ErrorCode.TOO_LONG, FrameType.PING)),
            (unknown, _error(ErrorCode.UNKNOWN_TYPE, 0x33)),
            (reply_type_as_request, _error(ErrorCode.UNKNOWN_TYPE, FrameType.RESULT)),
            (cut, _error(ErrorCode.TIMEOUT, FrameType.PROGRAM)),
            (cut_in_header, _error(ErrorCode.TIMEOUT, FrameType.PING)),
            # Garbage outside frames is skipped without a reply; the frame after it works.
            (b"\x00\x11\xa5\xa5\x22" + good, _result(FrameType.PROGRAM, 2, b"ok")),
        ]
        for data, want in cases:
            assert await _exchange(ctx, host, data) == want, data
            assert await _exchange(ctx, host, good) == _result(FrameType.PROGRAM, 2, b"ok")
        # A bad stop bit inside a frame.
        frame = encode_frame(FrameType.PING, b"abcd")
        await host.send(ctx, frame[:6])
        await host.send(ctx, frame[6:7], bad_stop=True)
        await host.send(ctx, frame[7:])
        frames = await host.receive(ctx, 1)
        assert [(f.type, f.payload) for f in frames] == [_error(ErrorCode.FRAMING,
                                                                FrameType.PING)]
        assert await _exchange(ctx, host, good) == _result(FrameType.PROGRAM, 2, b"ok")

    _, inside = _run_link(script)
    assert inside.requests == [(FrameType.PROGRAM, 2, b"ok")] * 10


def test_link_overrun_and_inside_errors():
    """A frame sent before the previous reply: OVERRUN (after the first reply). The inside's
    own ERROR replies and replies too long for the buffer."""
    def answer(ftype, length, payload):
        if payload == b"reject":
            return FrameType.ERROR, bytes([ErrorCode.INSIDE + 1, ftype, 0xEE])
        if payload == b"big":
            return FrameType.RESULT, bytes(range(MAX + 30))
        return _result(ftype, length, payload)

    async def script(ctx, host):
        # The inside takes 600 cycles per request, so the second frame arrives while busy.
        await host.send(ctx, encode_frame(FrameType.PROGRAM, b"first") +
                        encode_frame(FrameType.PROGRAM, b"second"))
        frames = await host.receive(ctx, 2)
        assert [(f.type, f.payload) for f in frames] == [
            _result(FrameType.PROGRAM, 5, b"first"), _error(ErrorCode.OVERRUN, 0)]
        assert await _exchange(ctx, host, encode_frame(FrameType.PROGRAM, b"reject")) == (
            FrameType.ERROR, bytes([ErrorCode.INSIDE + 1, FrameType.PROGRAM, 0xEE]))
        assert await _exchange(ctx, host, encode_frame(FrameType.PROGRAM, b"big")) == (
            _error(ErrorCode.REPLY_TOO_LONG, FrameType.RESULT))
        assert await _exchange(ctx, host, encode_frame(FrameType.PROGRAM, b"x")) == (
            _result(FrameType.PROGRAM, 1, b"x"))

    _, inside = _run_link(script, answer=answer, delay=600)
    assert [p for _, _, p in inside.requests] == [b"first", b"reject", b"big", b"x"]


def test_link_early_reply_drops_rest_of_request():
    """An inside that replies after the first byte: the rest of the request is dropped, and the
    next request starts at its own first byte."""
    class Early(InsideStub):
        async def run(self, ctx):
            req, rsp = self.dut.req, self.dut.rsp
            while True:
                ctx.set(req.ready, 1)
                _, _, valid, beat = await ctx.tick().sample(req.valid, req.payload)
                if not valid:
                    continue
                ctx.set(req.ready, 0)
                self.requests.append(beat.data)
                ctx.set(rsp.valid, 1)
                ctx.set(rsp.payload, {"data": beat.data, "type": FrameType.RESULT, "length": 1,
                                      "last": 1, "empty": 0})
                await ctx.tick().until(rsp.ready)
                ctx.set(rsp.valid, 0)

    dut = LinkEndpoint(CLK, BAUD, max_payload=MAX, timeout_bits=TIMEOUT)
    host = HostSide(dut.rx, dut.tx, BAUD)
    inside = Early(dut, None)

    async def script(ctx):
        for p in (b"abc", b"xyz"):
            assert await _exchange(ctx, host, encode_frame(FrameType.PROGRAM, p)) == (
                FrameType.RESULT, p[:1])

    sim = Simulator(dut)
    sim.add_clock(1 / CLK)
    sim.add_testbench(script)
    sim.add_testbench(host.monitor.run, background=True)
    sim.add_testbench(inside.run, background=True)
    sim.run()
    assert inside.requests == [ord("a"), ord("x")]


@pytest.mark.parametrize("clk, rate_error", [(5.5e6, 0.02), (4e6, -0.02)])
def test_link_fractional_and_off_rate(clk, rate_error):
    """A fractional clock/baud ratio, with the host's UART 2% off in either direction."""
    rng = random.Random(int(clk))
    payloads = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, MAX + 1)))
                for _ in range(3)]

    async def script(ctx, host):
        for p in payloads:
            assert await _exchange(ctx, host, encode_frame(FrameType.PING, p)) == (
                FrameType.PING_REPLY, p)

    _run_link(script, clk=clk, rate_error=rate_error)
