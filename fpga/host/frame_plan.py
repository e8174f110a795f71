"""How a program goes to a board: WRITE_HOSTs split to fit a reply (``split_program``) and the
program packed into PROGRAM frames with each instruction's host-in data attached where the
core takes it (``plan_program``), both found with the golden model."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from tpugen.fpga.host.records import beat_record, word_record
from tpugen.fpga.protocol import (
    OVERHEAD,
    REC_WORD_SIZE,
    RESULT_HEADER_SIZE,
    beat_record_size,
    narrow_beat_size,
    reply_capacity,
    result_beat_size,
)
from tpugen.hdl import isa
from tpugen.sim.machine import Machine, ProgramHang
from tpugen.sim.machine import Result as MachineResult
from tpugen.sim.program import Program, Step

__all__ = ["split_program", "FramePlan", "RunPlan", "plan_program", "link_bytes"]


class _Tracer(Machine):
    """The golden model, noting per step the host-in beats it consumes and the host-out beats
    it sends."""

    def run(self, program, *, reset=True):
        self.consumed = [0] * len(program)
        self.emitted = [0] * len(program)
        return super().run(program, reset=reset)

    def _took(self, beats):
        self.consumed[self._index] += beats

    def _emit(self, beats, kind=0):
        super()._emit(beats, kind)
        self.emitted[self._index] += len(beats)


def _trace(program: Program, state: Machine | None = None) -> _Tracer:
    """The golden model's run of ``program``: from reset, or from a copy of ``state`` (a
    ``Machine`` that ran the programs before it, e.g. a resident model's load program)."""
    tracer = _Tracer(program.config)
    if state is not None:
        tracer.__dict__.update(copy.deepcopy(vars(state)))
    try:
        tracer.result = tracer.run(program, reset=state is None)
    except ProgramHang as e:
        raise ValueError(f"the program would hang the core: {e}") from None
    return tracer


def split_program(program: Program, capacity: int, state: Machine | None = None) -> Program:
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
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise ValueError(f"capacity must be a positive integer, not {capacity!r}")
    tracer = _trace(program, state)
    out = Program(program.config, isa_version=program.isa_version)
    for i, step in enumerate(program.steps):
        sent = tracer.emitted[i]
        if sent <= capacity:
            out.append(step)
            continue
        f = isa.decode(step.word)
        if f["op"] != isa.Op.WRITE_HOST:
            raise ValueError(f"step {i} ({isa.Op(f['op']).name}) sends {sent} host-out beats, "
                             f"more than the {capacity} a reply holds, and cannot be split")
        for off in range(0, f["n"], capacity):
            word = isa.encode(isa.Op.WRITE_HOST, f["flags"], src=f["src"] + off,
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
    state: Machine | None = None     # the golden model after the program (for the next run)


def plan_program(program: Program, *, max_payload: int, max_reply: int,
                 state: Machine | None = None) -> RunPlan:
    """Split ``program`` (``split_program``) and pack it into PROGRAM frames.

    Each instruction's word record is followed by the beat records of exactly the host-in beats
    the core consumes for it (found with the golden model, so that malformed data is attached
    where the core takes it); beats no instruction consumes are not sent (the core would never
    read them). A frame holds at most ``max_payload`` bytes; it may end inside an instruction's
    data. Host-out budget: the instructions sent since the last frame that ended outside any
    data send at most ``reply_capacity`` beats, so that no reply can overflow even when beats
    of one frame arrive in a later reply. ``state``: the golden model after the programs the
    core ran before (``None``: the program starts from reset). Raises ``ValueError`` for a
    program that would hang the core (not enough host-in data) or does not fit.
    """
    if not isinstance(program, Program):
        raise TypeError(f"program must be a Program, not {program!r}")
    cfg = program.config
    for name, v in (("max_payload", max_payload), ("max_reply", max_reply)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    cap = reply_capacity(cfg, max_reply)
    if cap < 1:
        raise ValueError(f"max_reply {max_reply} does not hold one host-out beat")
    least = max(REC_WORD_SIZE, beat_record_size(cfg))
    if max_payload < least:
        raise ValueError(f"max_payload must hold a record ({least} bytes), not {max_payload}")
    split = split_program(program, cap, state)
    tracer = _trace(split, state)
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
        if cur and (len(cur) + REC_WORD_SIZE > max_payload or pending + sent > cap):
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
    return RunPlan(split, frames, tracer.result, cap, host_in_dropped=len(data) - pos,
                   state=tracer)


def link_bytes(plan: RunPlan, *, reset: bool = True) -> tuple[int, int]:
    """The bytes a ``RunPlan`` puts on the wire, ``(to the board, from the board)``: its
    PROGRAM frames and their RESULT replies (each beat narrow when every lane fits 8 bits, as
    the board sends it, from the golden model's beats), and with ``reset`` the CONTROL frame
    and reply before them (``fpga.host.board_link.BoardLink.run``)."""
    cfg = plan.program.config
    beats = plan.expected.host_out
    narrow = ((beats >= -128) & (beats < 128)).all(axis=1)
    sizes = np.where(narrow, narrow_beat_size(cfg), result_beat_size(cfg))
    to = sum(OVERHEAD + len(f.payload) for f in plan.frames)
    back = len(plan.frames) * (OVERHEAD + RESULT_HEADER_SIZE) + int(sizes.sum())
    if reset:
        to += OVERHEAD + 1
        back += OVERHEAD + RESULT_HEADER_SIZE
    return to, back
