"""Helpers of the float unit tests: the formats' NumPy views (ml_dtypes), the flush rule, and
running a unit in the Amaranth simulator over many vectors."""

import ml_dtypes
import numpy as np
from amaranth.sim import Simulator

from tpugen.hdl.config import OPERAND_TYPES

__all__ = ["FLOAT_TYPES", "DTYPES", "UINTS", "MIN_NORMAL32", "decode", "flush32", "f32",
           "simulate", "simulate_pipelined", "assert_same"]

#: The float operand types, by name.
FLOAT_TYPES = {name: t for name, t in OPERAND_TYPES.items() if t.is_float}
#: Their ml_dtypes NumPy types (the oracles).
DTYPES = {"bf16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
          "fp8_e5m2": ml_dtypes.float8_e5m2, "fp32": np.float32}
#: The unsigned integer type of each width.
UINTS = {8: np.uint8, 16: np.uint16, 32: np.uint32}
#: The smallest normal binary32 magnitude.
MIN_NORMAL32 = 2.0 ** -126


def decode(bits, name: str) -> np.ndarray:
    """The values (float64, exact) of the bit patterns ``bits`` of format ``name``."""
    dtype = DTYPES[name]
    width = np.dtype(dtype).itemsize * 8
    with np.errstate(invalid="ignore"):             # signalling NaNs
        return (np.asarray(bits, dtype=np.uint64).astype(UINTS[width]).view(dtype)
                .astype(np.float64))


def f32(bits) -> np.ndarray:
    """binary32 bit patterns as float32 values."""
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


def flush32(v: np.ndarray) -> np.ndarray:
    """``v`` with magnitudes below 2**-126 replaced by zeros of their sign (NaN stays)."""
    v = np.asarray(v)
    return np.where(np.abs(v) < MIN_NORMAL32, np.copysign(np.zeros_like(v), v), v)


def _vectors(dut, inputs: dict) -> tuple[list, list]:
    """The ports named in ``inputs`` and the vectors (tuples of Python ints) in order."""
    columns = [np.asarray(v, dtype=np.uint64).tolist() for v in inputs.values()]
    return [getattr(dut, n) for n in inputs], list(zip(*columns, strict=True))


def simulate(dut, inputs: dict, output: str) -> np.ndarray:
    """The values of port ``output`` of a combinational ``dut`` for each vector of ``inputs``
    (port name -> sequence of ints, all of one length): one testbench sets and reads."""
    ports, vectors = _vectors(dut, inputs)
    out = getattr(dut, output)
    got = []

    async def bench(ctx):
        for vector in vectors:
            for port, value in zip(ports, vector, strict=True):
                ctx.set(port, value)
            got.append(ctx.get(out))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=np.uint64)


def simulate_pipelined(dut, inputs: dict, output: str, latency: int) -> np.ndarray:
    """Like ``simulate`` for a ``dut`` with registers: one vector per clock cycle; the result of
    vector ``k`` is read after clock edge ``k + latency`` (so exactly ``latency`` cycles)."""
    ports, vectors = _vectors(dut, inputs)
    out = getattr(dut, output)
    got = []

    async def bench(ctx):
        for cycle in range(len(vectors) + latency):
            if cycle < len(vectors):
                for port, value in zip(ports, vectors[cycle], strict=True):
                    ctx.set(port, value)
            await ctx.tick()
            if cycle + 1 >= latency:
                got.append(ctx.get(out))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got[:len(vectors)], dtype=np.uint64)


def _is_nan(bits: np.ndarray, name: str) -> np.ndarray:
    return np.isnan(decode(bits, name))


def assert_same(got, want, name: str, inputs: dict) -> None:
    """``got`` and ``want`` (bit patterns of format ``name``) agree: both NaN (any NaN), or bit
    for bit (so the sign of a zero counts). A failure lists the first mismatches."""
    got = np.asarray(got, dtype=np.uint64)
    want = np.asarray(want, dtype=np.uint64)
    assert got.shape == want.shape
    same = (got == want) | (_is_nan(got, name) & _is_nan(want, name))
    bad = np.flatnonzero(~same)
    if len(bad):
        rows = []
        for i in bad[:8]:
            args = ", ".join(f"{n}={int(np.asarray(v)[i]):#x}" for n, v in inputs.items())
            rows.append(f"  {args}: got {int(got[i]):#x}, want {int(want[i]):#x}")
        raise AssertionError(f"{len(bad)} of {len(got)} vectors differ:\n" + "\n".join(rows))
