# amaranth: UnusedElaboratable=no
"""The core bridge with the core in the Amaranth simulator, frames given as payload streams
(no UART): records, programs over many frames, the RESULT layout, overflow, malformed and
untakeable records, CONTROL; and the host side: records (``fpga.records``) and planning
(``fpga.plan``)."""

import random
import struct

import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Module, ResetInserter
from amaranth.lib.wiring import In
from amaranth.sim import Simulator
from helpers import assert_rejects

from tpugen.compiler import compile_gemm
from tpugen.fpga.gateware.bridge import Bridge
from tpugen.fpga.gateware.top import connect_core
from tpugen.fpga.host.frame_plan import plan_program, split_program
from tpugen.fpga.host.records import beat_record, decode_reply, word_record
from tpugen.fpga.protocol import (
    BEAT_LAST,
    BEAT_NARROW,
    CTRL_CLEAR_COUNTERS,
    CTRL_CLEAR_ERROR,
    CTRL_RESET,
    REC_BEAT,
    REC_LAST,
    REC_PBEAT,
    REC_PLAST,
    REC_WORD,
    REC_WORD_SIZE,
    RESULT_BUSY,
    RESULT_ERROR,
    RESULT_HEADER_FORMAT,
    RESULT_HEADER_SIZE,
    RESULT_OVERFLOW,
    RESULT_WAITING,
    BridgeError,
    FrameType,
    beat_record_size,
    packed_beat_record_size,
    reply_capacity,
    result_beat_size,
)
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.core import Core, core_signature
from tpugen.sim.float_golden import same_bits
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.reference import gemm_reference
from tpugen.simulate import random_operands

CFG = Config(rows=4, cols=4, ub_rows=64, acc_rows=32)
#: R != C and 3-byte result lanes (sign extension from 18 bits).
ODD = Config(rows=3, cols=5, acc_width=18, ub_rows=32, acc_rows=32, weight_fifo_depth=2)
INT4 = Config(rows=3, cols=5, operand="int4", ub_rows=32, acc_rows=32)
BF16 = Config(rows=2, cols=3, operand="bf16", ub_rows=32, acc_rows=32)


def _records(payload: bytes, config):
    """The records of a PROGRAM payload: (record byte, its bytes)."""
    sizes = {REC_WORD: REC_WORD_SIZE, REC_BEAT: beat_record_size(config),
             REC_LAST: beat_record_size(config), REC_PBEAT: packed_beat_record_size(config),
             REC_PLAST: packed_beat_record_size(config)}
    out, pos = [], 0
    while pos < len(payload):
        size = sizes[payload[pos]]
        out.append((payload[pos], payload[pos:pos + size]))
        pos += size
    return out


class BridgeCore(Elaboratable):
    """The bridge wired to a core as in ``fpga.top.BoardTop``, without the link."""

    def __init__(self, config, max_reply, fault=None):
        self.bridge = Bridge(config, max_reply=max_reply)
        self.core = Core(config, fault=fault, snapshot_port=True)

    def elaborate(self, platform):
        m = Module()
        b, c = self.bridge, self.core
        m.submodules.bridge = b
        m.submodules.core = ResetInserter({"sync": b.core_rst})(c)
        connect_core(m, b, c)
        return m


class Host:
    """Sends request payloads on the bridge's ``req`` and takes its replies from ``rsp``,
    withholding ``valid`` / ``ready`` in a random fraction ``stall`` of cycles, and checking
    that the reply stream keeps its offers."""

    def __init__(self, dut, stall=0.0, seed=0):
        self.dut = dut
        self.stall = stall
        self.rng = random.Random(seed)

    async def __call__(self, ctx, ftype, payload=b"", *, max_cycles=20_000):
        req, rsp = self.dut.bridge.req, self.dut.bridge.rsp
        payload = bytes(payload)
        beats = [{"data": b, "type": ftype, "length": len(payload),
                  "last": i == len(payload) - 1, "empty": 0} for i, b in enumerate(payload)]
        beats = beats or [{"data": 0, "type": ftype, "length": 0, "last": 1, "empty": 1}]
        i, offered, cycles = 0, False, 0
        while i < len(beats):
            offered = offered or self.rng.random() >= self.stall
            ctx.set(req.valid, offered)
            ctx.set(req.payload, beats[i])
            _, _, ready = await ctx.tick().sample(req.ready)
            if offered and ready:
                i, offered = i + 1, False
        ctx.set(req.valid, 0)
        out, waiting = bytearray(), None
        while True:
            cycles += 1
            assert cycles < max_cycles, f"no reply within {max_cycles} cycles"
            ready = self.rng.random() >= self.stall
            ctx.set(rsp.ready, ready)
            _, _, valid, beat = await ctx.tick().sample(rsp.valid, rsp.payload)
            beat = (beat.data, beat.type, beat.last, beat.empty)
            if waiting is not None:
                assert valid and beat == waiting, "the reply stream dropped an offer"
            if valid and not ready:
                waiting = beat
                continue
            waiting = None
            if valid:
                assert not beat[3]
                out.append(beat[0])
                if beat[2]:
                    ctx.set(rsp.ready, 0)
                    return beat[1], bytes(out)


