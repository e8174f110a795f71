"""Programs for the accelerator core: instruction words plus their host-in data.

A ``Program`` is a list of ``Step`` s for one ``Config``. A step is one 64-bit instruction word
(``hdl.isa``) and, optionally, the host-in beats that travel with it. The host-in stream the core
sees is the concatenation of every step's beats in step order (``Program.host_in_beats``); the
core does not know which step a beat was attached to, so a malformed program (a raw word with
too few or too many beats) is modelled exactly like the hardware sees it.

Host-in beats carry ``max(R, C)`` operand lanes (int8 values) and a ``last`` flag.

Builder helpers (``read_host``, ``matmul``, ...) check only what the encoding needs (field
widths, operand ranges, array shapes); buffer bounds and the weight FIFO are *not* checked here,
so the builders can make every erroneous instruction the machine must report (``sim.machine``).

File format (``save`` / ``Program.load``), JSON::

    {"format": "tpugen-program", "version": 1, "isa_version": <hdl.isa.ISA_VERSION>,
     "config": <Config.to_dict()>,
     "steps": [{"word": "0x<16 hex digits>", "asm": "<text, ignored on load>",
                "beats": <int>, "data": "<base64 of beats x lanes int8, row-major>",
                "last": [<indices of beats with last=1>]}, ...]}

``beats``/``data``/``last`` are absent for a step without host-in data.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.layouts import host_lanes

from .quant_beats import set_beats
from .requant import QuantParams

__all__ = ["FORMAT", "FORMAT_VERSION", "Step", "Program", "disassemble"]

FORMAT = "tpugen-program"
FORMAT_VERSION = 1


def disassemble(word: int) -> str:
    """One line of text for an instruction word: the op's name (``OP<n>`` for an opcode not in
    ``isa.Op``), the fields it uses (``isa.OpSpec.fields``), the fields it ignores when they are
    not 0, and its flags (the ones it uses by name, other bits in hex)."""
    f = isa.decode(word)
    op = f["op"]
    spec = isa.OPS.get(op)
    body = [b.name for b in isa.body_fields(op)]
    used = body if spec is None else spec.fields
    words = [f"OP{op}" if spec is None else spec.op.name]
    words += [f"{k}={f[k]}" for k in body if k in used or f[k]]
    if spec is not None and any(a.field == "flags" for a in spec.accesses):
        return " ".join([*words, f"qset={f['flags']}"])    # the flags are a set number
    flags, names = f["flags"], []
    for name in () if spec is None else spec.flags:
        if flags & isa.Flag[name]:
            names.append(name)
            flags &= ~int(isa.Flag[name])
    if flags:
        names.append(f"{flags:#x}")
    if names:
        words.append("|".join(names))
    return " ".join(words)


@dataclass(frozen=True, eq=False)
class Step:
    """One instruction word and the host-in beats sent with it.

    ``data`` is ``None`` or an int64 array of shape ``(beats, max(R, C))`` holding int8 values;
    ``last`` is then a bool array of shape ``(beats,)``. ``fields`` is the decoded word
    (``isa.decode``: ``op``, ``flags``, ``src``, ``dst``, ``n``, ``part``).
    """

    word: int
    data: np.ndarray | None = None
    last: np.ndarray | None = None

    def _decoded(self) -> dict:
        """``isa.decode(self.word)``, decoded once (kept in the instance's ``__dict__``)."""
        fields = self.__dict__.get("_fields")
        if fields is None:
            fields = self.__dict__["_fields"] = isa.decode(self.word)
        return fields

    @property
    def fields(self) -> dict:
        return dict(self._decoded())

    @property
    def op(self) -> int:
        return self._decoded()["op"]

    @property
    def beats(self) -> int:
        return 0 if self.data is None else len(self.data)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Step):
            return NotImplemented
        if self.word != other.word or (self.data is None) != (other.data is None):
            return False
        if self.data is None:
            return True
        return (np.array_equal(self.data, other.data)
                and np.array_equal(self.last, other.last))

    __hash__ = None

    def __str__(self) -> str:
        text = disassemble(self.word)
        if self.data is not None:
            lasts = np.flatnonzero(self.last).tolist()
            text += f"  [{self.beats} beats, last at {lasts}]"
        return text


