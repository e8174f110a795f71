"""The one configuration object from which the hardware and the software's constants come."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from tpugen.hdl.checks import check_choice, check_int

__all__ = ["OperandType", "OPERAND_TYPES", "ACT_MULTS", "REQUIRED_FIELDS", "Config", "check_config"]


@dataclass(frozen=True)
class OperandType:
    """A number type of the array's operands (activations and weights).

    ``name`` is the user-facing name, ``width`` the bit width. Integer types (``kind ==
    "int"``) are two's complement when ``signed``. Float types (``kind == "float"``) are
    sign / ``exponent`` bits / ``mantissa`` bits with exponent ``bias``; ``specials`` says how
    the top exponent is used: ``"ieee"`` (infinities and NaNs, as IEEE 754: bf16, fp8_e5m2) or
    ``"fn"`` (no infinities; only S.1..1.1..1 is NaN: OCP fp8_e4m3). ``subnormals`` says whether
    subnormal encodings keep their value as inputs (fp8) or read as zero (bf16). Float types
    multiply exactly into IEEE binary32 and accumulate in binary32 (see ``sim.float_golden``).
    """

    name: str
    width: int
    signed: bool
    kind: str = "int"
    exponent: int = 0
    mantissa: int = 0
    bias: int = 0
    specials: str = ""
    subnormals: bool = False

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def min(self) -> int:
        """The smallest integer value (integer types)."""
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        """The largest integer value (integer types)."""
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    @property
    def max_finite(self) -> float:
        """The largest finite value (float types)."""
        top = (1 << self.exponent) - 1
        if self.specials == "ieee":
            return (2 - 2.0 ** -self.mantissa) * 2.0 ** (top - 1 - self.bias)
        return (2 - 2.0 ** (1 - self.mantissa)) * 2.0 ** (top - self.bias)

    @property
    def product_width(self) -> int:
        """Bits of one exact product of two operands (binary32 for float types)."""
        return 32 if self.is_float else 2 * self.width


#: The activation unit's multiplier kinds (``Config.act_mult``).
ACT_MULTS = ("parallel", "serial")

#: The fields a saved config (``Config.from_dict`` / ``from_json``) must name.
REQUIRED_FIELDS = ("rows", "cols")

#: The operand types the generator supports, by name.
OPERAND_TYPES: dict[str, OperandType] = {
    "int8": OperandType("int8", 8, True),
    "int4": OperandType("int4", 4, True),
    "bf16": OperandType("bf16", 16, True, "float", 8, 7, 127, "ieee", False),
    "fp8_e4m3": OperandType("fp8_e4m3", 8, True, "float", 4, 3, 7, "fn", True),
    "fp8_e5m2": OperandType("fp8_e5m2", 8, True, "float", 5, 2, 15, "ieee", True),
}


def _store_int(config: Config, name: str, lo: int, hi: int) -> None:
    """Check integer field ``name`` of ``config`` and store it as an ``int`` (a NumPy integer is
    accepted)."""
    object.__setattr__(config, name, check_int(name, getattr(config, name), lo, hi))


@dataclass(frozen=True)
class Config:
    """Shape and number types of a generated accelerator.

    Fields:
      rows, cols        R and C of the systolic array, each 1..256, independent.
      operand           operand type name (see ``OPERAND_TYPES``); ``"int8"``.
      acc_width         accumulator / partial-sum width in bits, 16..64; sums wrap in
                        two's complement at this width.
      weight_fifo_depth whole R x C weight tiles the weight FIFO holds, 1..64.
      ub_rows           unified-buffer rows (each R operands), 1..65536.
      acc_rows          accumulator-buffer rows (each C sums), 1..65536.
      act_lanes         lanes the activation unit processes per cycle, 1..C; 0 (the default)
                        means all C. Kept as given (so a saved 0 follows a later edit of
                        ``cols``); ``activation_lanes`` is the resolved count. ``Config(cols=8)``
                        and ``Config(cols=8, act_lanes=8)`` are different configs (unequal,
                        saved differently) of the same hardware (and the same ``name``).
      act_mult          the activation unit's multipliers: ``"parallel"`` (``activation_lanes``
                        multipliers of acc_width x 32 bits, one product per cycle each: DSP
                        blocks on an FPGA) or ``"serial"`` (``activation_lanes`` bit-serial
                        multipliers, 34 cycles per product, no DSP block: for small FPGAs
                        whose DSP blocks all go to the array).
      counter_width     bits of each status counter (cycles, array busy, stalls, retired),
                        32..64; they wrap at 2**counter_width and read as 64-bit values with
                        the high bits zero (``READ_COUNTERS``, the board link). Small FPGAs
                        use 40 (8.5 hours of cycles at 36 MHz).
      cell_pipeline     registers inside each MAC cell before the accumulate, 0..2: 0 none,
                        1 the product, 2 also the multiplier's inputs (activation and weight).
                        Each adds one cycle to the array latency; FPGA builds use 2.
      quant_sets        requantization parameter sets the activation unit holds (READ_QUANT
                        loads them, ACTIVATE picks one), 1..16: per output lane a bias, a
                        multiplier and a shift (70 bits), per set a zero point and the clamp.
      weight_tiles      whole R x C weight tiles the weight memory holds, 0..65535
                        (STORE_WEIGHTS fills it from the host, LOAD_WEIGHTS moves tiles to the
                        weight FIFO as often as programs ask); 0: no weight memory.
      program_words     instruction words the program memory holds, 0..65535 (PROGRAM: store
                        a program once, call it by one word); 0: no program memory.
      window            1: the matmul engine walks convolution windows over planes in the
                        unified buffer (MATMUL WINDOW, ``hdl.window``); 0: no window walk.

    Every field is validated; a bad value raises ``TypeError`` or ``ValueError`` naming the
    field and the value. Integer fields accept NumPy integers and store them as ``int``.
    """

    rows: int = 8
    cols: int = 8
    operand: str = "int8"
    acc_width: int = 32
    weight_fifo_depth: int = 4
    ub_rows: int = 1024
    acc_rows: int = 512
    act_lanes: int = 0
    act_mult: str = "parallel"
    counter_width: int = 64
    cell_pipeline: int = 0
    quant_sets: int = 4
    weight_tiles: int = 0
    program_words: int = 0
    window: int = 0

    def __post_init__(self):
        _store_int(self, "rows", 1, 256)
        _store_int(self, "cols", 1, 256)
        check_choice("operand", self.operand, OPERAND_TYPES)
        _store_int(self, "acc_width", 16, 64)
        if self.operand_type.is_float and self.acc_width != 32:
            raise ValueError(f"acc_width must be 32 for {self.operand} (binary32 accumulation), "
                             f"not {self.acc_width!r}")
        if self.acc_width < self.operand_type.product_width:
            raise ValueError(
                f"acc_width must be at least {self.operand_type.product_width} for "
                f"{self.operand}, not {self.acc_width!r}")
        _store_int(self, "weight_fifo_depth", 1, 64)
        _store_int(self, "ub_rows", 1, 65536)
        _store_int(self, "acc_rows", 1, 65536)
        _store_int(self, "act_lanes", 0, self.cols)
        check_choice("act_mult", self.act_mult, ACT_MULTS)
        _store_int(self, "counter_width", 32, 64)
        _store_int(self, "cell_pipeline", 0, 2)
        _store_int(self, "quant_sets", 1, 16)
        _store_int(self, "weight_tiles", 0, 65535)
        _store_int(self, "program_words", 0, 65535)
        _store_int(self, "window", 0, 1)

    @property
    def activation_lanes(self) -> int:
        """The lanes the activation unit has, 1..C: ``act_lanes``, or C when it is 0."""
        return self.act_lanes or self.cols

    @property
    def operand_type(self) -> OperandType:
        return OPERAND_TYPES[self.operand]

    @property
    def operand_width(self) -> int:
        return self.operand_type.width

    @property
    def psum_width(self) -> int:
        """Bits of the partial sums inside the array (``hdl.array``): a column's sum of R
        integer products never needs more than ``product_width + ceil(log2 R)`` bits (each
        product is at most ``2**(product_width - 2)`` in magnitude), so the array carries
        ``min(acc_width, that)`` bits and sign-extends its outputs to ``acc_width``; the result
        is the same as summing in ``acc_width`` bits. Float types: 32 (binary32 sums)."""
        ot = self.operand_type
        if ot.is_float:
            return 32
        return min(self.acc_width, ot.product_width + (self.rows - 1).bit_length())

    @property
    def name(self) -> str:
        """A short identifier, one per hardware (used for build directories and cache keys):
        the shape, operand and accumulator width, then each other field that differs from its
        default, ``act_lanes`` as ``activation_lanes`` unless that is C (so ``act_lanes`` 0 and
        C give one name)."""
        base = Config()
        extra = ""
        for f in dataclasses.fields(self):
            k, v = f.name, getattr(self, f.name)
            if k in ("rows", "cols", "operand", "acc_width"):
                continue
            if k == "act_lanes":
                v = self.activation_lanes
                differs = v != self.cols
            else:
                differs = v != getattr(base, k)
            if differs:
                extra += f"_{k}{v}"
        return f"r{self.rows}c{self.cols}_{self.operand}_a{self.acc_width}{extra}"

    def replace(self, **changes) -> Config:
        """A copy with ``changes`` (``dataclasses.replace``); ``act_lanes`` 0 stays 0 (C of the
        copy)."""
        return dataclasses.replace(self, **changes)

    def resolved(self) -> Config:
        """This config with ``act_lanes`` resolved (``activation_lanes``): the hardware it
        describes, field by field. Two configs generate the same hardware exactly when their
        ``resolved()`` are equal (``same_hardware``)."""
        return dataclasses.replace(self, act_lanes=self.activation_lanes)

    def same_hardware(self, other: Config) -> bool:
        """Whether ``other`` (a ``Config``) describes the same hardware: ``Config(cols=8)`` and
        ``Config(cols=8, act_lanes=8)`` differ as values but not as hardware."""
        return self.resolved() == check_config(other, "other").resolved()

    def to_dict(self) -> dict[str, Any]:
        """Every field, as given (``act_lanes`` 0 = C)."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Any) -> Config:
        """The Config of a dict (``to_dict``'s): ``rows`` and ``cols`` are required (a saved
        config names its shape), the other fields default; unknown fields are an error."""
        if not isinstance(data, dict):
            raise TypeError(f"config must be a JSON object, not {data!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known, key=str)
        if unknown:
            raise ValueError(f"config has unknown field {unknown[0]!r}")
        for name in REQUIRED_FIELDS:
            if name not in data:
                raise ValueError(f"config has no {name!r} field (required: "
                                 f"{', '.join(REQUIRED_FIELDS)})")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Config:
        """``from_dict`` of a JSON text."""
        if not isinstance(text, str):
            raise TypeError(f"config JSON must be a str, not {type(text).__name__}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"config is not valid JSON: {e}") from None
        return cls.from_dict(data)


def check_config(config: Any, name: str = "config") -> Config:
    """``config``, a ``Config`` (``TypeError`` naming ``name`` otherwise): the one check every
    function and component taking a ``Config`` makes."""
    if not isinstance(config, Config):
        raise TypeError(f"{name} must be a Config, not {config!r}")
    return config
