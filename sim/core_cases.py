"""Batches of programs for the core tests, and the check of a backend's results.

``Case``: a program, and for compiler output its NumPy reference. ``gemm_cases``: compiled
GEMMs / MLPs, corners and requantization edges (``QUANT_CASES``); ``error_cases``: error
programs (``sim.error_programs``); ``check_results``: a backend's results against the golden
model and NumPy.
"""

from dataclasses import dataclass

import numpy as np

from tpugen.hdl.config import Config
from tpugen.sim.compiler import (
    CompiledGemm,
    Quant,
    compile_gemm,
    compile_mlp,
    gemm_reference,
    mlp_reference,
)
from tpugen.sim.error_programs import ERROR_VARIANTS, error_program
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.random_data import as_rng, int8_data

__all__ = ["Case", "QUANT_CASES", "gemm_cases", "error_cases", "check_results"]


@dataclass
class Case:
    """A program of a core test batch. ``compiled`` (compiler output): ``compiled.decode`` of the
    host-out stream must equal ``reference`` (NumPy); ``exact`` is the unwrapped product (int32
    GEMMs), to see that sums really wrap at ``acc_width``."""

    name: str
    program: Program
    compiled: CompiledGemm | None = None
    reference: np.ndarray | None = None
    exact: np.ndarray | None = None


#: Requantization edges for int8 GEMMs: ties (round half up), shift 0 and 63, saturation both
#: ways, zero points at the int8 edges, ReLU.
QUANT_CASES = (
    dict(mult=1, shift=1, zp=0, relu=False),               # every odd sum is a tie
    dict(mult=3, shift=2, zp=-3, relu=False),              # ties where 3*acc = 2 mod 4
    dict(mult=1, shift=0, zp=0, relu=False),               # shift 0: saturates both ways
    dict(mult=-1, shift=0, zp=127, relu=True),             # relu floor at zp = 127
    dict(mult=(1 << 31) - 1, shift=63, zp=-128, relu=False),
    dict(mult=-(1 << 31), shift=40, zp=-128, relu=True),
    dict(mult=(1 << 31) - 1, shift=24, zp=5, relu=True),
    dict(mult=12345, shift=15, zp=-100, relu=False),
)


def gemm_cases(config: Config, rng, *, random_shapes: int = 4, quant_cases=QUANT_CASES,
               mlp: bool = True, shapes=None) -> list[Case]:
    """Compiled GEMMs (and for R == C two-layer MLPs) with full-range int8 data: shapes with
    1 and non-multiples of R and C (``shapes``, M x K x N, default four of them), random shapes,
    the all -128 corner, a long accumulation (M = 1, K = 12 R) and int8 outputs at the
    requantization edges ``quant_cases``."""
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
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
    for q in quant_cases:
        M, K, N = (int(rng.integers(1, hi + 1)) for hi in (2 * R + 2, 2 * R + 2, 2 * C + 2))
        name = "int8_m{mult}_s{shift}_z{zp}_r{relu:d}".format(**q)
        gemm(name, int8_data(rng, (M, K)), int8_data(rng, (K, N)), out="int8", **q)
    if mlp and R == C:
        X = int8_data(rng, (5, 2 * R + 1))
        W1 = int8_data(rng, (2 * R + 1, 2 * C + 1))
        W2 = int8_data(rng, (2 * C + 1, C + 2))
        hidden = Quant(mult=3, shift=9, zp=-3, relu=True)
        for kw in (dict(), dict(out="int8", mult=5, shift=12, zp=2)):
            c = compile_mlp(config, X, W1, W2, hidden=hidden, **kw)
            ref = mlp_reference(config, X, W1, W2, hidden=hidden, **kw)
            cases.append(Case(f"mlp_{kw.get('out', 'int32')}", c.program, c, ref))
    return cases


def error_cases(config: Config, rng, *, all_variants: bool = False) -> list[Case]:
    """One error program per cause (a random variant), or every variant of every cause."""
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
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
    if not isinstance(config, Config):
        raise TypeError(f"config must be a Config, not {config!r}")
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
