"""PLLs that make the core clock from a board clock: iCE40 ``SB_PLL40_PAD`` / ``SB_PLL40_CORE``
and ECP5 ``EHXPLLL``.

``ice40_pll_settings`` and ``ecp5_pll_settings`` search the divider space the way ``icepll`` and
``ecppll`` do and return the setting whose output is closest to the request (ties: the lower
frequency, which is the safe side for timing). A request that no setting reaches within
``tolerance`` (default 1%) raises ``ValueError`` naming the frequency and the nearest one that
can be reached.

``PLLClock`` is the Elaboratable that drives the ``sync`` domain (which its parent defines) from
the PLL output, with the reset held (asynchronously asserted, synchronously released) until the
PLL reports lock. It also puts a clock constraint on the PLL output, so nextpnr checks timing
at the PLL frequency.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real

from amaranth.hdl import ClockSignal, Const, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

__all__ = ["PLLSettings", "ice40_pll_settings", "ecp5_pll_settings", "pll_settings", "core_clock",
           "PLLClock", "DEFAULT_TOLERANCE"]

#: The largest relative error between the requested and the achieved frequency.
DEFAULT_TOLERANCE = 0.01


@dataclass(frozen=True)
class PLLSettings:
    """One PLL setting: the family, its input and output frequencies (Hz), its VCO and PFD
    frequencies, and the divider parameters by their primitive names."""

    family: str
    f_in: float
    f_out: float
    f_vco: float
    f_pfd: float
    params: dict

    @property
    def mhz(self) -> float:
        return self.f_out / 1e6

    def describe(self) -> str:
        ps = " ".join(f"{k}={v}" for k, v in self.params.items())
        return (f"{self.family} PLL {self.f_in / 1e6:g} MHz -> {self.f_out / 1e6:.4g} MHz "
                f"(VCO {self.f_vco / 1e6:.4g} MHz, {ps})")


def _check_freq(name, value):
    if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:
        raise ValueError(f"{name} must be a positive frequency in Hz, not {value!r}")
    return float(value)


def _pick(family, f_in, f_out, candidates, lo, hi, tolerance):
    if not candidates:
        raise ValueError(
            f"{family} PLL cannot make {f_out / 1e6:g} MHz from {f_in / 1e6:g} MHz: "
            f"no setting at all (outputs span about {lo / 1e6:g}..{hi / 1e6:g} MHz)")
    best = min(candidates, key=lambda s: (abs(s.f_out - f_out), s.f_out))
    if abs(best.f_out - f_out) > tolerance * f_out:
        raise ValueError(
            f"{family} PLL cannot make {f_out / 1e6:g} MHz from {f_in / 1e6:g} MHz within "
            f"{tolerance:.1%}: nearest is {best.f_out / 1e6:.4g} MHz (outputs span "
            f"{lo / 1e6:g}..{hi / 1e6:g} MHz)")
    return best


def ice40_pll_settings(f_in, f_out, *, tolerance=DEFAULT_TOLERANCE) -> PLLSettings:
    """Settings of an iCE40 ``SB_PLL40_*`` in SIMPLE feedback mode (as ``icepll`` computes):
    ``f_out = f_in * (DIVF + 1) / ((DIVR + 1) * 2**DIVQ)`` with the PFD ``f_in / (DIVR + 1)`` in
    10..133 MHz, the VCO in 533..1066 MHz, the output in 16..275 MHz."""
    f_in = _check_freq("f_in", f_in)
    f_out = _check_freq("f_out", f_out)
    cands = []
    for divr in range(16):
        pfd = f_in / (divr + 1)
        if not 10e6 <= pfd <= 133e6:
            continue
        for divf in range(128):
            vco = pfd * (divf + 1)
            if not 533e6 <= vco <= 1066e6:
                continue
            for divq in range(1, 7):
                out = vco / (1 << divq)
                if not 16e6 <= out <= 275e6:
                    continue
                # FILTER_RANGE by PFD frequency (SiliconBlue's table, as icepll uses it).
                filt = next(i for i, top in enumerate(
                    (17e6, 26e6, 44e6, 66e6, 101e6, 1e12), start=1) if pfd < top)
                cands.append(PLLSettings("iCE40", f_in, out, vco, pfd, {
                    "DIVR": divr, "DIVF": divf, "DIVQ": divq, "FILTER_RANGE": filt}))
    return _pick("iCE40", f_in, f_out, cands, 16e6, 275e6, tolerance)


def ecp5_pll_settings(f_in, f_out, *, tolerance=DEFAULT_TOLERANCE) -> PLLSettings:
    """Settings of an ECP5 ``EHXPLLL`` with feedback from CLKOP (as ``ecppll`` computes):
    ``f_out = f_in * CLKFB_DIV / CLKI_DIV``, VCO ``f_out * CLKOP_DIV`` in 400..800 MHz, PFD
    ``f_in / CLKI_DIV`` in 3.125..400 MHz, output 3.125..400 MHz; CLKI_DIV 1..128,
    CLKFB_DIV 1..80, CLKOP_DIV 1..128."""
    f_in = _check_freq("f_in", f_in)
    f_out = _check_freq("f_out", f_out)
    cands = []
    for ci in range(1, 129):
        pfd = f_in / ci
        if not 3.125e6 <= pfd <= 400e6:
            continue
        for fb in range(1, 81):
            out = pfd * fb
            if not 3.125e6 <= out <= 400e6:
                continue
            # The VCO as close to the middle of its range as possible.
            ops = [op for op in range(1, 129) if 400e6 <= out * op <= 800e6]
            if not ops:
                continue
            op = min(ops, key=lambda d: abs(out * d - 600e6))
            cands.append(PLLSettings("ECP5", f_in, out, out * op, pfd, {
                "CLKI_DIV": ci, "CLKFB_DIV": fb, "CLKOP_DIV": op}))
    return _pick("ECP5", f_in, f_out, cands, 3.125e6, 400e6, tolerance)


def pll_settings(family, f_in, f_out, *, tolerance=DEFAULT_TOLERANCE) -> PLLSettings:
    """``ice40_pll_settings`` or ``ecp5_pll_settings`` by ``family`` (``"ice40"``/``"ecp5"``)."""
    if family == "ice40":
        return ice40_pll_settings(f_in, f_out, tolerance=tolerance)
    if family == "ecp5":
        return ecp5_pll_settings(f_in, f_out, tolerance=tolerance)
    raise ValueError(f"family must be 'ice40' or 'ecp5', not {family!r}")


def core_clock(family, f_in, f_out, *, tolerance=DEFAULT_TOLERANCE) -> PLLSettings | None:
    """The PLL setting ``PLLClock`` uses for core clock ``f_out`` from board clock ``f_in``
    (Hz): ``None`` when ``f_out`` is the board clock (no PLL), else ``pll_settings``'s.
    ``ValueError`` for a bad family or a clock the PLL cannot make."""
    if family not in ("ice40", "ecp5"):
        raise ValueError(f"family must be 'ice40' or 'ecp5', not {family!r}")
    f_in = _check_freq("f_in", f_in)
    f_out = _check_freq("f_out", f_out)
    if abs(f_out - f_in) < 1:
        return None
    return pll_settings(family, f_in, f_out, tolerance=tolerance)


class PLLClock(Elaboratable):
    """The clock and reset of the ``sync`` domain from a PLL on the platform's default clock.
    The parent defines the domain (``m.domains.sync = ClockDomain()``); this drives its
    ``ClockSignal`` and ``ResetSignal``.

    ``family``: ``"ice40"`` or ``"ecp5"``; ``f_in``: the board clock (Hz); ``f_out``: the
    requested core clock (Hz). ``settings`` (a ``PLLSettings``) and ``f_achieved`` (Hz) are known
    at construction, so callers can size baud-rate dividers for the achieved clock.

    With ``f_out`` equal to ``f_in`` no PLL is instanced: the board clock is the core clock
    (reset still held for a few cycles after configuration).

    iCE40: ``pad=True`` (default) uses ``SB_PLL40_PAD``, fed straight from the clock pin, which
    must be the PLL's dedicated input (iCEBreaker pin 35 is); ``pad=False`` uses
    ``SB_PLL40_CORE`` behind an input buffer.
    """

    def __init__(self, family, f_in, f_out, *, clk_resource=None, pad=True,
                 tolerance=DEFAULT_TOLERANCE):
        self.settings = core_clock(family, f_in, f_out, tolerance=tolerance)
        self.family = family
        self.f_in = float(f_in)
        self.f_achieved = self.f_in if self.settings is None else self.settings.f_out
        self.clk_resource = clk_resource
        self.pad = pad
        self.locked = Signal()

    def elaborate(self, platform):
        m = Module()
        name = self.clk_resource or platform.default_clk
        clk = Signal(name="pll_clk")
        locked = self.locked
        s = self.settings
        if s is None:
            pin = platform.request(name, dir="-")
            m.submodules.clk_buf = buf = io.Buffer("i", pin)
            m.d.comb += [clk.eq(buf.i), locked.eq(1)]
        elif self.family == "ice40":
            p = s.params
            common = dict(
                p_FEEDBACK_PATH="SIMPLE", p_PLLOUT_SELECT="GENCLK",
                p_DIVR=Const(p["DIVR"], 4), p_DIVF=Const(p["DIVF"], 7),
                p_DIVQ=Const(p["DIVQ"], 3), p_FILTER_RANGE=Const(p["FILTER_RANGE"], 3),
                i_RESETB=Const(1), i_BYPASS=Const(0),
                o_PLLOUTGLOBAL=clk, o_LOCK=locked)
            pin = platform.request(name, dir="-")
            if self.pad:
                m.submodules.pll = Instance("SB_PLL40_PAD", i_PACKAGEPIN=pin.io, **common)
            else:
                m.submodules.clk_buf = buf = io.Buffer("i", pin)
                m.submodules.pll = Instance("SB_PLL40_CORE", i_REFERENCECLK=buf.i, **common)
        else:   # ecp5
            p = s.params
            pin = platform.request(name, dir="-")
            m.submodules.clk_buf = buf = io.Buffer("i", pin)
            m.submodules.pll = Instance(
                "EHXPLLL",
                a_FREQUENCY_PIN_CLKI=f"{s.f_in / 1e6:.6g}",
                a_FREQUENCY_PIN_CLKOP=f"{s.f_out / 1e6:.6g}",
                a_ICP_CURRENT="12", a_LPF_RESISTOR="8",
                a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
                p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
                p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA",
                p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["CLKOP_DIV"],
                p_CLKOP_CPHASE=p["CLKOP_DIV"] - 1, p_CLKOP_FPHASE=0,
                p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=p["CLKFB_DIV"], p_CLKI_DIV=p["CLKI_DIV"],
                i_RST=Const(0), i_STDBY=Const(0), i_CLKI=buf.i, i_CLKFB=clk,
                i_PHASESEL0=Const(0), i_PHASESEL1=Const(0), i_PHASEDIR=Const(1),
                i_PHASESTEP=Const(1), i_PHASELOADREG=Const(1), i_PLLWAKESYNC=Const(0),
                i_ENCLKOP=Const(0),
                o_CLKOP=clk, o_LOCK=locked)
        m.d.comb += ClockSignal("sync").eq(clk)
        platform.add_clock_constraint(clk, self.f_achieved)
        # Reset: asserted while the PLL is not locked, released in step with the new clock.
        m.submodules.rst_sync = ResetSynchronizer(~locked, domain="sync", stages=3)
        return m
