"""Running programs on a board (or ``fpga.simboard``) over the UART link: the host side of
``fpga.bridge``.

    from tpugen.fpga.board import BoardLink
    with BoardLink("/dev/ttyUSB1", 3_000_000) as board:
        board.identify(config)               # raises ConfigMismatch naming what differs
        result = board.run(program)          # a sim.backends.RunResult, plus link figures

``BoardBackend`` is the same as a ``sim.backends.Backend`` (results checked against the golden
model). The formats (records, RESULT header, CONTROL) are documented in ``fpga.protocol``.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

import numpy as np
from tpugen.hdl import isa
from tpugen.hdl.config import OPERAND_TYPES, Config
from tpugen.hdl.isa import decode, encode
from tpugen.hdl.layouts import host_lanes
from tpugen.sim.backends import Backend, RunResult
from tpugen.sim.machine import Machine, ProgramHang
from tpugen.sim.machine import Result as MachineResult
from tpugen.sim.program import Program, Step

from .bridge import acc_bytes, operand_bytes, reply_capacity, result_beat_size
from .host import Link, LinkError, RemoteError
from .protocol import (
    BRIDGE_REASONS,
    CTRL_CLEAR_COUNTERS,
    CTRL_CLEAR_ERROR,
    CTRL_RESET,
    OVERHEAD,
    PROTOCOL_VERSION,
    REC_BEAT,
    REC_LAST,
    REC_WORD,
    RESULT_BUSY,
    RESULT_ERROR,
    RESULT_HEADER_FORMAT,
    RESULT_HEADER_SIZE,
    RESULT_OVERFLOW,
    RESULT_WAITING,
    BridgeError,
    FrameType,
    decode_id,
)

__all__ = ["word_record", "beat_record", "Reply", "decode_reply", "FramePlan", "RunPlan",
           "split_program", "plan_program", "ConfigMismatch", "BridgeRejected", "BoardRunResult",
           "BoardLink", "BoardBackend"]

_COUNTERS = [c.name.lower() for c in isa.Counter]


# --- records ----------------------------------------------------------------------------------
def word_record(word: int) -> bytes:
    """The REC_WORD record of a 64-bit instruction word."""
    if not isinstance(word, int) or isinstance(word, bool) or not 0 <= word < 1 << 64:
        raise ValueError(f"word must be a 64-bit unsigned integer, not {word!r}")
    return bytes([REC_WORD]) + word.to_bytes(8, "little")


def beat_record(config: Config, lanes, last: bool) -> bytes:
    """The REC_BEAT (or REC_LAST) record of one host-in beat of ``max(R, C)`` operand lanes."""
    ob = operand_bytes(config)
    ot = config.operand_type
    values = [int(v) for v in lanes]
    if len(values) != host_lanes(config):
        raise ValueError(f"lanes must have {host_lanes(config)} values, not {len(values)}")
    for v in values:
        if not ot.min <= v <= ot.max:
            raise ValueError(f"lane value {v} is not a {config.operand} value")
    out = bytearray([REC_LAST if last else REC_BEAT])
    for v in values:
        out += (v & ((1 << (8 * ob)) - 1)).to_bytes(ob, "little")
    return bytes(out)


# --- replies ----------------------------------------------------------------------------------
@dataclass
class Reply:
    """A decoded RESULT (or CONTROL_REPLY) payload."""

    flags: int
    cause: int
    dropped: int
    counters: dict
    host_out: np.ndarray    # (beats, C) int64
    last: np.ndarray        # (beats,) bool

    @property
    def overflow(self) -> bool:
        return bool(self.flags & RESULT_OVERFLOW)

    @property
    def waiting(self) -> bool:
        return bool(self.flags & RESULT_WAITING)

    @property
    def busy(self) -> bool:
        return bool(self.flags & RESULT_BUSY)

    @property
    def error(self) -> bool:
        return bool(self.flags & RESULT_ERROR)


def decode_reply(config: Config | None, payload: bytes) -> Reply:
    """Parse a RESULT / CONTROL_REPLY payload (``fpga.protocol`` has the layout); ``config``
    gives the beats' shape (it may be None for a reply without beats)."""
    payload = bytes(payload)
    if len(payload) < RESULT_HEADER_SIZE:
        raise LinkError(f"a RESULT payload needs the {RESULT_HEADER_SIZE}-byte header, got "
                        f"{len(payload)} bytes")
    flags, cause, beats, dropped, *counters = struct.unpack_from(RESULT_HEADER_FORMAT, payload)
    if config is None:
        if beats or len(payload) != RESULT_HEADER_SIZE:
            raise LinkError(f"expected a reply without beats, got {beats} beats")
        return Reply(flags=flags, cause=cause, dropped=dropped,
                     counters=dict(zip(_COUNTERS, counters, strict=True)),
                     host_out=np.zeros((0, 0), dtype=np.int64), last=np.zeros(0, dtype=bool))
    size = result_beat_size(config)
    body = payload[RESULT_HEADER_SIZE:]
    if len(body) != beats * size:
        raise LinkError(f"a RESULT with {beats} beats of {size} bytes needs "
                        f"{RESULT_HEADER_SIZE + beats * size} bytes, got {len(payload)}")
    C, oa = config.cols, acc_bytes(config)
    raw = np.frombuffer(body, dtype=np.uint8).reshape(beats, size)
    lanes = raw[:, :C * oa].reshape(beats, C, oa).astype(np.uint64)
    value = np.zeros((beats, C), dtype=np.uint64)
    for k in range(oa):
        value |= lanes[:, :, k] << np.uint64(8 * k)
    bits = 8 * oa
    if bits == 64:
        host_out = value.view(np.int64)
    else:
        host_out = value.astype(np.int64)
        host_out = np.where(host_out >= 1 << (bits - 1), host_out - (1 << bits), host_out)
    return Reply(flags=flags, cause=cause, dropped=dropped,
                 counters=dict(zip(_COUNTERS, counters, strict=True)),
                 host_out=host_out.astype(np.int64), last=(raw[:, -1] & 1).astype(bool))


