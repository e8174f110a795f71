"""The boards tpugen builds for: platform, device resources, and the defaults chosen for each.

``Board.config`` is the largest array whose whole board top fits the board with its timing met
at ``Board.clock_mhz``, and the buffer depths are what its block RAM holds next to the array,
the UART link and the activation unit. The measurements behind these choices live in one place,
``fpga/flow/measured.json`` (``fpga.flow.measured``; ``bench/fpga.py`` records them, ``tpugen build
--list`` and the README's board table show them): nothing here restates them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from tpugen.fpga.flow.toolchain import FPGA_EXTRA_HINT
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.config import Config

__all__ = ["Board", "BOARDS", "get_board"]


@dataclass(frozen=True)
class Board:
    """One board.

    Fields:
      name          the name used on the command line (``tpugen build --board NAME``).
      title         human-readable name.
      label         the short name in tables (``"iCEBreaker"``).
      platform      ``"module:Class"`` of the amaranth-boards platform (imported on use, so
                    this registry loads without amaranth-boards).
      family        ``"ice40"`` or ``"ecp5"`` (the PLL, the Yosys/nextpnr flavour).
      device        the FPGA part.
      clk_in_mhz    the board oscillator (the PLL input).
      resources     what the device has: ``luts``, ``ffs``, ``dsps``, ``brams`` (blocks).
      config        the default ``Config`` for the board.
      clock_mhz     the default core clock (the PLL output).
      led_busy, led_error, led_link  ``(resource name, number)`` of the LEDs (``led_link``:
                    optional, lit after each frame).
      programmer    the flashing tool; ``programmer_args`` its board arguments.
      baud          the default UART rate (what the board's USB-UART carries; by default the
                    link's ``fpga.protocol.DEFAULT_BAUD``).
      dsp_blocks    DSP blocks the array uses by default (products that get none are Booth
                    multipliers in LUTs; ``hdl.dsp``); ``None``: the DSPs left after the
                    activation unit's multipliers.
      synth_opts    extra options of Yosys' ``synth_<family>``.
      lut_wire_delay_ps  iCE40: the wire delay (ps) abc9 adds between LUTs while it maps
                    them (``synth_ice40``'s ``-W``, set through its scratchpad key
                    ``synth_ice40.abc9.W``); ``None``: Yosys' value for the device. A value
                    near what the router gives a dense design makes abc9 trade LUT levels
                    for LUTs where it pays.
      nextpnr_opts  extra options of nextpnr (after the build's own report and seed).
      seed          nextpnr's placement seed for this board's builds (``None``: nextpnr's
                    default); ``tpugen build --seed`` overrides it. Near the device's limits
                    the placement decides the clock (the README's board section gives the
                    spread over seeds).
      notes         one line on why these defaults (reasons, not figures: those are in
                    ``fpga/flow/measured.json``).
      pll_pad       iCE40: the clock pin feeds the PLL directly (``SB_PLL40_PAD``; see
                    ``fpga.gateware.pll.PLLClock``).
    """

    name: str
    title: str
    label: str
    platform: str
    family: str
    device: str
    clk_in_mhz: float
    resources: dict
    config: Config
    clock_mhz: float
    led_busy: tuple
    led_error: tuple
    programmer: str
    programmer_args: tuple = ()
    baud: int = DEFAULT_BAUD
    led_link: tuple | None = None
    dsp_blocks: int | None = None
    synth_opts: str = ""
    lut_wire_delay_ps: int | None = None
    nextpnr_opts: tuple = ()
    seed: int | None = None
    notes: str = ""
    pll_pad: bool = True

    def __post_init__(self):
        w = self.lut_wire_delay_ps
        if w is not None:
            if isinstance(w, bool) or not isinstance(w, int) or w <= 0:
                raise TypeError(f"lut_wire_delay_ps must be a positive int or None, not {w!r}")
            if self.family != "ice40":
                raise ValueError(f"lut_wire_delay_ps is an iCE40 (synth_ice40) setting, not "
                                 f"for family {self.family!r}")
        sd = self.seed
        if sd is not None:
            if isinstance(sd, bool) or not isinstance(sd, int):
                raise TypeError(f"seed must be an int or None, not {sd!r}")
            if sd < 0:
                raise ValueError(f"seed must be non-negative, not {sd!r}")
        if not isinstance(self.nextpnr_opts, tuple) or \
                not all(isinstance(o, str) for o in self.nextpnr_opts):
            raise TypeError(f"nextpnr_opts must be a tuple of str, not {self.nextpnr_opts!r}")

    def platform_class(self):
        """The amaranth-boards platform class (imports amaranth-boards)."""
        module, cls = self.platform.split(":")
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            raise RuntimeError(
                f"board {self.name!r} needs amaranth-boards ({e}); install it with "
                f"{FPGA_EXTRA_HINT}") from None
        return getattr(mod, cls)

    def make_platform(self):
        return self.platform_class()()

    @property
    def dsps(self) -> int:
        return self.resources["dsps"]

    @property
    def narrow_beats(self) -> bool:
        """Whether the board top sends RESULT beats narrow when every lane fits 8 bits: not on
        the iCE40 (``fpga.gateware.top``: Yosys' ABC9 stops on an assertion there)."""
        return self.family != "ice40"


BOARDS: dict[str, Board] = {}


def _config(**fields) -> Config:
    """A board's default Config: FPGA builds use the pipelined MAC cell (registered multiplier
    inputs and product, ``cell_pipeline=2``: a DSP block with its registers, ``hdl.dsp``)."""
    return Config(cell_pipeline=2, **fields)


#: The LEDs of a board whose LEDs are one numbered resource, ``led``.
_NUMBERED_LEDS = {"led_busy": ("led", 0), "led_error": ("led", 1), "led_link": ("led", 2)}


def _add(board: Board) -> Board:
    BOARDS[board.name] = board
    return board


_add(Board(
    name="icebreaker",
    title="1BitSquared iCEBreaker (iCE40UP5K-SG48)",
    label="iCEBreaker",
    platform="amaranth_boards.icebreaker:ICEBreakerPlatform",
    family="ice40",
    device="iCE40UP5K",
    clk_in_mhz=12.0,
    resources={"luts": 5280, "ffs": 5280, "dsps": 8, "brams": 30},
    # Serial activation multipliers leave every SB_MAC16 to the array; 40-bit counters save
    # logic cells.
    config=_config(rows=4, cols=4, ub_rows=256, acc_rows=256, weight_fifo_depth=4,
                  act_lanes=1, act_mult="serial", counter_width=40),
    clock_mhz=31.875,
    led_busy=("led_g", 0),
    led_error=("led_r", 0),
    programmer="iceprog",
    synth_opts="-dsp -device u -dff",
    lut_wire_delay_ps=1800,
    seed=4,
    notes="every product on a DSP block (two a block); LUTs mapped for the UP5K's long wires; "
          "the logic around the array (the controller's decode, the requantizer) sets the clock "
          "(the array alone is faster) and the placement seed moves it; the FT2232H carries "
          "the UART rate",
))

_add(Board(
    name="ulx3s",
    title="Radiona ULX3S (ECP5 LFE5U-85F-6BG381)",
    label="ULX3S",
    platform="amaranth_boards.ulx3s:ULX3S_85F_Platform",
    family="ecp5",
    device="LFE5U-85F",
    clk_in_mhz=25.0,
    resources={"luts": 83640, "ffs": 83640, "dsps": 156, "brams": 208},
    # 512-row buffers take the same block RAMs as 256 rows at this width (DP16KD: 512 x 36).
    # The memories keep models on the board; the window walk keeps convolutions on chip.
    config=_config(rows=16, cols=16, ub_rows=512, acc_rows=512, weight_fifo_depth=4,
                  act_lanes=1, quant_sets=8, weight_tiles=256, program_words=2048, window=1),
    clock_mhz=80.0,
    **_NUMBERED_LEDS,
    programmer="openFPGALoader",
    programmer_args=("-b", "ulx3s"),
    seed=2,
    notes="whole columns of products on the MULT18X18Ds (the DSP floorplan), the rest Booth "
          "multipliers in LUTs; the logic around the array sets the clock; the FT231X carries "
          "the UART rate",
))

_add(Board(
    name="versa_ecp5",
    title="Lattice ECP5 Versa (LFE5UM-45F-8BG381)",
    label="ECP5 Versa",
    platform="amaranth_boards.versa_ecp5:VersaECP5Platform",
    family="ecp5",
    device="LFE5UM-45F",
    clk_in_mhz=100.0,
    resources={"luts": 43848, "ffs": 43848, "dsps": 72, "brams": 108},
    config=_config(rows=8, cols=8, ub_rows=512, acc_rows=256, weight_fifo_depth=4,
                  act_lanes=1),
    clock_mhz=50.0,
    **_NUMBERED_LEDS,
    programmer="openFPGALoader",
    programmer_args=("-c", "ft2232"),
    pll_pad=False,
    notes="every product of the array on a MULT18X18D (not built here yet); the FT2232H "
          "carries the UART rate",
))


def get_board(name) -> Board:
    """The board called ``name``, or ``ValueError`` listing the known ones."""
    if isinstance(name, Board):
        return name
    try:
        return BOARDS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"board must be one of {', '.join(BOARDS)}, not {name!r}") from None
