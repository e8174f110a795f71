"""Resident models: a program cut into a load program (weights, parameter sets and the program
itself into the core's memories, once) and a run program (the inputs, a CHECK_TAG and a CALL).

``make_resident(program)`` takes any program (a compiled GEMM, a chain, a network's chain) and
returns a ``ResidentProgram``:

* every READ_WEIGHTS becomes a LOAD_WEIGHTS of the same tiles from the weight memory (the tiles
  stored once, in program order, duplicates kept apart: a tile is 0.0x of a model's bytes),
  while they fit ``Config.weight_tiles``; the rest stay READ_WEIGHTS (streamed);
* the READ_QUANTs' parameter sets move into the load program when all the distinct sets the
  program loads fit ``Config.quant_sets`` (each ACTIVATE then names its set's slot), else they
  stay in the run;
* the resulting instruction words go into the program memory (``Config.program_words``) and the
  run program is ``CHECK_TAG tag; CALL 0, n`` with the host-in data of the stored program's
  host-data instructions (its inputs) attached to the CALL; a program too long for the program
  memory runs as plain instructions after its CHECK_TAG. ``call`` is the run without the
  CHECK_TAG, for a host that knows what the core holds.

The load program starts with ``SET_TAG 0`` (nothing loaded) and ends with ``SET_TAG tag``, so a
cut-off load leaves no tag and the run's CHECK_TAG fails (WRONG_MODEL), as it does after a
reset or another model's load. The tag is a hash of the load program (56 bits, never 0).
``load + run`` (``combined``) gives the original program's host-out stream.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from tpugen.hdl import isa
from tpugen.sim.program import Program, Step

__all__ = ["ResidentProgram", "make_resident"]

Op, Flag = isa.Op, isa.Flag


@dataclass
class ResidentProgram:
    """A program as a load program and a run program (module docstring).

    ``call``: the run without its CHECK_TAG (for a host that knows the core holds the model:
    it loaded it, or a checked run passed, since the core's last reset); ``tag``: the model tag;
    ``resident_tiles`` / ``streamed_tiles``: weight tiles held in the
    weight memory / still sent by the run; ``resident_sets``: parameter sets loaded once;
    ``stored_words``: words in the program memory (0: the run sends its instructions)."""

    load: Program
    run: Program
    call: Program
    tag: int
    resident_tiles: int
    streamed_tiles: int
    resident_sets: int
    stored_words: int

    @property
    def combined(self) -> Program:
        """Load then run, as one program (what a simulator runs from reset)."""
        return Program(self.load.config, self.load.steps).extend(self.run.steps)

    def weight_bytes(self, resident: bool = True) -> int:
        """Bytes of the weight tiles held in the weight memory (or, ``resident=False``, still
        streamed by every run)."""
        c = self.load.config
        tiles = self.resident_tiles if resident else self.streamed_tiles
        return tiles * c.rows * c.cols * c.operand_width // 8


def _tag(load: Program) -> int:
    h = hashlib.blake2b(digest_size=7)
    for step in load.steps:
        h.update(step.word.to_bytes(8, "little"))
        if step.data is not None:
            h.update(np.ascontiguousarray(step.data, dtype=np.int64).tobytes())
    return int.from_bytes(h.digest(), "little") or 1


def _quant_slots(program: Program, free: range) -> dict | None:
    """The READ_QUANT sets as ``{bytes of a set's beats: slot}`` (slots from ``free``) when all
    distinct ones fit, else None."""
    keys = {}
    for step in program.steps:
        f = step.fields
        if f["op"] == Op.READ_QUANT:
            for k in range(f["n"]):
                keys.setdefault(step.data[k * isa.QUANT_BEATS:(k + 1) * isa.QUANT_BEATS]
                                .tobytes(), None)
    if len(keys) > len(free):
        return None
    return {key: free[i] for i, key in enumerate(keys)}


def make_resident(program: Program, *, tile_base: int = 0, word_base: int = 0,
                  quant_free: range | None = None) -> ResidentProgram:
    """``program`` as a load program and a run program (module docstring), its tiles from
    weight-memory tile ``tile_base`` on, its words from program-memory word ``word_base`` on,
    its parameter sets (when they all fit) in the sets ``quant_free`` (default: all), so that
    several models can stay loaded side by side. Raises ``ValueError`` for a config without a
    weight memory or a program memory, or a program that already uses them (PROGRAM,
    LOAD_WEIGHTS, STORE_WEIGHTS)."""
    if not isinstance(program, Program):
        raise TypeError(f"program must be a Program, not {program!r}")
    cfg = program.config
    if cfg.weight_tiles == 0 and cfg.program_words == 0:
        raise ValueError(f"config {cfg.name} has no weight memory and no program memory "
                         f"(Config.weight_tiles, program_words)")
    load, body = Program(cfg).tag(0), Program(cfg)
    slots = _quant_slots(program, range(cfg.quant_sets) if quant_free is None else quant_free)
    set_of = {}                  # the program's set number -> slot, as READ_QUANTs go
    if slots:
        for key, slot in slots.items():
            beats = np.frombuffer(key, dtype=np.int64).reshape(isa.QUANT_BEATS, -1)
            load.raw(isa.encode(Op.READ_QUANT, dst=slot, n=1), beats)
    next_tile, resident, streamed = tile_base, 0, 0
    for step in program.steps:
        f = step.fields
        op = f["op"]
        if op in (Op.PROGRAM, Op.LOAD_WEIGHTS, Op.STORE_WEIGHTS):
            raise ValueError(f"program already uses the core's memories ({Op(op).name})")
        if op == Op.READ_WEIGHTS and isa.static_cause(f, cfg) == isa.Cause.NONE and (
                next_tile + f["n"] <= cfg.weight_tiles):
            tiles = step.data[:f["n"] * cfg.rows, :cfg.cols].reshape(f["n"], cfg.rows, cfg.cols)
            load.store_weights(next_tile, tiles)
            body.load_weights(next_tile, f["n"])
            next_tile += f["n"]
            resident += f["n"]
            continue
        if op == Op.READ_WEIGHTS:
            streamed += f["n"]
        if slots is not None and op == Op.READ_QUANT:
            for k in range(f["n"]):
                key = step.data[k * isa.QUANT_BEATS:(k + 1) * isa.QUANT_BEATS].tobytes()
                set_of[f["dst"] + k] = slots[key]
            continue
        if slots is not None and op == Op.ACTIVATE:
            word = isa.encode(Op.ACTIVATE, set_of.get(f["flags"], f["flags"]), src=f["src"],
                              dst=f["dst"], n=f["n"], part=f["part"])
            body.append(Step(word, step.data, step.last))
            continue
        body.append(step)
    words = len(body)
    stored = 0 < words <= cfg.program_words - word_base
    if stored:
        load.store_program(word_base, Program(cfg, [Step(s.word) for s in body.steps]))
    tag = _tag(load)
    load.tag(tag)
    call = Program(cfg)
    if stored:
        data, last = body.host_in_beats()
        call.raw(isa.encode(Op.PROGRAM, src=word_base, n=words), data if len(data) else None,
                 last if len(data) else None)
    else:
        call.extend(body.steps)
    run = Program(cfg).tag(tag, check=True).extend(call.steps)
    return ResidentProgram(load, run, call, tag, resident, streamed, len(slots or ()),
                           words if stored else 0)