def _int_array(name: str, value, ndim: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(f"{name} must be an integer array, not dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, not shape {arr.shape}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < -128 or arr.max() > 127):
        raise ValueError(f"{name} values must be int8 (-128..127)")
    return arr


class Program:
    """An instruction sequence for one ``Config`` (see the module docstring).

    Builders append one step each and return ``self``. They validate encodings and shapes,
    not buffer bounds.
    """

    def __init__(self, config: Config, steps=(), isa_version: int = isa.ISA_VERSION):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        self.isa_version = isa_version
        self.steps: list[Step] = []
        for step in steps:
            self.append(step)

    # --- container -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __getitem__(self, i):
        return self.steps[i]

    def __eq__(self, other) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return (self.config == other.config and self.isa_version == other.isa_version
                and self.steps == other.steps)

    __hash__ = None

    def __repr__(self) -> str:
        return f"Program({self.config.name}, {len(self.steps)} steps)"

    @property
    def lanes(self) -> int:
        return host_lanes(self.config)

    def append(self, step: Step) -> Program:
        if not isinstance(step, Step):
            raise TypeError(f"step must be a Step, not {step!r}")
        if step.data is not None:
            if step.data.ndim != 2 or step.data.shape[1] != self.lanes:
                raise ValueError(f"step data must have shape (beats, {self.lanes}), "
                                 f"not {step.data.shape}")
            if step.last is None or step.last.shape != (len(step.data),):
                raise ValueError("step last flags must have one entry per beat")
            if step.data.size and (step.data.min() < -128 or step.data.max() > 127):
                raise ValueError("step data values must be int8 (-128..127)")
        self.steps.append(step)
        return self

    def extend(self, steps) -> Program:
        for step in steps:
            self.append(step)
        return self

    # --- builders --------------------------------------------------------------------------
    def _mem(self, op, flags=0, *, src=0, dst=0, n=0, part=0, data=None, last=None):
        word = isa.encode(op, flags, src=src, dst=dst, n=n, part=part)
        return self.append(Step(word, data, last))

    def _beats(self, rows: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        data = np.zeros((len(rows), self.lanes), dtype=np.int64)
        data[:, :width] = rows
        last = np.zeros(len(rows), dtype=bool)
        if len(rows):
            last[-1] = True
        return data, last

    def read_host(self, dst: int, rows) -> Program:
        """READ_HOST: ``rows`` (n x k, k <= R, int8; zero-padded to R lanes) into UB rows
        ``dst..dst+n-1``."""
        rows = _int_array("rows", rows, 2)
        r = self.config.rows
        if rows.shape[1] > r:
            raise ValueError(f"rows must have at most R={r} columns, not {rows.shape[1]}")
        padded = np.zeros((len(rows), r), dtype=np.int64)
        padded[:, :rows.shape[1]] = rows
        data, last = self._beats(padded, r)
        return self._mem(isa.Op.READ_HOST, dst=dst, n=len(rows), data=data, last=last)

    def read_weights(self, tiles) -> Program:
        """READ_WEIGHTS: ``tiles`` (n x R x C, or one R x C tile, int8) into the weight FIFO."""
        tiles = np.asarray(tiles)
        if tiles.ndim == 2:
            tiles = tiles[None]
        tiles = _int_array("tiles", tiles, 3)
        r, c = self.config.rows, self.config.cols
        if tiles.shape[1:] != (r, c):
            raise ValueError(f"tiles must have shape (n, {r}, {c}), not {tiles.shape}")
        data, last = self._beats(tiles.reshape(-1, c), c)
        return self._mem(isa.Op.READ_WEIGHTS, n=len(tiles), data=data, last=last)

    def matmul(self, src: int, dst: int, n: int, *, accumulate: bool = False,
               new_tile: bool = True) -> Program:
        """MATMUL: UB rows ``src..`` times the current tile into ACC rows ``dst..``."""
        flags = (isa.Flag.ACCUMULATE if accumulate else 0) | (isa.Flag.NEW_TILE if new_tile else 0)
        return self._mem(isa.Op.MATMUL, flags, src=src, dst=dst, n=n)

    def activate(self, src: int, dst: int, n: int, part: int = 0, qset: int = 0) -> Program:
        """ACTIVATE: ACC rows ``src..`` requantized with parameter set ``qset`` into UB rows
        ``dst..`` (lanes part*R..)."""
        return self._mem(isa.Op.ACTIVATE, qset, src=src, dst=dst, n=n, part=part)

    def write_host(self, src: int, n: int, *, from_acc: bool = False, part: int = 0) -> Program:
        """WRITE_HOST: ``n`` beats from UB rows ``src..`` (lanes part*C..) or ACC rows."""
        flags = isa.Flag.FROM_ACC if from_acc else 0
        return self._mem(isa.Op.WRITE_HOST, flags, src=src, n=n, part=part)

    def read_quant(self, dst: int, sets) -> Program:
        """READ_QUANT: ``sets`` (``QuantParams`` of C channels each, or one) into parameter
        sets ``dst..``."""
        if isinstance(sets, QuantParams):
            sets = [sets]
        c = self.config.cols
        rows = np.concatenate([set_beats(q, c) for q in sets]) if len(sets) else \
            np.zeros((0, c), dtype=np.int64)
        data, last = self._beats(rows, c)
        return self._mem(isa.Op.READ_QUANT, dst=dst, n=len(sets), data=data, last=last)

    def sync(self) -> Program:
        return self._mem(isa.Op.SYNC)

    def read_counters(self) -> Program:
        return self._mem(isa.Op.READ_COUNTERS)

    def nop(self) -> Program:
        return self._mem(isa.Op.NOP)

    def raw(self, word: int, data=None, last=None) -> Program:
        """Any 64-bit word (illegal ones too) with optional host-in beats.

        ``data`` is beats x k (k <= max(R, C)) int8, zero-padded to ``max(R, C)`` lanes; ``last``
        defaults to last=1 on the final beat only. Data attached to an op without host data is
        still part of the host-in stream (the next op that reads host data consumes it).
        """
        if not isinstance(word, int) or isinstance(word, bool) or not 0 <= word < 1 << 64:
            raise ValueError(f"word must be a 64-bit unsigned integer, not {word!r}")
        if data is None:
            if last is not None:
                raise ValueError("last given without data")
            return self.append(Step(word))
        rows = _int_array("data", data, 2)
        if rows.shape[1] > self.lanes:
            raise ValueError(f"data must have at most {self.lanes} columns, not {rows.shape[1]}")
        beats, default_last = self._beats(rows, rows.shape[1])
        if last is None:
            last = default_last
        else:
            last = np.asarray(last)
            if last.shape != (len(rows),):
                raise ValueError(f"last must have shape ({len(rows)},), not {last.shape}")
            last = last.astype(bool)
        return self.append(Step(word, beats, last))

    # --- streams ---------------------------------------------------------------------------
    def words(self) -> list[int]:
        """The 64-bit instruction words, in order."""
        return [s.word for s in self.steps]

    def host_in_beats(self) -> tuple[np.ndarray, np.ndarray]:
        """The host-in stream: ``(lanes (beats x max(R, C)) int64, last (beats,) bool)``."""
        datas = [s.data for s in self.steps if s.data is not None]
        lasts = [s.last for s in self.steps if s.data is not None]
        if not datas:
            return np.zeros((0, self.lanes), dtype=np.int64), np.zeros(0, dtype=bool)
        return np.concatenate(datas), np.concatenate(lasts)

    def disassemble(self) -> str:
        return "\n".join(f"{i:5d}  {s}" for i, s in enumerate(self.steps))

    # --- file format -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        steps = []
        for s in self.steps:
            d: dict[str, Any] = {"word": f"{s.word:#018x}", "asm": disassemble(s.word)}
            if s.data is not None:
                d["beats"] = s.beats
                d["data"] = base64.b64encode(s.data.astype(np.int8).tobytes()).decode("ascii")
                d["last"] = np.flatnonzero(s.last).tolist()
            steps.append(d)
        return {"format": FORMAT, "version": FORMAT_VERSION, "isa_version": self.isa_version,
                "config": self.config.to_dict(), "steps": steps}

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, d: Any) -> Program:
        if not isinstance(d, dict):
            raise ValueError("program file must hold a JSON object")
        if d.get("format") != FORMAT:
            raise ValueError(f"not a tpugen program: format is {d.get('format')!r}, "
                             f"expected {FORMAT!r}")
        if d.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported program file version {d.get('version')!r} "
                             f"(this tpugen reads version {FORMAT_VERSION})")
        if d.get("isa_version") != isa.ISA_VERSION:
            raise ValueError(f"program was made for ISA version {d.get('isa_version')!r}, "
                             f"but this tpugen implements ISA version {isa.ISA_VERSION}")
        if "config" not in d or not isinstance(d.get("steps"), list):
            raise ValueError("program file needs 'config' and a 'steps' list")
        prog = cls(Config.from_dict(d["config"]))
        lanes = prog.lanes
        for i, sd in enumerate(d["steps"]):
            try:
                word = int(sd["word"], 16) if isinstance(sd["word"], str) else sd["word"]
                if not isinstance(word, int) or not 0 <= word < 1 << 64:
                    raise ValueError(f"bad word {sd['word']!r}")
                if "data" not in sd:
                    prog.append(Step(word))
                    continue
                beats = sd["beats"]
                raw = base64.b64decode(sd["data"], validate=True)
                if len(raw) != beats * lanes:
                    raise ValueError(f"data holds {len(raw)} bytes, expected "
                                     f"{beats} beats x {lanes} lanes")
                data = np.frombuffer(raw, dtype=np.int8).reshape(beats, lanes).astype(np.int64)
                last = np.zeros(beats, dtype=bool)
                idx = sd["last"]
                if any(not isinstance(j, int) or not 0 <= j < beats for j in idx):
                    raise ValueError(f"last indices {idx!r} out of range")
                last[idx] = True
                prog.append(Step(word, data, last))
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"program step {i} is malformed: {e}") from None
        return prog

    @classmethod
    def load(cls, path) -> Program:
        try:
            d = json.loads(Path(path).read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from None
        return cls.from_dict(d)
