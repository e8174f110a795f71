"""Compile matrix products, and chains of int8 layers, into accelerator programs.

``compile_gemm(config, A, B)`` computes ``A @ B`` (A: M x K, B: K x N operands of
``config.operand``) and returns a ``CompiledGemm``: the ``Program`` and ``decode(host_out)``,
which turns the host-out stream back into the M x N result. ``compile_chain(config, X,
layers)`` computes a chain of layers ``x_{i+1} = requantize((x_i - in_zp_i) @ W_i)`` keeping
the int8 activations between layers on chip, and returns a ``CompiledChain``. Any M, K, N:
operands and results that do not fit the buffers stream through them; only host memory bounds
a product. The golden results they must give are ``tpugen.sim.reference``'s, written
independently of this package.

The modules, in the order a compilation uses them (each docstring describes its part):

  ``operands``  argument checks: operand matrices, output kinds, parameters, zero points
  ``layers``    the layer type (``ChainLayer``), tiles, hidden layers' re-laid weights, the
                input zero point folded into the bias
  ``plan``      the blocking of a program (m-, k- and n-blocks, ACC slots, the UB layout) and
                the cycle estimate that chooses it
  ``schedule``  the ``Scheduler``: MATMULs, loads and outputs in order, the instruction order
                and the ramps
  ``emit``      the ``Emitter``: instruction columns, deferred outputs, parameter sets
  ``gemm``      one program (``compile_stage``), ``compile_gemm``, ``CompiledGemm``
  ``chain``     ``compile_chain``, ``CompiledChain``, host round trips between stages
  ``planes``    ``compile_planes``: convolution chains on unified-buffer planes (the window
                walk, ``Config.window``), with ``plane_layout``, ``plane_program`` and
                ``plane_packing``
"""

from tpugen.compiler.gemm import CompiledGemm, compile_gemm
from tpugen.compiler.layers import ChainLayer, fold_input_zero_point
from tpugen.compiler.staging import CompiledChain, LayerPlan, compile_chain

__all__ = ["CompiledGemm", "CompiledChain", "ChainLayer", "LayerPlan", "compile_gemm",
           "compile_chain", "fold_input_zero_point"]