def simulate(config, script, *, max_reply=1024, stall=0.0, seed=0, fault=None):
    """Run ``await script(ctx, host)`` on a bridge + core."""
    dut = BridgeCore(config, max_reply, fault)
    host = Host(dut, stall, seed)

    async def bench(ctx):
        await script(ctx, host)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def words(program):
    return b"".join(word_record(w) for w in program.words())


def error_payload(code, offset, ftype=FrameType.PROGRAM):
    return FrameType.ERROR, bytes([code, ftype]) + struct.pack("<H", offset)


# --- whole programs ---------------------------------------------------------------------------
@pytest.mark.parametrize("config, stall", [(CFG, 0.3), (ODD, 0.0), (INT4, 0.2), (BF16, 0.0)],
                         ids=["4x4", "3x5a18", "int4", "bf16"])
def test_gemm_over_many_frames(config, stall):
    """A GEMM in small frames (some ending inside an instruction's data) with small replies
    (WRITE_HOSTs split): the beats of all replies, concatenated, are the product (int4: its
    operand beats in packed records; bf16: lanes of two bytes, binary32 results)."""
    A, B = random_operands(config, 6, 9, 7, 3)
    gemm = compile_gemm(config, A, B)
    expected = gemm_reference(config, A, B)
    max_reply = RESULT_HEADER_SIZE + 4 * result_beat_size(config)
    plan = plan_program(gemm.program, max_payload=48, max_reply=max_reply)
    assert len(plan.program) > len(gemm.program), "some WRITE_HOST must have been split"
    assert any(f.mid_data for f in plan.frames) and len(plan.frames) > 6
    replies = []

    async def script(ctx, host):
        rtype, payload = await host(ctx, FrameType.CONTROL, bytes([CTRL_RESET]))
        assert rtype == FrameType.CONTROL_REPLY
        for frame in plan.frames:
            rtype, payload = await host(ctx, FrameType.PROGRAM, frame.payload)
            assert rtype == FrameType.RESULT, payload
            replies.append((frame, decode_reply(config, payload)))

    simulate(config, script, max_reply=max_reply, stall=stall)
    for frame, reply in replies:
        assert reply.waiting == frame.mid_data
        assert not reply.overflow and not reply.error
        assert len(reply.host_out) <= reply_capacity(config, max_reply)
    host_out = np.concatenate([r.host_out for _, r in replies])
    last = np.concatenate([r.last for _, r in replies])
    got = gemm.decode(host_out)
    if got.dtype == np.float32:
        assert same_bits(got.view(np.uint32), expected.view(np.uint32)).all()
    else:
        np.testing.assert_array_equal(got, expected)
    if config is INT4:
        kinds = {p[0] for f in plan.frames for p in _records(f.payload, config)}
        assert {REC_PBEAT, REC_PLAST} <= kinds and not kinds & {REC_BEAT, REC_LAST}
    assert plan.expected.mismatches(host_out, last) == []
    final = replies[-1][1]
    assert final.counters["retired"] == len(plan.program) == plan.expected.retired
    assert final.flags == 0


