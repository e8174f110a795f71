"""FPGA DSP blocks for the MAC cell's multiplier (the pipelined cell, ``cell_pipeline == 2``).

With ``cell_pipeline == 2`` a cell's product is the product of the operands offered two cycles
earlier: the operands are registered, then the product. DSP blocks have exactly these two
registers, so on an FPGA a cell can instance one instead of leaving a ``$mul`` to Yosys:

  ECP5   ``MULT18X18D`` (one per cell) with its input A/B and output registers.
  iCE40  ``SB_MAC16`` in 8x8 mode: two signed 8 x 8 products per block (the top half on
         A[15:8] x B[15:8], the bottom half on A[7:0] x B[7:0]), with its A/B input registers
         and the 8x8 product registers. Cells ``j`` and ``j + 1`` of a row share a block, so the
         iCE40UP5K's 8 blocks take 16 products. The B register is also the cells' active
         weight register (it holds while no tile starts, ``hdl.cell``), and the top half's
         product goes through the top accumulator's output register, one cycle more (the
         ``j + 1`` cell's operands go in one cycle early).

The blocks' registers have no reset (they hold data, whose validity travels in reset flags
elsewhere), like the cell's own data registers.

``dsp_plan`` says which cells get a DSP block; the others keep a ``$mul`` that the board build
maps to a Booth multiplier in LUTs. The plan is an explicit argument of the elaboration
(``SystolicArray(config, dsp_plan=...)``, ``Core``, ``fpga.gateware.top.BoardTop``;
``fpga.flow.bitstream`` makes it from the board's family and DSP budget); without one (simulation,
Verilog for simulators) no
cell instances a DSP primitive.
"""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Signal

from tpugen.hdl.config import Config, check_config

__all__ = ["dsp_plan", "check_dsp_plan", "check_dsp_family", "check_dsp_sites", "mult18x18d",
           "sb_mac16_8x8",
           "DSP_FAMILIES", "DSP_ROLES"]

#: Families with a DSP mapping of the pipelined cell.
DSP_FAMILIES = ("ecp5", "ice40")

#: The roles a cell can have in a plan (see ``dsp_plan``).
DSP_ROLES = ("mult18", "mac16_lo", "mac16_hi", "mac16_one")


def dsp_plan(config: Config, family: str, blocks: int) -> dict:
    """Which cells get a DSP product, row-major, until ``blocks`` DSP blocks are used.

    Returns ``{(i, j): role}`` with role ``"mult18"`` (ECP5: the cell's own MULT18X18D),
    ``"mac16_lo"`` / ``"mac16_hi"`` (iCE40: the bottom / top product of a block shared by cells
    ``j`` and ``j + 1``; the ``lo`` cell instances it) or ``"mac16_one"`` (iCE40: a block for
    one cell, the last of a row with an odd C). Empty unless ``cell_pipeline == 2``, and for
    float operand types (their multipliers are ``hdl.float_mul``'s logic).
    """
    check_config(config)
    if family not in DSP_FAMILIES:
        raise ValueError(f"family must be one of {', '.join(DSP_FAMILIES)}, not {family!r}")
    if not isinstance(blocks, int) or blocks < 0:
        raise ValueError(f"blocks must be a non-negative integer, not {blocks!r}")
    plan = {}
    if config.cell_pipeline != 2 or config.operand_type.is_float:
        return plan
    left = blocks
    for i in range(config.rows):
        j = 0
        while j < config.cols and left > 0:
            if family == "ecp5":
                plan[(i, j)] = "mult18"
                j += 1
            elif j + 1 < config.cols:
                plan[(i, j)], plan[(i, j + 1)] = "mac16_lo", "mac16_hi"
                j += 2
            else:
                plan[(i, j)] = "mac16_one"
                j += 1
            left -= 1
    return plan


def check_dsp_family(family):
    """Validate a DSP family argument: ``None`` (no DSP primitive: Yosys maps ``$mul``) or one
    of ``DSP_FAMILIES``; returns it."""
    if family is not None and family not in DSP_FAMILIES:
        raise ValueError(f"dsp_family must be None or one of {', '.join(DSP_FAMILIES)}, not "
                         f"{family!r}")
    return family


