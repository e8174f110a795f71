"""cocotb tests of the generated ``BoardTop`` Verilog (``tpugen_board``): the host's real bytes
over a bit-level UART.

The host side is the project's own host code: ``fpga.host.serial_link.encode_frame`` frames,
``fpga.host.records`` records and reply decoding, ``fpga.host.frame_plan`` packing. Bytes go into
``rx`` and come out of ``tx``
through ``tb.board_tb.UartHost`` (the host-UART model, not ``fpga.gateware.uart``).

Environment: ``TPUGEN_BOARD``, the JSON of the ``fpga.gateware.top.BoardParameters`` the Verilog was
generated with (``tb.simboard.SimulatedBoardTop.spec``).
"""

from __future__ import annotations

import cocotb
import numpy as np

from tpugen.compiler import compile_gemm
from tpugen.fpga.host.frame_plan import plan_program
from tpugen.fpga.host.records import decode_reply, word_record
from tpugen.fpga.host.serial_link import encode_frame
from tpugen.fpga.protocol import (
    CTRL_CLEAR_COUNTERS,
    CTRL_CLEAR_ERROR,
    CTRL_RESET,
    BridgeError,
    ErrorCode,
    FrameType,
    config_from_board_id,
    decode_id,
)
from tpugen.hdl.config import Config
from tpugen.sim.program import Program
from tpugen.tb.board_tb import BoardTB, board_parameters_from_env


def _gemm_case(config: Config, seed: int):
    rng = np.random.default_rng(seed)
    A = rng.integers(-128, 128, (6, 7))
    B = rng.integers(-128, 128, (7, 5))
    return A, B, compile_gemm(config, A, B)


def _cat(cfg, *programs):
    out = Program(cfg)
    for p in programs:
        out.extend(p.steps)
    return out


async def _run(tb: BoardTB, program, *, max_payload: int = 64):
    """Run a program the way ``fpga.host.board_link.BoardLink.run`` does, in frames of at most
    ``max_payload`` bytes (the host may always send less than the board takes); return
    (host_out, last, the final reply, the plan)."""
    params = tb.params
    plan = plan_program(program, max_payload=min(max_payload, params.max_payload),
                        max_reply=params.max_reply)
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
    params = board_parameters_from_env()
    cfg = params.config
    tb = BoardTB(dut, params)
    await tb.start()
    frame = await tb.request(FrameType.ID)
    info = decode_id(frame.payload)
    assert config_from_board_id(info).same_hardware(cfg)
    assert (info["max_payload"], info["max_reply"]) == (params.max_payload, params.max_reply)
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
    params = board_parameters_from_env()
    cfg = params.config
    tb = BoardTB(dut, params)
    await tb.start()
    # A program whose effect is visible: 3 rows into the UB, read back.
    rows = np.arange(3 * cfg.rows).reshape(3, cfg.rows) % 100 - 50
    load = Program(cfg).read_host(0, rows)
    other = Program(cfg).read_host(0, -rows)
    readback = Program(cfg).write_host(0, 3).sync()
    m = min(cfg.rows, cfg.cols)
    host_out, _, _, _ = await _run(tb, _cat(cfg, load, readback))
    np.testing.assert_array_equal(host_out[:3, :m], rows[:, :m])

    payload = plan_program(other, max_payload=params.max_payload,
                           max_reply=params.max_reply).frames[0].payload
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
