"""Programs for the accelerator core: instruction words plus their host-in data.

A ``Program`` is a list of ``Step`` s for one ``Config``. A step is one 64-bit instruction word
(``hdl.isa``) and, optionally, the host-in beats that travel with it. The host-in stream the core
sees is the concatenation of every step's beats in step order (``Program.host_in_beats``); the
core does not know which step a beat was attached to, so a malformed program (a raw word with
too few or too many beats) is modelled exactly like the hardware sees it.

Host-in beats carry ``max(R, C)`` lanes and a ``last`` flag. A lane is a signed integer of
``hdl.layouts.host_lane_width`` bits (8, or 16 for bf16): an operand is its low
``operand_width`` bits as a signed value (int4 -8..7; a float operand's bit pattern read as a
signed integer), a READ_QUANT byte -128..127.

Builder helpers (``read_host``, ``matmul``, ...) check only what the encoding needs (field
widths, operand ranges, array shapes); buffer bounds and the weight FIFO are *not* checked here,
so the builders can make every erroneous instruction the machine must report (``sim.machine``).

File format (``save`` / ``Program.load``), JSON::

    {"format": "tpugen-program", "version": 2, "isa_version": <hdl.isa.ISA_VERSION>,
     "config": <Config.to_dict()>,
     "steps": [{"word": "0x<16 hex digits>", "asm": "<text, ignored on load>",
                "beats": <int>, "data": "<base64 of beats x lanes, row-major, each lane
                                          host_lane_width / 8 bytes, little endian>",
                "last": [<indices of beats with last=1>]}, ...]}

``beats``/``data``/``last`` are absent for a step without host-in data.

Binary sibling (``save_binary`` / ``Program.load``, which tells the two apart by the first
bytes): the same program as flat arrays, for programs of millions of instructions and for the
compiled simulator harness (``tpugen.tb.harness``) to read without parsing. Little-endian, every
section starting at a multiple of 8 bytes::

    offset  0  b"TPUGPROG"
            8  u32 version (2), u32 isa_version, u32 R, u32 C, u32 lanes (max(R, C)),
               u32 J (bytes of the config's JSON)
           32  u64 steps S, u64 host-in beats B
           48  J bytes: the config (``Config.to_json``), zero-padded to 8
               S x u64: the instruction words
               S x u32: the host-in beats of each step (zero-padded to 8)
               B x lanes x L: the host-in lanes, beat-major, L = host_lane_width / 8 bytes
               each (signed, little endian; zero-padded to 8)
               B x u8: the host-in ``last`` flags (1 or 0)
"""

from __future__ import annotations

import base64
import json
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpugen.hdl import isa, window
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.layouts import host_lane_width, host_lanes
from tpugen.sim import program_binary
from tpugen.sim.disassembler import disassemble
from tpugen.sim.program_binary import BINARY_MAGIC, BINARY_VERSION, lane_dtype
from tpugen.sim.quant_beats import set_beats
from tpugen.sim.requant import QuantParams

__all__ = ["FORMAT", "FORMAT_VERSION", "BINARY_MAGIC", "BINARY_VERSION", "Step", "Program",
           "disassemble", "lane_dtype"]

FORMAT = "tpugen-program"
#: 2: lanes of ``host_lane_width`` bits (16 for bf16), the number formats.
FORMAT_VERSION = 2


