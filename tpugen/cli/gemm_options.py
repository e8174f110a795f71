"""The GEMM options of ``tpugen sim`` and ``tpugen run``: the operands (``--m --k --n``,
``--a --b``, or ``--program``), the int8 requantization options (TFLite's parameters), and
their checks, up to the prepared job (``tpugen.accelerator.prepare_gemm``)."""


import numpy as np

from tpugen.accelerator import prepare_gemm, quant_options
from tpugen.cli.options import int_list, integer, load_npy, nonneg_int, positive_int, scales
from tpugen.cli.user_errors import CLIError, Parser
from tpugen.hdl.config import Config
from tpugen.memory import GemmTooLarge, check_gemm_memory
from tpugen.sim.heartbeat import Heartbeat
from tpugen.sim.requant import ACTIVATIONS, QuantParams
from tpugen.simulate import random_operands, relu_quant

__all__ = ["add_gemm", "add_requant", "gemm_source", "gemm_operands", "prepare",
           "program_only"]

_DIMS = ("m", "k", "n")


def add_gemm(p):
    """The operands, ``--out``, ``--seed`` and ``--json``."""
    for dim in _DIMS:
        p.add_argument(f"--{dim}", type=positive_int,
                       help=f"GEMM dimension {dim.upper()} (random operands)")
    p.add_argument("--a", metavar="A.npy", help="the M x K operand (a NumPy .npy file)")
    p.add_argument("--b", metavar="B.npy", help="the K x N operand (a NumPy .npy file)")
    p.add_argument("--program", metavar="P.json",
                   help="run a saved program (tpugen.sim.program format) instead of a GEMM")
    p.add_argument("--out", metavar="C.npy",
                   help="write the result (a program's host-out beats) to this .npy file")
    p.add_argument("--seed", type=nonneg_int, default=1,
                   help="seed of the random operands (and of a simulator's initial state)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


#: The requantization options: (option, keyword arguments of ``add_argument``).
_REQUANT_ARGS = [
    ("--bias", dict(type=int_list, metavar="B[,B...]",
                    help="int32 bias, one or one per output column")),
    ("--multiplier", dict(type=int_list, metavar="Q[,Q...]",
                          help="int32 quantized multiplier (2**30 with --shift 1: x 1)")),
    ("--shift", dict(type=int_list, metavar="E[,E...]",
                     help="its exponent, -32..31 (left for > 0)")),
    ("--out-zp", dict(dest="out_zp", type=integer, help="output zero point (-128..127)")),
    ("--act-min", dict(dest="act_min", type=integer, help="clamp low (-128..127)")),
    ("--act-max", dict(dest="act_max", type=integer, help="clamp high (-128..127)")),
    ("--in-zp", dict(dest="in_zp", type=integer,
                     help="input zero point of A (-128..127), folded into the bias")),
    ("--scales", dict(type=scales, metavar="S_IN,S_W,S_OUT",
                      help="derive multiplier and shift from float scales like TFLite (S_W: "
                           "one, or one per output column)")),
    ("--activation", dict(type=str.upper, choices=ACTIVATIONS,
                          help="with --scales: the fused activation's clamp bounds")),
]

#: The requantization options (``add_requant``) and the ``matmul`` option each sets.
_REQUANT_OPTIONS = {"bias": "--bias", "multiplier": "--multiplier", "shift": "--shift",
                    "out_zp": "--out-zp", "act_min": "--act-min", "act_max": "--act-max",
                    "in_zp": "--in-zp"}


def add_requant(p):
    """Requantized int8 results, TFLite's parameters (``tpugen.sim.requant``); any of them
    turns the result from int32 into int8."""
    g = p.add_argument_group("int8 results (TFLite requantization; default: int32 sums)")
    g.add_argument("--relu", action="store_true",
                   help="int8 with ReLU, a multiplier scaled to K (a quick look)")
    for option, kw in _REQUANT_ARGS:
        g.add_argument(option, **kw)
    # A group's add_argument is argparse's own: note the options that take a value (so that
    # ``--shift -5,-6`` is joined to its option before parsing).
    Parser.value_options.update(option for option, _ in _REQUANT_ARGS)


# --- the operands -----------------------------------------------------------------------------
def _check_memory(cfg: Config, m: int, k: int, n: int, source: str) -> None:
    """Refuse a GEMM that would not fit in the memory available (``tpugen.memory``)."""
    try:
        check_gemm_memory(cfg, m, k, n, source)
    except GemmTooLarge as e:
        raise CLIError(str(e)) from None


def gemm_source(args) -> dict:
    """The operands the user asked for, checked as far as possible without the config:
    ``--a``/``--b`` loaded (``{"a", "b", "names"}``), or ``--m``/``--k``/``--n`` given
    (``{"dims", "names"}``)."""
    dims = {d: getattr(args, d) for d in _DIMS if getattr(args, d) is not None}
    if args.a is not None or args.b is not None:
        if args.a is None or args.b is None:
            raise CLIError(f"{'--b' if args.a is None else '--a'} is missing: give both --a "
                           f"A.npy and --b B.npy")
        a = load_npy(args.a, "--a")
        b = load_npy(args.b, "--b")
        got = {}
        if a.ndim == 2:
            got.update(m=a.shape[0], k=a.shape[1])
        if b.ndim == 2:
            got.update(n=b.shape[1])
        for d, v in dims.items():
            if d in got and got[d] != v:
                raise CLIError(f"--{d} {v}: the operands --a {args.a} --b {args.b} give "
                               f"{d.upper()} = {got[d]}")
        return {"a": a, "b": b, "names": (f"--a {args.a}", f"--b {args.b}")}
    missing = [f"--{d}" for d in _DIMS if d not in dims]
    if missing:
        raise CLIError(f"{', '.join(missing)} required (or --a A.npy --b B.npy, or --program "
                       f"P.json)")
    source = " ".join(f"--{d} {v}" for d, v in dims.items())
    return {"dims": dims, "names": (f"A of {source}", f"B of {source}"), "source": source}


def gemm_operands(source: dict, cfg: Config, seed: int):
    """``(a, b, names)`` of a ``gemm_source``: the files' arrays, or random ones (after a
    check that the GEMM fits in memory)."""
    if "dims" not in source:
        a, b = source["a"], source["b"]
        if a.ndim == 2 and b.ndim == 2:
            _check_memory(cfg, a.shape[0], a.shape[1], b.shape[1], " ".join(source["names"]))
        return a, b, source["names"]
    d = source["dims"]
    _check_memory(cfg, d["m"], d["k"], d["n"], source["source"])
    a, b = random_operands(cfg, d["m"], d["k"], d["n"], seed)
    return a, b, source["names"]


# --- requantization ---------------------------------------------------------------------------
def _from_scales(args, given: dict, activation) -> dict:
    """``--scales`` (with ``--bias``, ``--out-zp``, ``--in-zp``, ``--activation``)."""
    if getattr(args, "relu", False):
        raise CLIError("--relu: not with --scales (use --activation RELU)")
    for f in ("multiplier", "shift", "act_min", "act_max"):
        if f in given:
            raise CLIError(f"{_REQUANT_OPTIONS[f]}: not with --scales (--scales derives "
                           f"it)")
    s_in, s_w, s_out = args.scales
    try:
        quant = QuantParams.from_scales(s_in, s_w, s_out, bias=given.get("bias", 0),
                                        out_zp=given.get("out_zp", 0),
                                        activation=activation or "NONE")
    except (TypeError, ValueError) as e:
        raise CLIError(f"--scales: {e}") from None
    return {"out": "int8", "quant": quant, "in_zp": given.get("in_zp", 0)}


def _requant(args, k: int, n: int) -> dict:
    """``matmul``'s requantization options from the command line for a GEMM of depth ``k``
    and ``n`` output columns (``{}``: int32 results)."""
    given = {f: getattr(args, f, None) for f in _REQUANT_OPTIONS}
    given = {f: v for f, v in given.items() if v is not None}
    for f, v in given.items():
        if np.ndim(v) == 1 and len(v) != n:
            raise CLIError(f"{_REQUANT_OPTIONS[f]}: {len(v)} values, but the result has {n} "
                           f"columns (give one value, or one per column)")
    from_scales = getattr(args, "scales", None)
    activation = getattr(args, "activation", None)
    relu = getattr(args, "relu", False)
    if not (given or from_scales or activation or relu):
        return {}
    if activation and not from_scales:
        raise CLIError(f"--activation {activation}: needs --scales (its bounds come from the "
                       f"output scale); give --act-min/--act-max otherwise")
    if from_scales:
        return _from_scales(args, given, activation)
    options = {"out": "int8", **(relu_quant(k) if relu else {}), **given}
    try:
        quant_options("int8", {f: v for f, v in options.items() if f != "out"})
    except (TypeError, ValueError) as e:
        field = str(e).split(" ", 1)[0]
        option = _REQUANT_OPTIONS.get(field)
        value = given.get(field)
        if option is None or value is None:
            raise CLIError(str(e)) from None
        text = ",".join(map(str, np.atleast_1d(value)))
        raise CLIError(f"{option} {text}: {e}") from None
    return options


def prepare(cfg: Config, a, b, names, args):
    """The GEMM job of operands ``a``, ``b`` (``names`` in messages) with the requantization
    options of ``args``."""
    dims = (a.shape[1], b.shape[1]) if np.ndim(a) == 2 and np.ndim(b) == 2 else (1, 0)
    quant = _requant(args, *dims) if args is not None else {}
    if quant and cfg.operand_type.is_float:
        given = [o for f, o in (("relu", "--relu"), ("scales", "--scales"),
                                *_REQUANT_OPTIONS.items()) if getattr(args, f, None)]
        raise CLIError(f"{given[0] if given else '--relu'}: requantization applies to integer "
                       f"operand types, not {cfg.operand} (its results are the fp32 sums)")
    try:
        with Heartbeat("compiling the GEMM and its golden result", announce=False):
            return prepare_gemm(cfg, a, b, names=names, **quant)
    except (TypeError, ValueError) as e:
        message = str(e)
        if not any(message.startswith(n) for n in names):
            message = f"{' '.join(names)}: {message}"
        raise CLIError(message) from None


def program_only(args) -> None:
    """Options that have no meaning with ``--program``."""
    for option, value in (("--a", args.a), ("--b", args.b), ("--m", args.m), ("--k", args.k),
                          ("--n", args.n), ("--relu", getattr(args, "relu", False) or None),
                          ("--scales", getattr(args, "scales", None)),
                          *((o, getattr(args, f, None)) for f, o in _REQUANT_OPTIONS.items())):
        if value is not None:
            raise CLIError(f"{option}: has no meaning with --program {args.program} (the "
                           f"program holds its data)")

