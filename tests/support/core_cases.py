"""Batches of programs for the core tests, and the check of a backend's results.

``Case``: a program, and for compiler output its NumPy reference. ``gemm_cases``: compiled
GEMMs / layer chains, corners and requantization edges (``QUANT_CASES``); ``error_cases``: error
programs (``sim.error_programs``); ``check_results``: a backend's results against the golden
model and NumPy.
"""

from dataclasses import dataclass

import numpy as np

from support.error_programs import ERROR_VARIANTS, error_program
from tpugen.compiler import CompiledChain, CompiledGemm, compile_chain, compile_gemm
from tpugen.hdl.config import Config, check_config
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.random_data import as_rng, int8_data
from tpugen.sim.reference import chain_reference, gemm_reference
from tpugen.sim.requant import QuantParams

__all__ = ["Case", "QUANT_CASES", "gemm_cases", "error_cases", "check_results"]


@dataclass
class Case:
    """A program of a core test batch. ``compiled`` (compiler output): ``compiled.decode`` of the
    host-out stream must equal ``reference`` (NumPy); ``exact`` is the unwrapped product (int32
    GEMMs), to see that sums really wrap at ``acc_width``."""

    name: str
    program: Program
    compiled: CompiledGemm | CompiledChain | None = None
    reference: np.ndarray | None = None
    exact: np.ndarray | None = None


def _q(**kw):
    return lambda rng, n: QuantParams(**{k: (v(rng, n) if callable(v) else v)
                                         for k, v in kw.items()})


def _per_channel(*values):
    return lambda rng, n: rng.choice(values, n)


#: Requantization edges for int8 GEMMs (TFLite's arithmetic, ``sim.requant``): name, a factory
#: ``(rng, channels) -> QuantParams`` and the input zero point.
QUANT_CASES = (
    ("half_ties", _q(multiplier=1 << 30, shift=0), 0),            # x * 0.5: every odd sum ties
    ("pot_ties", _q(multiplier=1 << 30, shift=_per_channel(-1, -2, -3, -31)), 3),
    ("unit_saturates", _q(multiplier=1 << 30, shift=1, out_zp=-7), 0),   # x * 1: saturates
    ("left_shifts", _q(multiplier=_per_channel(3 << 29, (1 << 31) - 1, 1 << 30),
                       shift=_per_channel(2, 5, 17, 31), bias=_per_channel(-5, 0, 9999)), -128),
    ("relu_floor_127", _q(multiplier=(1 << 31) - 1, shift=-20, out_zp=127, act_min=127), 127),
    ("edges", _q(multiplier=_per_channel((1 << 31) - 1, -(1 << 31), 0, 1, -1),
                 shift=_per_channel(-32, -31, 0, 31), out_zp=-128,
                 bias=_per_channel(-(1 << 31), (1 << 31) - 1, 0)), 127),
    ("narrow_clamp", _q(multiplier=12345 << 14, shift=-9, out_zp=5, act_min=-3, act_max=4), -1),
)