# --- planning ---------------------------------------------------------------------------------
class _Tracer(Machine):
    """The golden model, noting per step the host-in beats it consumes and the host-out beats
    it sends."""

    def run(self, program, *, reset=True):
        self.consumed = [0] * len(program)
        self.emitted = [0] * len(program)
        return super().run(program, reset=reset)

    def _next_beat(self, what):
        beat = super()._next_beat(what)
        self.consumed[self._index] += 1
        return beat

    def _emit(self, beats, kind=0):
        super()._emit(beats, kind)
        self.emitted[self._index] += len(beats)


def _trace(program: Program) -> _Tracer:
    tracer = _Tracer(program.config)
    try:
        tracer.result = tracer.run(program)
    except ProgramHang as e:
        raise ValueError(f"the program would hang the core: {e}") from None
    return tracer


def split_program(program: Program, capacity: int) -> Program:
    """``program`` with every WRITE_HOST that sends more than ``capacity`` beats replaced by
    WRITE_HOSTs of the same kind on consecutive row ranges of at most ``capacity`` rows.

    The result is semantically identical (same host-out stream, same buffers, same error),
    except that the retired count grows by one per extra instruction (which the SYNC and
    READ_COUNTERS beats after a split report). Raises ``ValueError``
    for an instruction that sends more than ``capacity`` beats and cannot be split (SYNC,
    READ_COUNTERS).
    """
    if not isinstance(program, Program):
        raise TypeError(f"program must be a Program, not {program!r}")
    if not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity must be a positive integer, not {capacity!r}")
    tracer = _trace(program)
    out = Program(program.config, isa_version=program.isa_version)
    for i, step in enumerate(program.steps):
        sent = tracer.emitted[i]
        if sent <= capacity:
            out.append(step)
            continue
        f = decode(step.word)
        if f["op"] != isa.Op.WRITE_HOST:
            raise ValueError(f"step {i} ({isa.Op(f['op']).name}) sends {sent} host-out beats, "
                             f"more than the {capacity} a reply holds, and cannot be split")
        for off in range(0, f["n"], capacity):
            word = encode(isa.Op.WRITE_HOST, f["flags"], src=f["src"] + off,
                          n=min(capacity, f["n"] - off), part=f["part"])
            out.append(Step(word, step.data, step.last))
            step = Step(word)  # data attached to the original step travels with the first
    return out


