"""Chains of layers: ``compile_chain`` and what it returns, ``CompiledChain``.

``compile_chain(config, X, layers)`` computes ``x_{i+1} = requantize((x_i - in_zp_i) @ W_i)``
keeping the int8 activations between layers on chip (``layers`` module docstring: the hidden
layers' re-laid weights; ``plan``: the UB's hidden regions). A chain boundary whose activations
cannot stay on chip (no ``mb >= 1`` fits: ``plan.best_plan`` returns ``None``) is a host round
trip: the chain is cut into stages (``CompiledChain.stages``), each its own program
(``gemm.compile_stage``); a stage's input is the previous stage's decoded output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpugen.compiler.gemm import CompiledGemm, compile_stage, no_fit
from tpugen.compiler.layers import LayerSpec, layer_specs, stage_dims
from tpugen.compiler.operands import (
    ceil_div,
    check_lookahead,
    operand_matrix,
    require_integer_operands,
)
from tpugen.compiler.plan import Plan, best_plan
from tpugen.hdl.config import Config, check_config
from tpugen.sim.program import Program

__all__ = ["LayerPlan", "CompiledChain", "compile_chain"]


@dataclass(frozen=True)
class LayerPlan:
    """One layer of a compiled chain: its GEMM ``shape`` (M, K, N), its k-tiles and n-tiles
    (``kt`` counts the re-laid k-tiles of an on-chip input), where its ``input`` comes from and
    its ``output`` goes (``"host"`` or ``"chip"``), the ``stage`` (program) it runs in and its
    ``matmuls``."""

    shape: tuple[int, int, int]
    kt: int
    nt: int
    input: str
    output: str
    stage: int
    matmuls: int


@dataclass
class ChainStage:
    """Layers ``lo`` .. ``hi - 1`` of a chain, one program: its ``plan`` and, once made, its
    ``compiled`` program."""

    lo: int
    hi: int
    plan: Plan
    compiled: CompiledGemm | None = None


class CompiledChain:
    """A compiled chain (``compile_chain``).

    ``layers``: one ``LayerPlan`` each. ``stages``: the programs; normally one. A boundary whose
    activations cannot stay on chip splits the chain there (that layer's ``output`` and the
    next one's ``input`` are ``"host"``): each later stage is compiled from the previous
    stage's decoded output, so run them with ``run``. With one stage, ``program``,
    ``host_out_beats`` and ``decode`` are that program's (``ValueError`` with more).
    """

    def __init__(self, config: Config, X: np.ndarray, specs: list[LayerSpec],
                 stages: list[ChainStage], lookahead: int):
        self.config = config
        self._specs = specs
        self._stages = stages
        self._lookahead = lookahead
        self.out = "int32" if specs[-1].params is None else "int8"
        self.shape = (X.shape[0], specs[-1].W.shape[1])
        stages[0].compiled = self._compile(0, X)
        layers = []
        M = X.shape[0]
        for si, st in enumerate(stages):
            dims = stage_dims(config, specs[st.lo:st.hi])
            for i, (kt, nt, chip) in enumerate(dims):
                li = st.lo + i
                K, N = specs[li].W.shape
                matmuls = ceil_div(M, st.plan.mb) * kt * nt
                layers.append(LayerPlan((M, K, N), kt, nt, "chip" if chip else "host",
                                        "chip" if li < st.hi - 1 else "host", si, matmuls))
        self.layers = layers

    @property
    def stages(self) -> int:
        """The number of programs (host round trips + 1)."""
        return len(self._stages)

    def _compile(self, i: int, x: np.ndarray) -> CompiledGemm:
        st = self._stages[i]
        last = "int8" if st.hi < len(self._specs) else self.out
        return compile_stage(self.config, x, self._specs[st.lo:st.hi], last, self._lookahead,
                              st.plan)

    def _single(self) -> CompiledGemm:
        if len(self._stages) > 1:
            raise ValueError(f"this chain runs as {len(self._stages)} programs (host round "
                             f"trips after layers {[s.hi - 1 for s in self._stages[:-1]]}): "
                             f"use run()")
        return self._stages[0].compiled

    @property
    def program(self) -> Program:
        return self._single().program

    @property
    def host_out_beats(self) -> int:
        return self._single().host_out_beats

    def decode(self, host_out) -> np.ndarray:
        """The M x N output of a one-stage chain (``CompiledGemm.decode``)."""
        return self._single().decode(host_out)

    def stage(self, i: int) -> CompiledGemm | None:
        """Stage ``i``'s compiled program (``None`` until ``run`` has made it: its input is
        the previous stage's output)."""
        return self._stages[i].compiled

    def run(self, execute: Callable) -> tuple[np.ndarray, list]:
        """Run every stage: ``execute(program)`` must return its host-out beats (an array of
        beats x C, or an object with ``host_out``). Returns the M x N output and what
        ``execute`` returned for each stage; ``ValueError`` from ``decode`` when a stage's
        stream is wrong."""
        results = []
        x = None
        for i in range(len(self._stages)):
            if i:
                self._stages[i].compiled = self._compile(i, x)
            compiled = self._stages[i].compiled
            result = execute(compiled.program)
            results.append(result)
            x = compiled.decode(result)
        return x, results


def split_stages(config: Config, M: int, specs: list[LayerSpec]) -> list[ChainStage]:
    """The chain cut into the fewest stages from the left, each with its plan."""
    out_last = "int32" if specs[-1].params is None else "int8"
    stages = []
    lo = 0
    while lo < len(specs):
        hi, plan = lo, None
        while hi < len(specs):
            last_int8 = hi + 1 < len(specs) or out_last == "int8"
            p = best_plan(config, M, stage_dims(config, specs[lo:hi + 1]), last_int8)
            if p is None:
                break
            hi, plan = hi + 1, p
        if plan is None:
            raise no_fit(config)
        stages.append(ChainStage(lo, hi, plan))
        lo = hi
    return stages


def compile_chain(config: Config, X, layers, in_zp: int = 0, *,
                  weight_lookahead: int | None = None) -> CompiledChain:
    """Compile the chain ``layers`` applied to ``X`` (M x K0 int8) for ``config`` (any R, C).

    Each layer is ``y = requantize((x - in_zp_i) @ W_i, params_i)`` (int8; ``ChainLayer`` says
    how layers may be given); the last may give int32 sums instead (``params=None``).
    ``in_zp``: the first layer's input zero point when it does not give its own. The
    activations between layers stay on chip (no host round trip) whenever the unified buffer
    can hold a layer's whole output for at least one row of X; else the chain is cut there
    into separate programs (``CompiledChain.layers`` says where). ``TypeError`` /
    ``ValueError`` for bad input.
    """
    check_config(config)
    require_integer_operands(config, "compile_chain")
    X = operand_matrix("X", X, config)
    specs = layer_specs(layers, in_zp)
    if X.shape[1] != specs[0].W.shape[0]:
        raise ValueError(f"X is {X.shape[0]} x {X.shape[1]} but layers[0].weights has "
                         f"{specs[0].W.shape[0]} rows: X's columns must equal its rows")
    lookahead = check_lookahead(config, weight_lookahead)
    return CompiledChain(config, X, specs, split_stages(config, X.shape[0], specs), lookahead)