@dataclass(frozen=True, eq=False)
class Step:
    """One instruction word and the host-in beats sent with it.

    ``data`` is ``None`` or an int64 array of shape ``(beats, max(R, C))`` of lane values;
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


def _lane_range(width: int) -> tuple[int, int]:
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def _int_array(name: str, value, ndim: int, width: int = 8, what: str = "lanes") -> np.ndarray:
    """``value`` as an int64 array of ``ndim`` dimensions whose values are signed ``width``-bit
    integers (``what`` names them in the error)."""
    arr = np.asarray(value)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(f"{name} must be an integer array, not dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, not shape {arr.shape}")
    arr = arr.astype(np.int64)
    lo, hi = _lane_range(width)
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise ValueError(f"{name} values must be {what} (signed {width}-bit, {lo}..{hi}), "
                         f"found {arr.min()}..{arr.max()}")
    return arr


class Program:
    """An instruction sequence for one ``Config`` (see the module docstring).

    Builders append one step each and return ``self``. They validate encodings and shapes,
    not buffer bounds.
    """

    def __init__(self, config: Config, steps=(), isa_version: int = isa.ISA_VERSION):
        check_config(config)
        self.config = config
        self.isa_version = isa_version
        # Columns, not a Python object per step or beat: the words, each step's host-in beat
        # count (-1: no data attached), the host-in lanes (int8) and last flags in chunks.
        self._words = array("Q")
        self._beats = array("i")
        self._data: list[np.ndarray] = []
        self._last: list[np.ndarray] = []
        self._steps: list[Step] | None = []     # the Step objects, made when asked for
        self._stream: tuple[np.ndarray, np.ndarray] | None = None
        for step in steps:
            self.append(step)

    # --- container -------------------------------------------------------------------------
    @property
    def steps(self) -> list[Step]:
        """The steps as ``Step`` objects (made on first use for a program built from arrays;
        read-only: change a program with ``append`` / ``extend``)."""
        if self._steps is None:
            data, last = self.host_in_arrays()
            beats = np.frombuffer(self._beats, dtype=np.int32)
            ends = np.cumsum(np.maximum(beats, 0))
            steps = []
            for word, b, end in zip(self._words, beats.tolist(), ends.tolist(), strict=True):
                if b < 0:
                    steps.append(Step(word))
                else:
                    steps.append(Step(word, data[end - b:end].astype(np.int64),
                                      last[end - b:end].copy()))
            self._steps = steps
        return self._steps

    def __len__(self) -> int:
        return len(self._words)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __getitem__(self, i):
        return self.steps[i]

    def __eq__(self, other) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        if (self.config != other.config or self.isa_version != other.isa_version
                or self._words != other._words or self._beats != other._beats):
            return False
        (d1, l1), (d2, l2) = self.host_in_arrays(), other.host_in_arrays()
        return np.array_equal(d1, d2) and np.array_equal(l1, l2)

    __hash__ = None

    def __repr__(self) -> str:
        return f"Program({self.config.name}, {len(self)} steps)"

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
            lo, hi = _lane_range(host_lane_width(self.config))
            if step.data.size and (step.data.min() < lo or step.data.max() > hi):
                raise ValueError(f"step data values must be host-in lanes ({lo}..{hi})")
        self._words.append(step.word)
        if step.data is None:
            self._beats.append(-1)
        else:
            self._beats.append(len(step.data))
            self._data.append(step.data.astype(lane_dtype(self.config)))
            self._last.append(step.last.astype(bool))
            self._stream = None
        if self._steps is not None:
            self._steps.append(step)
        return self

    def extend(self, steps) -> Program:
        if isinstance(steps, Program):
            return self._extend_program(steps)
        for step in steps:
            self.append(step)
        return self

    def _extend_program(self, other: Program) -> Program:
        if other.lanes != self.lanes:
            raise ValueError(f"steps must have {self.lanes} host-in lanes, not {other.lanes}")
        data, last = other.host_in_arrays()
        self._words.extend(other._words)
        self._beats.extend(other._beats)
        if len(data):
            self._data.append(data)
            self._last.append(last)
            self._stream = None
        self._steps = None
        return self

    @classmethod
    def from_arrays(cls, config: Config, words, beats, data, last, *,
                    isa_version: int = isa.ISA_VERSION) -> Program:
        """A program from columns: ``words`` (S,) 64-bit instruction words, ``beats`` (S,)
        host-in beats of each step (0: none), ``data`` (B x max(R, C)) lanes and ``last``
        (B,) flags of the whole host-in stream, B = sum(beats). No Python object per step or
        beat is made (``steps`` makes them when asked)."""
        prog = cls(config, isa_version=isa_version)
        words = np.asarray(words)
        beats = np.asarray(beats)
        data = np.asarray(data)
        last = np.asarray(last)
        if words.ndim != 1 or beats.shape != words.shape:
            raise ValueError(f"words and beats must be 1-D of one length, not {words.shape} "
                             f"and {beats.shape}")
        if words.size and (words.dtype.kind not in "iu" or (words.dtype.kind == "i"
                                                            and words.min() < 0)):
            raise ValueError("words must be 64-bit unsigned integers")
        if beats.size and (beats.dtype.kind not in "iu" or beats.min() < 0):
            raise ValueError("beats must be non-negative integers")
        total = int(beats.sum()) if beats.size else 0
        if data.shape != (total, prog.lanes) or last.shape != (total,):
            raise ValueError(f"data must have shape ({total}, {prog.lanes}) and last "
                             f"({total},), not {data.shape} and {last.shape}")
        dtype = lane_dtype(config)
        if data.dtype != dtype:
            lo, hi = _lane_range(host_lane_width(config))
            if data.size and (data.min() < lo or data.max() > hi):
                raise ValueError(f"data values must be host-in lanes ({lo}..{hi})")
            data = data.astype(dtype)
        prog._words = array("Q", words.astype("<u8").tobytes())
        prog._beats = array("i", np.where(beats > 0, beats, -1).astype(np.int32).tobytes())
        if total:
            prog._data = [np.ascontiguousarray(data)]
            prog._last = [last.astype(bool)]
        prog._steps = None
        return prog

    # --- builders --------------------------------------------------------------------------
    def _mem(self, op, flags=0, *, src=0, dst=0, n=0, part=0, data=None, last=None):
        word = isa.encode(op, flags, src=src, dst=dst, n=n, part=part)
        return self.append(Step(word, data, last))

    def _beat_rows(self, rows: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        data = np.zeros((len(rows), self.lanes), dtype=np.int64)
        data[:, :width] = rows
        last = np.zeros(len(rows), dtype=bool)
        if len(rows):
            last[-1] = True
        return data, last

    def read_host(self, dst: int, rows) -> Program:
        """READ_HOST: ``rows`` (n x k, k <= R, int8; zero-padded to R lanes) into UB rows
        ``dst..dst+n-1``."""
        rows = _int_array("rows", rows, 2, self.config.operand_width,
                          f"{self.config.operand} operands")
        r = self.config.rows
        if rows.shape[1] > r:
            raise ValueError(f"rows must have at most R={r} columns, not {rows.shape[1]}")
        padded = np.zeros((len(rows), r), dtype=np.int64)
        padded[:, :rows.shape[1]] = rows
        data, last = self._beat_rows(padded, r)
        return self._mem(isa.Op.READ_HOST, dst=dst, n=len(rows), data=data, last=last)

    def _tile_beats(self, tiles) -> tuple[np.ndarray, np.ndarray, int]:
        """Host-in beats of ``tiles`` (n x R x C, or one R x C tile): data, last, n."""
        tiles = np.asarray(tiles)
        tiles = _int_array("tiles", tiles[None] if tiles.ndim == 2 else tiles, 3,
                           self.config.operand_width, f"{self.config.operand} operands")
        r, c = self.config.rows, self.config.cols
        if tiles.shape[1:] != (r, c):
            raise ValueError(f"tiles must have shape (n, {r}, {c}), not {tiles.shape}")
        return (*self._beat_rows(tiles.reshape(-1, c), c), len(tiles))

    def read_weights(self, tiles) -> Program:
        """READ_WEIGHTS: ``tiles`` (n x R x C, or one R x C tile, int8) into the weight FIFO."""
        data, last, n = self._tile_beats(tiles)
        return self._mem(isa.Op.READ_WEIGHTS, n=n, data=data, last=last)

    def store_weights(self, dst: int, tiles) -> Program:
        """STORE_WEIGHTS: ``tiles`` (as for ``read_weights``) into weight-memory tiles dst.."""
        data, last, n = self._tile_beats(tiles)
        return self._mem(isa.Op.STORE_WEIGHTS, dst=dst, n=n, data=data, last=last)

    def load_weights(self, src: int, n: int) -> Program:
        """LOAD_WEIGHTS: weight-memory tiles ``src..src+n-1`` into the weight FIFO."""
        return self._mem(isa.Op.LOAD_WEIGHTS, src=src, n=n)

    def store_program(self, dst: int, words) -> Program:
        """PROGRAM STORE: ``words`` (ints, or a Program's words) into program memory dst..."""
        words = words.words() if isinstance(words, Program) else [int(w) for w in words]
        self._mem(isa.Op.PROGRAM, isa.Flag.STORE, dst=dst, n=len(words))
        return self.extend(Step(w) for w in words)

    def call(self, src: int, n: int) -> Program:
        """PROGRAM CALL: run program-memory words ``src..src+n-1``."""
        return self._mem(isa.Op.PROGRAM, src=src, n=n)

    def tag(self, tag: int, *, check: bool = False) -> Program:
        """PROGRAM SET_TAG (or CHECK_TAG with ``check``) of a 56-bit model tag."""
        tag = check_int("tag", tag, 0, (1 << 56) - 1)
        flags = isa.Flag.TAG | (0 if check else isa.Flag.STORE)
        return self._mem(isa.Op.PROGRAM, flags, src=tag & 0xFFFF, dst=tag >> 16 & 0xFFFF,
                         n=tag >> 32 & 0xFFFF, part=tag >> 48)

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
        data, last = self._beat_rows(rows, c)
        return self._mem(isa.Op.READ_QUANT, dst=dst, n=len(sets), data=data, last=last)

    def sync(self) -> Program:
        return self._mem(isa.Op.SYNC)

    def read_counters(self) -> Program:
        return self._mem(isa.Op.READ_COUNTERS)

    def nop(self) -> Program:
        return self._mem(isa.Op.NOP)

    def window_shape(self, *, in_w: int, in_h: int, out_w: int, stride: int,
                     pad: int) -> Program:
        """NOP SHAPE: the window walk's plane, output width, stride and pad (``hdl.window``)."""
        return self._mem(isa.Op.NOP, isa.Flag.SHAPE, **window.shape_fields(
            in_w=in_w, in_h=in_h, out_w=out_w, stride=stride, pad=pad))

    def window_at(self, *, iy: int, ix: int, ixr: int, ox: int) -> Program:
        """NOP AT: where the next window MATMULs start (``hdl.window``)."""
        return self._mem(isa.Op.NOP, isa.Flag.AT, **window.at_fields(iy=iy, ix=ix, ixr=ixr,
                                                                     ox=ox))

    def matmul_window(self, src: int, dst: int, n: int, *, extent: int,
                      accumulate: bool = False, new_tile: bool = True) -> Program:
        """MATMUL WINDOW: ``n`` vectors of the window walk over the plane at UB row ``src``
        (whose extent holds ``extent`` rows), times the current tile, into ACC rows ``dst..``."""
        flags = isa.Flag.WINDOW | (isa.Flag.ACCUMULATE if accumulate else 0) | (
            isa.Flag.NEW_TILE if new_tile else 0)
        return self._mem(isa.Op.MATMUL, flags, src=src, dst=dst, n=n,
                         part=window.extent_part(extent))

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
        rows = _int_array("data", data, 2, host_lane_width(self.config))
        if rows.shape[1] > self.lanes:
            raise ValueError(f"data must have at most {self.lanes} columns, not {rows.shape[1]}")
        beats, default_last = self._beat_rows(rows, rows.shape[1])
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
        return self._words.tolist()

    def word_array(self) -> np.ndarray:
        """The instruction words as a (S,) uint64 array."""
        return np.frombuffer(self._words, dtype=np.uint64).copy()

    def step_beats(self) -> np.ndarray:
        """Host-in beats attached to each step, (S,) int64 (0 for a step without data)."""
        return np.maximum(np.frombuffer(self._beats, dtype=np.int32), 0).astype(np.int64)

    def host_in_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The host-in stream as stored: ``(lanes (beats x max(R, C), ``lane_dtype``), last
        (beats,) bool)``; do not modify them."""
        if self._stream is None:
            if not self._data:
                self._stream = (np.zeros((0, self.lanes), dtype=lane_dtype(self.config)),
                                np.zeros(0, dtype=bool))
            else:
                if len(self._data) > 1:
                    self._data = [np.concatenate(self._data)]
                    self._last = [np.concatenate(self._last)]
                self._stream = (self._data[0], self._last[0])
        return self._stream

    def host_in_beats(self) -> tuple[np.ndarray, np.ndarray]:
        """The host-in stream: ``(lanes (beats x max(R, C)) int64, last (beats,) bool)``."""
        data, last = self.host_in_arrays()
        return data.astype(np.int64), last.copy()

    def disassemble(self) -> str:
        return "\n".join(f"{i:5d}  {s}" for i, s in enumerate(self.steps))

    # --- file format -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        steps = []
        for s in self.steps:
            d: dict[str, Any] = {"word": f"{s.word:#018x}", "asm": disassemble(s.word)}
            if s.data is not None:
                d["beats"] = s.beats
                raw = s.data.astype(np.dtype(lane_dtype(self.config)).newbyteorder("<"))
                d["data"] = base64.b64encode(raw.tobytes()).decode("ascii")
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
                dt = np.dtype(lane_dtype(prog.config)).newbyteorder("<")
                if len(raw) != beats * lanes * dt.itemsize:
                    raise ValueError(f"data holds {len(raw)} bytes, expected "
                                     f"{beats} beats x {lanes} lanes x {dt.itemsize}")
                data = np.frombuffer(raw, dtype=dt).reshape(beats, lanes).astype(np.int64)
                last = np.zeros(beats, dtype=bool)
                idx = sd["last"]
                if any(not isinstance(j, int) or not 0 <= j < beats for j in idx):
                    raise ValueError(f"last indices {idx!r} out of range")
                last[idx] = True
                prog.append(Step(word, data, last))
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"program step {i} is malformed: {e}") from None
        return prog

    def save_binary(self, path) -> None:
        """Write the binary program file (module docstring)."""
        program_binary.write(self, path)

    @classmethod
    def from_binary(cls, raw: bytes) -> Program:
        """The program of a binary program file's contents (module docstring)."""
        return program_binary.read(cls, raw)

    @classmethod
    def load(cls, path) -> Program:
        """Read a program file, JSON or binary (told apart by the first bytes)."""
        raw = Path(path).read_bytes()
        if raw[:8] == BINARY_MAGIC:
            try:
                return cls.from_binary(raw)
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
        try:
            d = json.loads(raw.decode())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from None
        return cls.from_dict(d)