def gemm_cases(config: Config, rng, *, random_shapes: int = 4, quant_cases=QUANT_CASES,
               chain: bool = True, shapes=None) -> list[Case]:
    """Compiled GEMMs (and, with ``chain``, two-layer chains that keep the hidden activations
    on chip: int32 and int8 outputs) with full-range int8 data: shapes with
    1 and non-multiples of R and C (``shapes``, M x K x N, default four of them), random shapes,
    the all -128 corner, a long accumulation (M = 1, K = 12 R) and int8 outputs at the
    requantization edges ``quant_cases``."""
    check_config(config)
    rng = as_rng(rng)
    R, C = config.rows, config.cols
    cases = []

    def gemm(name, A, B, **kw):
        c = compile_gemm(config, A, B, **kw)
        exact = A @ B if kw.get("out", "int32") == "int32" else None
        cases.append(Case(name, c.program, c, gemm_reference(config, A, B, **kw), exact))

    if shapes is None:
        shapes = [(1, 1, 1), (1, R, C), (R + 1, 2 * R + 1, C + 2),
                  (2 * R + 3, max(R - 1, 1), 2 * C - 1)]
    shapes = list(shapes)
    for _ in range(random_shapes):
        shapes.append(tuple(int(rng.integers(1, hi + 1)) for hi in
                            (3 * R + 3, 3 * R + 2, 3 * C + 2)))
    for M, K, N in shapes:
        gemm(f"gemm_{M}x{K}x{N}", int8_data(rng, (M, K)), int8_data(rng, (K, N)))
    M, K, N = R + 2, 2 * R + 1, C + 1
    gemm("all_minus128", np.full((M, K), -128), np.full((K, N), -128))
    gemm("127_times_minus128", np.full((M, K), 127), np.full((K, N), -128))
    # Many K tiles into one row: column 0 of B has the signs of A (big sums, which wrap at
    # narrow acc_width), the other columns are random.
    A = int8_data(rng, (1, 12 * R), edge=0.9)
    B = int8_data(rng, (12 * R, C + 1), edge=0.6)
    B[:, 0] = np.where(A[0] < 0, -128, 127)
    gemm("long_k_m1", A, B)
    for name, make, in_zp in quant_cases:
        M, K, N = (int(rng.integers(1, hi + 1)) for hi in (2 * R + 2, 2 * R + 2, 2 * C + 2))
        gemm(f"int8_{name}", int8_data(rng, (M, K)), int8_data(rng, (K, N)), out="int8",
             quant=make(rng, N), in_zp=in_zp)
    if chain:
        X = int8_data(rng, (5, 2 * R + 1))
        W1 = int8_data(rng, (2 * R + 1, 2 * C + 1))
        W2 = int8_data(rng, (2 * C + 1, C + 2))
        H, N = W1.shape[1], W2.shape[1]
        hidden = QuantParams(bias=rng.integers(-999, 999, H), multiplier=3 << 20, shift=-9,
                             out_zp=-3, act_min=-3)
        out = QuantParams(bias=rng.integers(-99, 99, N), multiplier=5 << 24, shift=-12,
                          out_zp=2)
        for last, in_zp in ((None, 0), (out, 7)):
            layers = [(W1, hidden), (W2, last)]
            c = compile_chain(config, X, layers, in_zp)
            ref = chain_reference(config, X, layers, in_zp)
            cases.append(Case(f"chain_{'int32' if last is None else 'int8'}", c.program, c,
                              ref))
    return cases


def error_cases(config: Config, rng, *, all_variants: bool = False) -> list[Case]:
    """One error program per cause (a random variant), or every variant of every cause."""
    check_config(config)
    rng = as_rng(rng)
    cases = []
    for cause, variants in ERROR_VARIANTS.items():
        chosen = variants if all_variants else (str(rng.choice(variants)),)
        for v in chosen:
            try:
                p = error_program(config, cause, rng, variant=v)
            except ValueError:
                continue          # this variant cannot exist in this config
            cases.append(Case(f"error_{cause.name}_{v}", p))
    return cases


def check_results(config: Config, cases, results) -> list[str]:
    """Problems with a backend's results for ``cases``: the testbench's own mismatches, the
    host-out stream and error cause against the golden model, compiled outputs against NumPy."""
    check_config(config)
    problems = []
    if len(results) != len(cases):
        return [f"{len(results)} results for {len(cases)} programs"]
    for case, r in zip(cases, results, strict=True):
        exp = Machine(config).run(case.program)
        errs = [f"testbench: {m}" for m in r.mismatches]
        errs += exp.mismatches(r.host_out, r.last)
        if r.error != int(exp.error):
            errs.append(f"error cause {r.error}, expected {int(exp.error)}")
        if case.compiled is not None and not errs:
            try:
                got = case.compiled.decode(r.host_out)
            except ValueError as e:
                errs.append(f"decode: {e}")
            else:
                if not np.array_equal(got, case.reference):
                    errs.append(f"result differs from NumPy at "
                                f"{np.argwhere(got != case.reference)[:3].tolist()}")
        if errs:
            problems.append(f"{case.name}: " + "; ".join(errs[:3]))
    return problems