def test_fault_in_the_core_is_seen():
    """The test of the tests: a broken MAC cell changes the product the bridge returns."""
    rng = np.random.default_rng(4)
    A, B = rng.integers(-128, 128, (4, 4)), rng.integers(1, 128, (4, 4))
    gemm = compile_gemm(CFG, A, B)
    payload = plan_program(gemm.program, max_payload=1024, max_reply=1024).frames[0].payload
    got = []

    async def script(ctx, host):
        got.append(decode_reply(CFG, (await host(ctx, FrameType.PROGRAM, payload))[1]))

    simulate(CFG, script, fault=(1, 2))
    assert not np.array_equal(gemm.decode(got[0].host_out), A @ B)


@pytest.mark.parametrize("width", [64, 40], ids=["counters64", "counters40"])
def test_reply_layout(width):
    """The RESULT bytes of a known program, read by hand: header, counters, lanes sign-extended
    to 3 bytes, the last flags; and the header's snapshot against READ_COUNTERS. With 40-bit
    counters, their high bytes / chunks are sent as zeros without taking the next counter's."""
    cfg = ODD.replace(counter_width=width)
    rows = np.array([[-5, 7, -128], [127, 0, -1]])
    program = Program(cfg).read_host(2, rows).write_host(2, 2).sync().read_counters()
    lanes = 5
    payload = b"".join([
        word_record(program.words()[0]),
        beat_record(cfg, [-5, 7, -128, 0, 0], False),
        bytes([REC_LAST, 127, 0, 0x80 + 0x7F, 0, 0]),     # lane values 127, 0, -1 by hand
        words(Program(cfg, program.steps[1:])),
    ])
    got = []

    async def script(ctx, host):
        got.append(await host(ctx, FrameType.PROGRAM, payload))

    simulate(cfg, script)
    rtype, reply = got[0]
    assert rtype == FrameType.RESULT
    flags, cause, beats, dropped, cycles, array_busy, stall_in, stall_out, retired = \
        struct.unpack_from(RESULT_HEADER_FORMAT, reply)
    assert (flags, cause, beats, dropped) == (0, 0, 2 + 1 + 20, 0)
    assert retired == 4 and array_busy == 0 and 0 < stall_in < cycles
    body = reply[RESULT_HEADER_SIZE:]
    # beats that fit 8 bits a lane go NARROW: flags (last, narrow), a byte a lane
    assert body[:18] == bytes.fromhex("02 fb 07 80 00 00 03 7f 00 ff 00 00 03 5c 00 02 00 00")
    decoded = decode_reply(cfg, reply)         # the counter chunks: narrow when they fit
    chunks = decoded.host_out[3:, 0] & 0xFFFF
    assert body[18:] == b"".join(bytes([BEAT_NARROW * (c < 128) | BEAT_LAST * (k == 19)])
                                 + int(c).to_bytes(lanes * (1 if c < 128 else 3), "little")
                                 for k, c in enumerate(chunks))
    values = [sum(int(chunks[4 * c + j]) << (16 * j) for j in range(4)) for c in range(5)]
    assert values[isa.Counter.RETIRED] == 3                  # before READ_COUNTERS itself
    assert 0 < values[isa.Counter.CYCLES] < cycles
    assert decoded.host_out[:2, :3].tolist() == rows.tolist()
    assert decoded.host_out[:2, 3:].tolist() == [[0, 0], [0, 0]]


def test_waiting_reply_after_read_counters():
    """READ_COUNTERS and the reply header share the core's counter snapshot: a frame that ends
    inside the data of a READ_HOST right after a READ_COUNTERS is answered (WAITING) only once
    the counter beats are out, all in that reply, with the snapshot of the READ_COUNTERS in the
    beats and the reply's own in the header; the data in the next frame completes it."""
    cfg = ODD.replace(counter_width=40)
    read = Program(cfg).read_counters().read_host(0, np.ones((2, 3), dtype=int))
    rest = beat_record(cfg, [1, 1, 1, 0, 0], False)
    got = []

    async def script(ctx, host):
        got.append(await host(ctx, FrameType.PROGRAM, words(read)))
        got.append(await host(ctx, FrameType.PROGRAM, rest + bytes([REC_LAST]) + rest[1:]
                              + words(Program(cfg).sync())))

    simulate(cfg, script)
    first = decode_reply(cfg, got[0][1])
    assert first.waiting and not first.overflow and len(first.host_out) == isa.COUNTER_BEATS
    chunks = first.host_out[:, 0].tolist()
    values = [sum(chunks[4 * c + j] << (16 * j) for j in range(4)) for c in range(5)]
    # (READ_COUNTERS retires with its last beat, counted two cycles later: maybe not yet)
    assert values[isa.Counter.RETIRED] == 0 and first.counters["retired"] in (0, 1)
    assert 0 < values[isa.Counter.CYCLES] < first.counters["cycles"]
    assert first.counters["host_in_stall"] > 0 == values[isa.Counter.HOST_IN_STALL]
    second = decode_reply(cfg, got[1][1])
    assert not second.waiting and second.host_out[0, :3].tolist() == [isa.SYNC_MAGIC, 0, 2]


