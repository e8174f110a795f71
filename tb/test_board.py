"""cocotb tests of the generated ``BoardTop`` Verilog (``tpugen_board``): the host's real bytes
over a bit-level UART.

The host side is the project's own host code: ``fpga.host.encode_frame`` frames and
``fpga.board`` records and reply decoding. Bytes go into ``rx`` and come out of ``tx`` through
``UartHost``, a UART model written here (timed by the simulator's clock-independent timers from
the bit rate alone, like a USB-UART), not through ``fpga.uart``.

Environment: ``TPUGEN_BOARD`` (JSON: ``config`` (a Config dict), ``clk_freq``, ``baud``,
``max_payload``, ``max_reply``, ``timeout_bits``: the parameters the Verilog was generated with,
``fpga.simboard.SimulatedBoardTop.spec``). ``UartHost`` and ``BoardTB`` also serve the
simulated board of ``fpga.simboard``.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, Timer
from tpugen.hdl.config import Config

__all__ = ["UartHost", "BoardTB"]


class UartHost:
    """The host's 8N1 UART on a ``tpugen_board``'s ``rx`` / ``tx``.

    ``send`` drives ``rx`` one bit-time per bit (``rate_error`` makes the host's bit rate off by
    that fraction); ``monitor`` (start it with ``cocotb.start_soon``) samples ``tx`` in the
    middle of each bit, measured from the start bit's falling edge, and collects the bytes in
    ``received`` (a stop bit of 0 counts in ``errors`` instead).
    """

    def __init__(self, dut, baud: float, *, rate_error: float = 0.0):
        self.dut = dut
        self.bit_ps = round(1e12 / (baud * (1 + rate_error)))
        self.received = bytearray()
        self.errors = 0
        dut.rx.value = 1

    async def send(self, data: bytes):
        for byte in bytes(data):
            for bit in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
                self.dut.rx.value = bit
                await Timer(self.bit_ps, unit="ps")

    async def monitor(self):
        tx = self.dut.tx
        while True:
            await FallingEdge(tx)
            await Timer(self.bit_ps // 2, unit="ps")
            if int(tx.value) != 0:
                continue                        # a glitch, not a start bit
            byte = 0
            for i in range(8):
                await Timer(self.bit_ps, unit="ps")
                byte |= int(tx.value) << i
            await Timer(self.bit_ps, unit="ps")
            if int(tx.value) == 1:
                self.received.append(byte)
            else:
                self.errors += 1


def spec_from_env(name: str = "TPUGEN_BOARD") -> dict:
    spec = json.loads(os.environ[name])
    spec["config"] = Config.from_dict(spec["config"])
    return spec


class BoardTB:
    """Clock, reset, the host UART and a frame parser for a ``tpugen_board`` top."""

    def __init__(self, dut, spec: dict):
        from tpugen.fpga.host import FrameParser

        self.dut = dut
        self.spec = spec
        self.config = spec["config"]
        self.uart = UartHost(dut, spec["baud"])
        self.parser = FrameParser()
        self.seen = 0
        self.frames = []

    async def start(self):
        period_ps = round(1e12 / self.spec["clk_freq"])
        cocotb.start_soon(Clock(self.dut.clk, period_ps, unit="ps").start())
        cocotb.start_soon(self.uart.monitor())
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 4)

    def poll(self) -> list:
        new = bytes(self.uart.received[self.seen:])
        self.seen += len(new)
        self.frames += self.parser.feed(new)
        return self.frames

    async def receive(self, *, within_bits: float = 200_000):
        """The next reply frame (fails after ``within_bits`` bit-times without one)."""
        want = len(self.frames) + 1
        waited = 0
        while len(self.poll()) < want:
            assert waited < within_bits, f"no reply within {within_bits} bit-times"
            await Timer(20 * self.uart.bit_ps, unit="ps")
            waited += 20
        return self.frames[want - 1]

    async def quiet(self, bits: float) -> list:
        n = len(self.frames)
        await Timer(round(bits * self.uart.bit_ps), unit="ps")
        return self.poll()[n:]

    async def request(self, ftype: int, payload: bytes = b"", *, raw: bytes | None = None):
        """Send a frame (or ``raw`` bytes) and return the reply ``Frame``."""
        from tpugen.fpga.host import encode_frame

        await self.uart.send(encode_frame(ftype, payload) if raw is None else raw)
        return await self.receive()


def _gemm_case(config: Config, seed: int):
    from tpugen.sim.compiler import compile_gemm

    rng = np.random.default_rng(seed)
    A = rng.integers(-128, 128, (6, 7))
    B = rng.integers(-128, 128, (7, 5))
    return A, B, compile_gemm(config, A, B)


async def _run(tb: BoardTB, program, *, max_payload: int = 64):
    """Run a program the way ``fpga.board.BoardLink.run`` does, in frames of at most
    ``max_payload`` bytes (the host may always send less than the board takes); return
    (host_out, last, the final reply, the plan)."""
    from tpugen.fpga.board import decode_reply, plan_program
    from tpugen.fpga.protocol import CTRL_CLEAR_COUNTERS, CTRL_CLEAR_ERROR, CTRL_RESET, FrameType

    spec = tb.spec
    plan = plan_program(program, max_payload=min(max_payload, spec["max_payload"]),
                        max_reply=spec["max_reply"])
    frame = await tb.request(FrameType.CONTROL,
                             bytes([CTRL_RESET | CTRL_CLEAR_ERROR | CTRL_CLEAR_COUNTERS]))
    assert (frame.crc_ok, frame.type) == (True, FrameType.CONTROL_REPLY), frame
    outs, lasts, reply = [], [], None
    for k, fp in enumerate(plan.frames):
        frame = await tb.request(FrameType.PROGRAM, fp.payload)
        assert frame.crc_ok and frame.type == FrameType.RESULT, (k, frame)
        reply = decode_reply(tb.config, frame.payload)
        assert not reply.overflow and reply.waiting == fp.mid_data, (k, reply)
        outs.append(reply.host_out)
        lasts.append(reply.last)
    return np.concatenate(outs), np.concatenate(lasts), reply, plan


@cocotb.test()
async def test_identify_and_gemm(dut):
    """ID reply, then a GEMM in several PROGRAM frames; the result equals NumPy."""
    from tpugen.fpga.protocol import FrameType, decode_id

    spec = spec_from_env()
    cfg = spec["config"]
    tb = BoardTB(dut, spec)
    await tb.start()
    frame = await tb.request(FrameType.ID)
    info = decode_id(frame.payload)
    assert (info["rows"], info["cols"], info["operand"]) == (cfg.rows, cfg.cols, cfg.operand)
    assert (info["max_payload"], info["max_reply"]) == (spec["max_payload"], spec["max_reply"])
    A, B, gemm = _gemm_case(cfg, 1)
    host_out, last, reply, plan = await _run(tb, gemm.program)
    assert len(plan.frames) > 2 and any(f.mid_data for f in plan.frames), \
        "the case must span several frames, some ending inside an instruction's data"
    np.testing.assert_array_equal(gemm.decode(host_out), A @ B)
    assert not plan.expected.mismatches(host_out, last)
    assert reply.cause == 0 and reply.counters["retired"] == len(plan.program)
    assert tb.uart.errors == 0


@cocotb.test()
async def test_bad_frames_change_nothing(dut):
    """A corrupted and a truncated frame get the link's ERROR replies and are not executed; a
    malformed record gets the bridge's ERROR; the next frame works."""
    from tpugen.fpga.board import decode_reply, word_record
    from tpugen.fpga.host import encode_frame
    from tpugen.fpga.protocol import BridgeError, ErrorCode, FrameType
    from tpugen.sim.program import Program

    spec = spec_from_env()
    cfg = spec["config"]
    tb = BoardTB(dut, spec)
    await tb.start()
    # A program whose effect is visible: 3 rows into the UB, read back.
    rows = np.arange(3 * cfg.rows).reshape(3, cfg.rows) % 100 - 50
    load = Program(cfg).read_host(0, rows)
    other = Program(cfg).read_host(0, -rows)
    readback = Program(cfg).write_host(0, 3).sync()
    m = min(cfg.rows, cfg.cols)
    host_out, _, _, _ = await _run(tb, _cat(cfg, load, readback))
    np.testing.assert_array_equal(host_out[:3, :m], rows[:, :m])

    from tpugen.fpga.board import plan_program

    payload = plan_program(other, max_payload=spec["max_payload"],
                           max_reply=spec["max_reply"]).frames[0].payload
    good = encode_frame(FrameType.PROGRAM, payload)
    corrupt = bytearray(good)
    corrupt[len(corrupt) // 2] ^= 0x10
    frame = await tb.request(0, raw=bytes(corrupt))
    assert frame.type == FrameType.ERROR and frame.payload[:2] == bytes(
        [ErrorCode.BAD_CRC, FrameType.PROGRAM]), frame
    frame = await tb.request(0, raw=good[:-5])           # cut short: the idle timeout ends it
    assert frame.type == FrameType.ERROR and frame.payload[0] == ErrorCode.TIMEOUT, frame
    bad_record = word_record(readback.words()[0]) + b"\x07" + bytes(8)
    frame = await tb.request(FrameType.PROGRAM, bad_record)
    assert frame.type == FrameType.ERROR and frame.payload[:4] == bytes(
        [BridgeError.BAD_RECORD, FrameType.PROGRAM, 9, 0]), frame
    # Nothing of ``other`` was executed: the UB still holds ``rows``.
    frame = await tb.request(FrameType.PROGRAM, b"".join(word_record(w) for w in
                                                          readback.words()))
    reply = decode_reply(cfg, frame.payload)
    np.testing.assert_array_equal(reply.host_out[:3, :m], rows[:, :m])
    # The bad record's frame ran its first record (a WRITE_HOST): nothing else changed.
    assert await tb.quiet(200) == []
    assert tb.uart.errors == 0


def _cat(cfg, *programs):
    from tpugen.sim.program import Program

    out = Program(cfg)
    for p in programs:
        out.extend(p.steps)
    return out