def check_dsp_sites(config: Config, plan: dict, sites) -> dict:
    """Validate ``sites`` (``{(row, col): BEL name}``, ``None``: none) for a checked ``plan``:
    each placed cell must be a ``"mult18"`` cell of the plan (a site places its ECP5 block)."""
    if sites is None:
        return {}
    if not isinstance(sites, dict):
        raise TypeError(f"dsp_sites must be a dict of (row, col) -> BEL name, not {sites!r}")
    for cell, site in sites.items():
        if plan.get(cell) != "mult18":
            raise ValueError(f"dsp_sites cell {cell!r} is not a 'mult18' cell of the dsp_plan")
        if not isinstance(site, str) or not site:
            raise ValueError(f"dsp_sites must name a BEL for cell {cell}, not {site!r}")
    if len(set(sites.values())) != len(sites):
        raise ValueError("dsp_sites must place each cell at a BEL of its own")
    return dict(sites)


def check_dsp_plan(config: Config, plan) -> dict:
    """Validate a DSP plan for ``config`` and return it (``None``: the empty plan).

    A plan maps cells ``(i, j)`` of the array to a role of ``DSP_ROLES``; a non-empty plan needs
    ``cell_pipeline == 2``, and a ``"mac16_lo"`` cell ``(i, j)`` pairs with a ``"mac16_hi"``
    cell ``(i, j + 1)`` (and the other way round)."""
    check_config(config)
    if plan is None:
        return {}
    if not isinstance(plan, dict):
        raise TypeError(f"dsp_plan must be a dict of (row, col) -> role, not {plan!r}")
    if plan and config.cell_pipeline != 2:
        raise ValueError(f"dsp_plan needs cell_pipeline 2, not {config.cell_pipeline}")
    for cell, role in plan.items():
        if (not isinstance(cell, tuple) or len(cell) != 2
                or not all(isinstance(v, int) for v in cell)
                or not (0 <= cell[0] < config.rows and 0 <= cell[1] < config.cols)):
            raise ValueError(f"dsp_plan cells must be (row, col) cells of the "
                             f"{config.rows}x{config.cols} array, not {cell!r}")
        if role not in DSP_ROLES:
            raise ValueError(f"dsp_plan roles must be one of {', '.join(DSP_ROLES)}, not "
                             f"{role!r} (cell {cell})")
        i, j = cell
        partner = {"mac16_lo": ((i, j + 1), "mac16_hi"),
                   "mac16_hi": ((i, j - 1), "mac16_lo")}.get(role)
        if partner is not None and plan.get(partner[0]) != partner[1]:
            raise ValueError(f"dsp_plan cell {cell} is {role!r} but cell {partner[0]} is not "
                             f"{partner[1]!r}")
    return plan


def mult18x18d(m, a, b, *, name="dsp", ce=None, site=None):
    """A ``MULT18X18D`` with input and output registers: ``a * b`` (signed, at most 18 bits
    each) two cycles after ``a`` and ``b``. Returns the signed product, ``len(a) + len(b)``
    bits. ``ce`` (default always): the registers' clock enable (both stages advance together,
    as a pipeline under one enable). ``site``: the nextpnr BEL to place the block at (its
    ``BEL`` attribute, e.g. ``"X4/Y10/MULT18_0"``; ``fpga.gateware.floorplan``), default
    anywhere."""
    p = Signal(36, name=f"{name}_p")
    a18, b18 = Signal(18, name=f"{name}_a"), Signal(18, name=f"{name}_b")
    m.d.comb += [a18.eq(a.as_signed()), b18.eq(b.as_signed())]   # sign-extended
    kw = {}
    for k in range(18):
        kw[f"i_A{k}"] = a18[k]
        kw[f"i_B{k}"] = b18[k]
        kw[f"i_C{k}"] = Const(0)
    for k in range(36):
        kw[f"o_P{k}"] = p[k]
    for r in ("INPUTA", "INPUTB", "OUTPUT"):
        kw[f"p_REG_{r}_CLK"] = "CLK0"
        kw[f"p_REG_{r}_CE"] = "CE0"
        kw[f"p_REG_{r}_RST"] = "RST0"
    for r in ("INPUTC", "PIPELINE"):
        kw[f"p_REG_{r}_CLK"] = "NONE"
    attrs = {} if site is None else {"a_BEL": site}
    m.submodules[name] = Instance(
        "MULT18X18D", **attrs,
        p_CLK0_DIV="ENABLED", p_CLK1_DIV="ENABLED", p_CLK2_DIV="ENABLED",
        p_CLK3_DIV="ENABLED", p_HIGHSPEED_CLK="NONE", p_GSR="DISABLED",
        p_CAS_MATCH_REG="FALSE", p_SOURCEB_MODE="B_SHIFT", p_MULT_BYPASS="DISABLED",
        p_RESETMODE="SYNC",
        i_SIGNEDA=Const(1), i_SIGNEDB=Const(1), i_SOURCEA=Const(0), i_SOURCEB=Const(0),
        i_CLK0=ClockSignal(), i_CLK1=Const(0), i_CLK2=Const(0), i_CLK3=Const(0),
        i_CE0=Const(1) if ce is None else ce, i_CE1=Const(0), i_CE2=Const(0), i_CE3=Const(0),
        i_RST0=Const(0), i_RST1=Const(0), i_RST2=Const(0), i_RST3=Const(0),
        **kw)
    return p[:len(a) + len(b)].as_signed()