# --- overflow, malformed and untakeable records -----------------------------------------------
def test_overflow_drops_and_flags_and_nothing_hangs():
    max_reply = RESULT_HEADER_SIZE + 3 * result_beat_size(CFG)
    load = Program(CFG).read_host(0, np.arange(32).reshape(8, 4))
    too_much = Program(CFG).write_host(0, 8)
    got = []

    async def script(ctx, host):
        for p in (load, too_much, Program(CFG).sync()):
            frame = plan_program(p, max_payload=1024, max_reply=1024).frames[0]
            got.append(decode_reply(CFG, (await host(ctx, FrameType.PROGRAM, frame.payload))[1]))

    simulate(CFG, script, max_reply=max_reply)
    full = got[1]
    assert full.overflow and full.dropped == 5 and len(full.host_out) == 3
    assert full.host_out[:, 0].tolist() == [0, 4, 8]
    assert not full.waiting and not full.busy
    after = got[2]
    assert not after.overflow and after.dropped == 0
    assert after.host_out[0, 0] == isa.SYNC_MAGIC and after.counters["retired"] == 3


def test_malformed_records():
    """An unknown record byte and a record cut short stop the frame with an ERROR naming the
    offset; the records before it were run, the rest were not, and the host-out beats of the
    frame are dropped."""
    rows = np.arange(8).reshape(2, 4)
    load = plan_program(Program(CFG).read_host(0, rows), max_payload=1024,
                        max_reply=1024).frames[0].payload
    other = plan_program(Program(CFG).read_host(0, -rows), max_payload=1024,
                         max_reply=1024).frames[0].payload
    readback = words(Program(CFG).write_host(0, 2))
    got = []

    async def script(ctx, host):
        async def ask(payload):
            got.append(await host(ctx, FrameType.PROGRAM, payload))

        await ask(readback + load + b"\x09" + other)        # unknown record byte
        await ask(bytes([REC_BEAT, 1, 2]))                 # cut inside a beat record
        await ask(readback[:5])                            # cut inside a word record
        await ask(bytes([REC_LAST]))                       # a record byte and nothing else
        await ask(readback)

    simulate(CFG, script)
    assert got[0] == error_payload(BridgeError.BAD_RECORD, len(readback) + len(load))
    for k in (1, 2, 3):
        assert got[k] == error_payload(BridgeError.TRUNCATED_RECORD, 0), k
    # The first frame's load ran, ``other`` did not, and no beat of its WRITE_HOST is left.
    rtype, payload = got[4]
    assert rtype == FrameType.RESULT
    reply = decode_reply(CFG, payload)
    assert reply.host_out.tolist() == rows.tolist() and reply.flags == 0


