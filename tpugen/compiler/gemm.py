"""Single GEMMs: ``compile_gemm`` and what it returns, ``CompiledGemm``.

A ``CompiledGemm`` holds the program of one stage (``compile_stage``: a GEMM, or the layers of
a chain that keep their activations on chip) and decodes its host-out stream: the output
WRITE_HOSTs' beats in program order (``emit.OutputBlock`` says where each goes), then the SYNC
beat, which ``decode`` checks (the magic, no error) and skips.

Programs assume a freshly reset core (empty weight FIFO, no recorded error).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tpugen.compiler.emit import OutputBlock
from tpugen.compiler.layers import LayerSpec, stage_dims, tiled_layers
from tpugen.compiler.operands import (
    check_lookahead,
    gemm_out,
    operand_matrix,
    out_quant,
    zero_point,
)
from tpugen.compiler.plan import Plan, best_plan
from tpugen.compiler.schedule import Scheduler
from tpugen.hdl import isa
from tpugen.hdl.config import Config, check_config
from tpugen.sim.program import Program
from tpugen.sim.requant import QuantParams

__all__ = ["CompiledGemm", "compile_gemm", "compile_stage", "no_fit"]


@dataclass
class CompiledGemm:
    """A compiled product: ``program`` and ``decode(host_out) -> (M, N) int64``.

    ``plan`` records the layout decisions (``mb``, ``slots``, ``nb``, ``kb``, ``abuf``,
    ``stage``, ``nstage``, ``kt``, ``nt``, the buffer bases, the rows used, the MATMUL count
    and the planner's cycle ``estimate``).
    """

    config: Config
    program: Program
    shape: tuple[int, int]
    out: str
    plan: dict
    output_blocks: list[OutputBlock] = field(repr=False)

    @property
    def host_out_beats(self) -> int:
        """Host-out beats the program sends, including the final SYNC beat."""
        return sum(b.rows * b.parts for b in self.output_blocks) + 1

    def decode(self, host_out) -> np.ndarray:
        """The M x N result from the host-out beats (an array of beats x C, or a ``Result``).

        Raises ``ValueError`` when the beat count is wrong, the final beat is not a SYNC marker,
        or the SYNC beat reports an error cause.
        """
        beats = getattr(host_out, "host_out", host_out)
        beats = np.asarray(beats, dtype=np.int64)
        C = self.config.cols
        if beats.ndim != 2 or beats.shape[1] != C:
            raise ValueError(f"host_out must have shape (beats, {C}), not {beats.shape}")
        if len(beats) != self.host_out_beats:
            raise ValueError(f"expected {self.host_out_beats} host-out beats "
                             f"(including SYNC), got {len(beats)}")
        sync = beats[-1]
        if sync[0] != isa.SYNC_MAGIC:
            raise ValueError(f"final beat is not a SYNC marker: {sync.tolist()}")
        if C >= 2 and sync[1] != 0:
            try:
                cause = isa.Cause(int(sync[1])).name
            except ValueError:
                cause = str(int(sync[1]))
            raise ValueError(f"the accelerator reported error {cause}")
        M, N = self.shape
        result = np.zeros((M, N), dtype=np.int64)
        pos = 0
        for s in self.output_blocks:
            block = beats[pos:pos + s.rows * s.parts]
            pos += s.rows * s.parts
            for p in range(s.parts):
                c0 = s.col0 + p * s.width
                c1 = min(c0 + s.width, s.cols_end, N)
                if c1 > c0:
                    result[s.m0:s.m0 + s.rows, c0:c1] = block[p * s.rows:(p + 1) * s.rows,
                                                              :c1 - c0]
        if self.out == "fp32":
            return (result & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
        return result


def no_fit(config: Config) -> ValueError:
    """The error for int8 outputs on a 1-row unified buffer (nothing else fails to fit)."""
    return ValueError(f"out='int8' needs at least 2 unified-buffer rows (one operand row, one "
                      f"staging row), but config.ub_rows is {config.ub_rows}")


def compile_stage(config: Config, A: np.ndarray, specs: list[LayerSpec], last_out: str,
                  lookahead: int, plan: Plan | None = None) -> CompiledGemm:
    """One program: ``A`` through the layers ``specs`` (activations on chip between them);
    ``last_out``: the last layer's output kind; ``plan``: ``best_plan``'s unless given."""
    M = A.shape[0]
    layers = tiled_layers(config, specs, last_out)
    dims = stage_dims(config, specs)
    if plan is None:
        plan = best_plan(config, M, dims, last_out == "int8")
        if plan is None:
            raise no_fit(config)
    scheduler = Scheduler(config, A, layers, plan, lookahead)
    program = scheduler.run()
    info = dict(mb=plan.mb, slots=plan.slots, nb=plan.nb, kb=plan.kb, abuf=plan.abuf,
                stage=plan.stage, nstage=plan.nstage, kt=dims[0][0], nt=dims[-1][1],
                h_base=plan.h_base, stage_base=plan.stage_base,
                ub_rows_used=plan.ub_rows_used, acc_rows_used=plan.acc_rows_used,
                matmuls=scheduler.matmuls, estimate=plan.estimate, weight_lookahead=lookahead)
    return CompiledGemm(config, program, (M, specs[-1].W.shape[1]), last_out, info,
                        scheduler.output_blocks)


def compile_gemm(config: Config, A, B, *, out: str | None = None,
                 quant: QuantParams | None = None, in_zp: int = 0,
                 weight_lookahead: int | None = None) -> CompiledGemm:
    """Compile ``A @ B`` (A: M x K, B: K x N operands of ``config.operand``, any sizes) for
    ``config``.

    ``out="int32"`` (integer types' default): the ``acc_width``-wrapped sums; ``out="int8"``:
    TFLite's requantization of ``(A - in_zp) @ B`` with ``quant`` (``sim.requant.QuantParams``,
    N channels or one value for all; int4: clamped to -8..7 as well). Float types
    (``out="fp32"``, their only one): A and B are numbers converted to the operand type
    (``operands.operand_matrix``), the result is the binary32 accumulators as ``np.float32``
    (``sim.float_golden.gemm``'s order). ``weight_lookahead``: tiles requested ahead of the
    MATMUL taking the current one (default ``min(1, depth-1)``). ``ValueError`` /
    ``TypeError`` for bad input, and ``ValueError`` for ``out="int8"`` with a 1-row unified
    buffer.
    """
    check_config(config)
    out = gemm_out(config, out)
    A = operand_matrix("A", A, config)
    B = operand_matrix("B", B, config)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"A is {A.shape[0]} x {A.shape[1]} but B is {B.shape[0]} x "
                         f"{B.shape[1]}: A's columns must equal B's rows")
    in_zp = zero_point("in_zp", in_zp)
    quant = None if out == "fp32" else out_quant(out, quant, in_zp, B.shape[1])
    lookahead = check_lookahead(config, weight_lookahead)
    return compile_stage(config, A, [LayerSpec(B, quant, in_zp)], out, lookahead)