@dataclass
class FramePlan:
    """One PROGRAM frame: its payload, the host-out beats its instructions send, and whether
    it ends inside an instruction's host-in data (the reply then has RESULT_WAITING)."""

    payload: bytes
    beats: int
    mid_data: bool


@dataclass
class RunPlan:
    """How a program goes to the board: the (possibly split) program, its frames, and the
    golden model's result for it."""

    program: Program
    frames: list
    expected: MachineResult
    capacity: int
    host_in_dropped: int = 0


def plan_program(program: Program, *, max_payload: int, max_reply: int) -> RunPlan:
    """Split ``program`` (``split_program``) and pack it into PROGRAM frames.

    Each instruction's word record is followed by the beat records of exactly the host-in beats
    the core consumes for it (found with the golden model, so that malformed data is attached
    where the core takes it); beats no instruction consumes are not sent (the core would never
    read them). A frame holds at most ``max_payload`` bytes; it may end inside an instruction's
    data. Host-out budget: the instructions sent since the last frame that ended outside any
    data send at most ``reply_capacity`` beats, so that no reply can overflow even when beats
    of one frame arrive in a later reply. Raises ``ValueError`` for a program that would hang
    the core (not enough host-in data) or does not fit.
    """
    cfg = program.config
    for name, v in (("max_payload", max_payload), ("max_reply", max_reply)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    cap = reply_capacity(cfg, max_reply)
    if cap < 1:
        raise ValueError(f"max_reply {max_reply} does not hold one host-out beat")
    rec_beat = 1 + host_lanes(cfg) * operand_bytes(cfg)
    if max_payload < max(9, rec_beat):
        raise ValueError(f"max_payload must hold a record ({max(9, rec_beat)} bytes), "
                         f"not {max_payload}")
    split = split_program(program, cap)
    tracer = _trace(split)
    data, last = split.host_in_beats()
    frames = []
    cur = bytearray()
    cur_beats = 0
    pending = 0
    pos = 0

    def close(mid_data):
        nonlocal cur, cur_beats
        frames.append(FramePlan(bytes(cur), cur_beats, mid_data))
        cur, cur_beats = bytearray(), 0

    for i, step in enumerate(split.steps):
        sent = tracer.emitted[i]
        if cur and (len(cur) + 9 > max_payload or pending + sent > cap):
            close(False)
            pending = 0
        cur += word_record(step.word)
        cur_beats += sent
        pending += sent
        for b in range(pos, pos + tracer.consumed[i]):
            rec = beat_record(cfg, data[b], bool(last[b]))
            if len(cur) + len(rec) > max_payload:
                close(True)
            cur += rec
        pos += tracer.consumed[i]
    if cur or not frames:
        close(False)
    return RunPlan(split, frames, tracer.result, cap, host_in_dropped=len(data) - pos)


# --- the link ---------------------------------------------------------------------------------
class ConfigMismatch(ValueError):
    """The board's accelerator is not the one the host expects; the message names each field
    that differs."""


class BridgeRejected(RemoteError):
    """The bridge answered ERROR with one of its codes (``protocol.BridgeError``); ``offset``
    is the payload offset of the record it stopped at."""

    def __init__(self, code: int, frame_type: int = 0, detail: bytes = b""):
        super().__init__(code, frame_type, detail)
        self.offset = int.from_bytes(detail[:2], "little") if len(detail) >= 2 else None
        self.reason = BRIDGE_REASONS.get(code, self.reason)
        at = f" at payload offset {self.offset}" if self.offset is not None else ""
        self.args = (f"board bridge replied ERROR {BridgeError(code).name}: {self.reason}{at} "
                     f"(frame type {frame_type:#04x})",)


@dataclass
class BoardRunResult(RunResult):
    """A ``RunResult`` from a board, with what the link did.

    ``cycles`` is the board's cycle counter from the core reset before the run to the last
    reply, so it includes the time the core waited for frames over the link. ``wall_time``:
    seconds of the run (reset to last reply); ``link_bytes``: bytes on the wire in both
    directions (frames with headers and CRCs); ``frames``: PROGRAM frames sent; ``program``:
    the program as run (WRITE_HOSTs split, see ``split_program``); ``expected``: the golden
    model's result for it.
    """

    wall_time: float = 0.0
    link_bytes: int = 0
    frames: int = 0
    program: Program | None = None
    expected: MachineResult | None = field(default=None, repr=False)


class BoardLink:
    """Runs programs on a board over a serial port (``fpga.host.Link``).

    ``port`` is a device path, a pty path (``fpga.simboard``) or a pyserial URL; ``baud`` the
    bit rate; ``timeout`` the seconds to wait for each reply.
    """

    def __init__(self, port, baud: int = 3_000_000, timeout: float = 10.0):
        self.link = Link(port, baud, timeout)
        self.info: dict | None = None
        self.link_bytes = 0

    def close(self):
        self.link.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, ftype: int, payload: bytes = b"") -> bytes:
        """Send one request frame and return its reply's payload (``fpga.host.Link.request``;
        the bridge's ERROR replies raise ``BridgeRejected``). Counts ``link_bytes``."""
        self.link_bytes += OVERHEAD + len(payload)
        try:
            _, reply = self.link.request(ftype, payload)
        except RemoteError as e:
            self.link_bytes += OVERHEAD + 2 + len(e.detail)
            if e.code in BridgeError.__members__.values():
                raise BridgeRejected(e.code, e.frame_type, e.detail) from None
            raise
        self.link_bytes += OVERHEAD + len(reply)
        return reply

    def identify(self, config: Config | None = None) -> dict:
        """The board's ID (``protocol.decode_id``); with ``config``, check that the board's
        accelerator is that one (``ConfigMismatch`` names every field that differs)."""
        payload = self.request(FrameType.ID)
        try:
            info = decode_id(payload)
        except ValueError as e:
            raise LinkError(f"bad ID reply: {e}") from None
        self.info = self.link.info = info
        self.link.max_payload = info["max_payload"]
        if config is not None:
            self.check(config)
        return info

    def check(self, config: Config) -> None:
        """Raise ``ConfigMismatch`` unless the identified board implements ``config``."""
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        info = self.info if self.info is not None else self.identify()
        if "rows" not in info:
            raise ConfigMismatch("the board's ID has no accelerator part (is it a tpugen "
                                 "board?)")
        want = {"protocol_version": PROTOCOL_VERSION, "isa_version": isa.ISA_VERSION,
                "rows": config.rows, "cols": config.cols, "operand": config.operand,
                "acc_width": config.acc_width, "weight_fifo_depth": config.weight_fifo_depth,
                "ub_rows": config.ub_rows, "acc_rows": config.acc_rows,
                "act_lanes": config.act_lanes}
        diff = [f"{k}: board {info.get(k)!r}, expected {v!r}" for k, v in want.items()
                if info.get(k) != v]
        if diff:
            raise ConfigMismatch(f"the board does not implement config {config.name}: "
                                 + "; ".join(diff))
        if info["operand"] not in OPERAND_TYPES:
            raise ConfigMismatch(f"the board's operand type {info['operand']!r} is unknown")

    def control(self, *, reset: bool = False, clear_error: bool = False,
                clear_counters: bool = False) -> Reply:
        """Send a CONTROL frame (core reset first, then the clears); returns the status after
        it (a ``Reply`` without beats)."""
        bits = ((CTRL_RESET if reset else 0) | (CTRL_CLEAR_ERROR if clear_error else 0)
                | (CTRL_CLEAR_COUNTERS if clear_counters else 0))
        return decode_reply(None, self.request(FrameType.CONTROL, bytes([bits])))

    def send_program_frame(self, config: Config, payload: bytes) -> Reply:
        """Send one PROGRAM frame and decode its RESULT."""
        return decode_reply(config, self.request(FrameType.PROGRAM, payload))

    def run(self, program: Program) -> BoardRunResult:
        """Run ``program`` from a freshly reset core and return its host-out stream.

        The core is reset (engines, counters, error; the buffers keep their contents, so the
        program must not read rows it did not write) with a CONTROL frame, then the program
        goes in PROGRAM frames as ``plan_program`` packs them: WRITE_HOSTs too big for one
        reply are split into several on smaller row ranges, which is semantically identical
        except that the ``retired`` counter counts the extra instructions. The replies'
        host-out beats are concatenated. Raises ``LinkError`` if a reply overflowed or the
        board's core waited for host-in data where the golden model says it would not (or the
        other way round).
        """
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, not {program!r}")
        cfg = program.config
        if self.info is None:
            self.identify()
        self.check(cfg)
        plan = plan_program(program, max_payload=self.info["max_payload"],
                            max_reply=self.info["max_reply"])
        start_bytes = self.link_bytes
        t0 = time.monotonic()
        reply = self.control(reset=True, clear_error=True, clear_counters=True)
        outs, lasts = [], []
        for k, frame in enumerate(plan.frames):
            reply = self.send_program_frame(cfg, frame.payload)
            if reply.overflow:
                raise LinkError(f"frame {k}: the reply overflowed ({reply.dropped} host-out "
                                f"beats dropped)")
            if reply.waiting != frame.mid_data:
                raise LinkError(
                    f"frame {k}: the board's core {'waits' if reply.waiting else 'does not wait'}"
                    f" for host-in data after the frame, the golden model says it "
                    f"{'does' if frame.mid_data else 'does not'}")
            outs.append(reply.host_out)
            lasts.append(reply.last)
        wall = time.monotonic() - t0
        host_out = np.concatenate(outs) if outs else np.zeros((0, cfg.cols), dtype=np.int64)
        last = np.concatenate(lasts) if lasts else np.zeros(0, dtype=bool)
        return BoardRunResult(host_out=host_out, last=last, error=reply.cause,
                              counters=dict(reply.counters), cycles=reply.counters["cycles"],
                              wall_time=wall, link_bytes=self.link_bytes - start_bytes,
                              frames=len(plan.frames), program=plan.program,
                              expected=plan.expected)