def test_untakeable_records():
    """A host-in beat no instruction reads, and an instruction word while the core waits for
    host-in data behind it, give NOT_TAKEN instead of hanging; CONTROL reset recovers."""
    read2 = Program(CFG).read_host(0, np.ones((2, 4), dtype=int))
    word = word_record(read2.words()[0])
    beat = beat_record(CFG, [1, 2, 3, 4], False)
    sync = words(Program(CFG).sync())
    got = []

    async def script(ctx, host):
        async def ask(ftype, payload):
            got.append(await host(ctx, ftype, payload))

        await ask(FrameType.PROGRAM, sync + beat + sync)     # a stray beat
        await ask(FrameType.PROGRAM, sync)
        # Waits for beat 2, gets words: the core queues as many as its decode stage holds, the
        # first one it cannot take is NOT_TAKEN.
        await ask(FrameType.PROGRAM, word + beat + sync * 6)
        await ask(FrameType.PROGRAM, b"")                    # a status poll: still waiting
        await ask(FrameType.CONTROL, bytes([CTRL_RESET]))
        await ask(FrameType.PROGRAM, sync)

    simulate(CFG, script)
    assert got[0] == error_payload(BridgeError.NOT_TAKEN, 9)
    reply = decode_reply(CFG, got[1][1])
    assert reply.host_out[0, 0] == isa.SYNC_MAGIC and reply.flags == 0
    rtype, err = got[2]
    assert rtype == FrameType.ERROR and err[:2] == bytes([BridgeError.NOT_TAKEN, FrameType.PROGRAM])
    # (the controller's front holds two words: its decode and issue registers)
    assert struct.unpack_from("<H", err, 2)[0] in [9 + len(beat) + k * len(sync) for k in range(5)]
    poll = decode_reply(CFG, got[3][1])
    assert poll.waiting and poll.busy and len(poll.host_out) == 0
    status = decode_reply(None, got[4][1])
    assert got[4][0] == FrameType.CONTROL_REPLY and not status.busy
    assert status.counters["retired"] == 0
    reply = decode_reply(CFG, got[5][1])
    assert reply.host_out[0].tolist()[:3] == [isa.SYNC_MAGIC, 0, 0] and reply.flags == 0


def test_control():
    """CONTROL clears the error, the counters, resets the core; bad payloads are refused."""
    bad_op = Program(CFG).raw(isa.encode(isa.Op.MATMUL, 0, n=0))     # OUT_OF_RANGE
    sync = words(Program(CFG).sync())
    got = []

    async def script(ctx, host):
        async def ask(ftype, payload):
            got.append(await host(ctx, ftype, payload))

        await ask(FrameType.PROGRAM, words(bad_op) + sync)
        await ask(FrameType.CONTROL, bytes([CTRL_CLEAR_ERROR]))
        await ask(FrameType.CONTROL, bytes([CTRL_CLEAR_COUNTERS]))
        await ask(FrameType.CONTROL, bytes([CTRL_CLEAR_ERROR | 0x80]))
        await ask(FrameType.CONTROL, bytes([CTRL_CLEAR_ERROR, 0]))
        await ask(FrameType.CONTROL, b"")
        await ask(FrameType.PROGRAM, words(bad_op))
        await ask(FrameType.CONTROL, bytes([CTRL_RESET]))

    simulate(CFG, script, stall=0.2, seed=5)
    first = decode_reply(CFG, got[0][1])
    assert first.flags == RESULT_ERROR and first.cause == isa.Cause.OUT_OF_RANGE
    assert first.host_out[0, :3].tolist() == [isa.SYNC_MAGIC, isa.Cause.OUT_OF_RANGE, 1]
    cleared = decode_reply(None, got[1][1])
    assert cleared.flags == 0 and cleared.cause == 0 and cleared.counters["retired"] == 2
    zeroed = decode_reply(None, got[2][1])
    assert zeroed.counters["retired"] == 0 and zeroed.counters["cycles"] < 5
    for k in (3, 4, 5):
        assert got[k] == error_payload(BridgeError.BAD_CONTROL, 0, FrameType.CONTROL), k
    again = decode_reply(CFG, got[6][1])
    assert again.cause == isa.Cause.OUT_OF_RANGE and again.flags & RESULT_ERROR
    reset = decode_reply(None, got[7][1])
    assert reset.cause == 0 and reset.counters["cycles"] < 5
    assert [v for k, v in reset.counters.items() if k != "cycles"] == [0] * 4
    assert not reset.flags & (RESULT_BUSY | RESULT_OVERFLOW | RESULT_WAITING)