def sb_mac16_8x8(m, a_lo, b_lo, a_hi, b_hi, *, name="dsp", b_hold=None, top_delay=False):
    """An ``SB_MAC16`` as two signed 8 x 8 multipliers with input and product registers:
    returns ``(a_lo * b_lo, a_hi * b_hi)`` (signed, 16 bits each), two cycles after the
    operands. Operands are 8-bit signed values. ``b_hold``: while it is high the B register
    keeps its value (both halves' ``b`` are then those of the last cycle it was low; default:
    it takes them every cycle). ``top_delay``: the top product three cycles after its operands
    (the top adder adds 0 into the top output register)."""
    for v in (a_lo, b_lo, a_hi, b_hi):
        if len(v) != 8:
            raise ValueError(f"SB_MAC16 8x8 operands must be 8 bits wide, not {len(v)}")
    o = Signal(32, name=f"{name}_o")
    # Top output: the 8x8 product register (2), or the accumulator output register (1) of
    # C (0) plus that product (lower input 1, upper input C).
    top = {"p_TOPOUTPUT_SELECT": Const(1 if top_delay else 2, 2),
           "p_TOPADDSUB_LOWERINPUT": Const(1 if top_delay else 0, 2),
           "p_TOPADDSUB_UPPERINPUT": Const(1 if top_delay else 0, 1)}
    m.submodules[name] = Instance(
        "SB_MAC16",
        p_NEG_TRIGGER=Const(0, 1), p_C_REG=Const(0, 1), p_A_REG=Const(1, 1),
        p_B_REG=Const(1, 1), p_D_REG=Const(0, 1),
        p_TOP_8x8_MULT_REG=Const(1, 1), p_BOT_8x8_MULT_REG=Const(1, 1),
        p_PIPELINE_16x16_MULT_REG1=Const(0, 1), p_PIPELINE_16x16_MULT_REG2=Const(0, 1),
        p_TOPADDSUB_CARRYSELECT=Const(0, 2), **top,
        p_BOTOUTPUT_SELECT=Const(2, 2), p_BOTADDSUB_LOWERINPUT=Const(0, 2),
        p_BOTADDSUB_UPPERINPUT=Const(0, 1), p_BOTADDSUB_CARRYSELECT=Const(0, 2),
        p_MODE_8x8=Const(1, 1), p_A_SIGNED=Const(1, 1), p_B_SIGNED=Const(1, 1),
        i_CLK=ClockSignal(), i_CE=Const(1),
        i_A=Cat(a_lo, a_hi), i_B=Cat(b_lo, b_hi), i_C=Const(0, 16), i_D=Const(0, 16),
        i_AHOLD=Const(0), i_BHOLD=Const(0) if b_hold is None else b_hold, i_CHOLD=Const(0),
        i_DHOLD=Const(0),
        i_IRSTTOP=Const(0), i_IRSTBOT=Const(0),
        i_ORSTTOP=Const(0), i_ORSTBOT=Const(0), i_OLOADTOP=Const(0), i_OLOADBOT=Const(0),
        i_ADDSUBTOP=Const(0), i_ADDSUBBOT=Const(0), i_OHOLDTOP=Const(0), i_OHOLDBOT=Const(0),
        i_CI=Const(0), i_ACCUMCI=Const(0), i_SIGNEXTIN=Const(0),
        o_O=o)
    return o[:16].as_signed(), o[16:].as_signed()