class BoardBackend(Backend):
    """A board (or ``fpga.simboard``) as a ``sim.backends.Backend``: each program runs with
    ``BoardLink.run`` and is checked against the golden model on the program as run (split
    WRITE_HOSTs; see ``split_program``): host-out beats and ``last`` flags, the error cause and
    the retired count, into ``mismatches``."""

    name = "board"

    def __init__(self, config: Config, port, baud: int = 3_000_000, *, timeout: float = 10.0):
        super().__init__(config)
        self.port, self.baud, self.timeout = port, baud, timeout
        self._board: BoardLink | None = None

    @property
    def board(self) -> BoardLink:
        """The open ``BoardLink`` (opened and identified against the config on first use)."""
        if self._board is None:
            board = BoardLink(self.port, self.baud, self.timeout)
            try:
                board.identify(self.config)
            except BaseException:
                board.close()
                raise
            self._board = board
        return self._board

    def close(self):
        if self._board is not None:
            self._board.close()
            self._board = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run_many(self, programs, *, waves=None, **kw) -> list:
        """``kw`` (``stalls``, ``seed``, ...) have no meaning on a board and are ignored."""
        if waves:
            raise ValueError("waves: a board has no waveforms (use a simulator backend)")
        out = []
        for p in programs:
            if not isinstance(p, Program):
                raise TypeError(f"programs must be Programs, not {p!r}")
            if p.config != self.config:
                raise ValueError(f"program is for config {p.config.name}, the backend is for "
                                 f"{self.config.name}")
            r = self.board.run(p)
            exp = r.expected
            problems = exp.mismatches(r.host_out, r.last)
            if r.error != int(exp.error):
                problems.append(f"error cause {r.error}, expected {int(exp.error)}")
            if r.counters["retired"] != exp.retired:
                problems.append(f"retired {r.counters['retired']}, expected {exp.retired}")
            r.mismatches = problems
            out.append(r)
        return out