# --- the register stage between the bridge and the core ---------------------------------------
@pytest.mark.parametrize("p_ready, seed", [(0.3, 1), (0.7, 2), (0.95, 3)])
def test_stage_in_order_under_core_stalls(p_ready, seed):
    """The bridge alone, a stand-in core withholding ``cmd.ready`` / ``host_in.ready`` at random:
    every record reaches the core once and in order, an offer is kept until it is taken, and
    the core's ``ready`` reaches nothing of the bridge within a clock (the stage's outputs and
    ``req.ready`` do not follow it)."""
    rng = random.Random(seed)
    cfg = CFG
    records, want = [], []
    for _ in range(60):
        if rng.random() < 0.5:
            w = rng.getrandbits(64)
            records.append(word_record(w))
            want.append(("cmd", w))
        else:
            lanes = [rng.randrange(-128, 128) for _ in range(cfg.rows)]
            last = rng.random() < 0.3
            records.append(beat_record(cfg, lanes, last))
            want.append(("beat", [v & 0xFF for v in lanes], int(last)))
    payload = b"".join(records)
    dut = Bridge(cfg, max_reply=1024)
    cmd, host_in = dut.core.cmd, dut.core.host_in
    got, reply = [], []

    async def core(ctx):
        held = None
        while True:
            ready = rng.random() >= p_ready
            for port in (cmd, host_in):
                ctx.set(port.ready, 0)
            before = [ctx.get(s) for s in (cmd.valid, host_in.valid, dut.req.ready,
                                           dut.rsp.valid)]
            for port in (cmd, host_in):
                ctx.set(port.ready, ready)
            after = [ctx.get(s) for s in (cmd.valid, host_in.valid, dut.req.ready,
                                          dut.rsp.valid)]
            assert before == after, "the core's ready reached the bridge within a clock"
            _, _, cv, cp, hv, hp = await ctx.tick().sample(
                cmd.valid, cmd.payload, host_in.valid, host_in.payload)
            assert not (cv and hv)
            offer = ("cmd", cp.as_value().value) if cv else (
                ("beat", [int(x) & 0xFF for x in hp.data], int(hp.last)) if hv else None)
            if held is not None:
                assert offer == held, "an offer was withdrawn or changed before it was taken"
            held = None
            if offer is not None:
                if ready:
                    got.append(offer)
                else:
                    held = offer

    async def bench(ctx):
        ctx.set(dut.core.status.busy, 1)     # never idle: beats are not given up on
        beats = [{"data": b, "type": FrameType.PROGRAM, "length": len(payload),
                  "last": i == len(payload) - 1, "empty": 0} for i, b in enumerate(payload)]
        for beat in beats:
            ctx.set(dut.req.valid, 1)
            ctx.set(dut.req.payload, beat)
            await ctx.tick().until(dut.req.ready)
        ctx.set(dut.req.valid, 0)
        while len(got) < len(want):
            await ctx.tick()
        ctx.set(dut.core.status.busy, 0)
        ctx.set(dut.rsp.ready, 1)
        while True:
            _, _, valid, beat = await ctx.tick().sample(dut.rsp.valid, dut.rsp.payload)
            if valid:
                reply.append(beat.data)
                if beat.last:
                    return reply, beat.type

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(core, background=True)
    sim.add_testbench(bench)
    sim.run()
    assert got == want
    assert len(reply) == RESULT_HEADER_SIZE
    assert struct.unpack_from(RESULT_HEADER_FORMAT, bytes(reply))[:4] == (0, 0, 0, 0)


def test_bridge_arguments():
    assert_rejects(lambda: Bridge("4x4"), TypeError, "config must be a Config")
    small = RESULT_HEADER_SIZE + result_beat_size(CFG) - 1
    assert_rejects(lambda: Bridge(CFG, max_reply=small), ValueError, f"max_reply.*{small}")
    assert_rejects(lambda: Bridge(CFG, max_reply=70000), ValueError, "max_reply.*70000")
    assert_rejects(lambda: Bridge(CFG, max_reply=1.5), TypeError, "max_reply")
    assert_rejects(lambda: Bridge(CFG, max_payload=0), ValueError, "max_payload")
    assert_rejects(lambda: Bridge(CFG, max_payload=True), TypeError, "max_payload")


def test_bridge_core_bus():
    """The bridge's ``core`` member is the core's own signature flipped: one connect."""
    member = Bridge(CFG).signature.members["core"]
    assert member.flow == In and member.signature.flip() == core_signature(CFG, snapshot_port=True)
    assert_rejects(lambda: connect_core(Module(), Bridge(CFG), Core(CFG)), ValueError,
                   "snapshot_port=True")


# --- host-side planning (no simulation) -------------------------------------------------------
def test_records():
    assert word_record(0x0123456789ABCDEF) == bytes.fromhex("01efcdab8967452301")
    assert beat_record(CFG, [-1, 2, -128, 127], True) == bytes([REC_LAST, 0xFF, 2, 0x80, 0x7F])
    assert beat_record(ODD, [1, 2, 3, 4, 5], False)[0] == REC_BEAT
    with pytest.raises(ValueError, match="word"):
        word_record(1 << 64)
    with pytest.raises(ValueError, match="lanes must have 4"):
        beat_record(CFG, [1, 2, 3], False)
    with pytest.raises(ValueError, match="200"):
        beat_record(CFG, [1, 2, 3, 200], False)


def test_split_keeps_the_meaning():
    rng = np.random.default_rng(6)
    program = (Program(CFG).read_host(0, rng.integers(-9, 9, (30, 4)))
               .write_host(0, 30).write_host(3, 5, from_acc=True).sync())
    split = split_program(program, 7)
    assert [isa.Op(s.op).name for s in split].count("WRITE_HOST") == 5 + 1
    a, b = Machine(CFG).run(program), Machine(CFG).run(split)
    np.testing.assert_array_equal(a.host_out[:-1], b.host_out[:-1])   # SYNC: retired differs
    assert b.retired == a.retired + 4
    with pytest.raises(ValueError, match="READ_COUNTERS.*cannot be split"):
        split_program(Program(CFG).read_counters(), 19)


def test_plan_attaches_data_where_the_core_takes_it():
    """Beats are attached by consumption, leftovers are not sent, a hang is refused."""
    p = Program(CFG)
    p.raw(isa.encode(isa.Op.READ_HOST, dst=0, n=3), np.ones((2, 4), dtype=int))  # short
    p.raw(isa.encode(isa.Op.NOP), np.ones((2, 4), dtype=int))    # the rest of the data
    plan = plan_program(p, max_payload=1024, max_reply=1024)
    payload = plan.frames[0].payload
    # READ_HOST takes 2 beats (last on the second ends it early); the NOP's are never read.
    assert plan.host_in_dropped == 2
    assert len(payload) == 9 + 2 * 5 + 9
    hang = Program(CFG).raw(isa.encode(isa.Op.READ_HOST, dst=0, n=3))
    with pytest.raises(ValueError, match="hang"):
        plan_program(hang, max_payload=1024, max_reply=1024)
    big = Program(CFG).read_host(0, np.zeros((40, 4), dtype=int)).write_host(0, 40)
    plan = plan_program(big, max_payload=64, max_reply=RESULT_HEADER_SIZE + 10 * 17)
    assert all(len(f.payload) <= 64 for f in plan.frames)
    assert all(f.beats <= 10 for f in plan.frames)
    assert sum(f.beats for f in plan.frames) == 40
    assert sum(f.mid_data for f in plan.frames) == 3       # 40 beats * 5 bytes over 64-byte frames


def test_packed_int4_records():
    """int4: a packed beat's nibbles become sign-extended lanes (bytes by hand: lanes 7, -8,
    -1, 1, 0 in 3 bytes), a byte-wide beat still works beside it (READ_QUANT's bytes), and on
    an int8 config a packed record is BAD_RECORD."""
    cfg = INT4
    rows = np.array([[7, -8, -1], [1, 0, 3]])
    program = Program(cfg).read_host(0, rows).write_host(0, 2).sync()
    packed = bytes([REC_PBEAT, 0x87, 0x1F, 0x00])              # lanes 7, -8, -1, 1, 0
    assert beat_record(cfg, [7, -8, -1, 1, 0], False) == packed
    assert len(packed) == packed_beat_record_size(cfg) == 4
    payload = (word_record(program.words()[0]) + packed
               + beat_record(cfg, [0, 0, 3, 0, 0], True, packed=False)
               + words(Program(cfg, program.steps[1:])))
    got = []

    async def script(ctx, host):
        got.append(await host(ctx, FrameType.PROGRAM, payload))

    simulate(cfg, script)
    reply = decode_reply(cfg, got[0][1])
    assert reply.flags == 0
    assert reply.host_out[:2, :3].tolist() == [[7, -8, -1], [0, 0, 3]]
    with pytest.raises(ValueError, match="packed=True"):
        beat_record(CFG, [1, 2, 3, 4], False, packed=True)
    bad = []

    async def script8(ctx, host):
        bad.append(await host(ctx, FrameType.PROGRAM, word_record(program.words()[0])
                              + bytes([REC_PBEAT, 0, 0])))

    simulate(CFG, script8)
    assert bad[0] == error_payload(BridgeError.BAD_RECORD, 9)
