"""The array's cocotb testbench: a ``TB`` owns clock, reset, drivers, monitors and scoreboard."""

import json
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from tpugen.hdl.config import Config
from tpugen.sim.model import array_outputs
from tpugen.sim.stalls import StallPattern
from tpugen.tb.cocotb_streams import StreamMonitor, StreamSource, resolved
from tpugen.tb.packing import pack, unpack

__all__ = ["TB", "config_from_env"]


def config_from_env() -> Config:
    return Config.from_json(os.environ["TPUGEN_CONFIG"])


class TB:
    """Drives an ``<prefix>_array`` top: weight and activation sources with random gaps,
    monitors on every port, and a scoreboard against the NumPy model.

    The scoreboard fails on any mismatch, any X/Z in an output vector, and any output beyond
    the expected ones; ``check_done`` fails if an expected vector never came.
    """

    def __init__(self, dut, config: Config, *, seed=0, act_gap=0.0, weight_gap=0.0):
        self.dut = dut
        self.cfg = config
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.cycle_count = 0
        self.resetting = False
        cyc = lambda: self.cycle_count  # noqa: E731
        self.weights = StreamSource(dut, "weight", dut.clk,
                                    stalls=StallPattern(weight_gap, seed, 0), cycle=cyc)
        self.acts = StreamSource(dut, "act", dut.clk, stalls=StallPattern(act_gap, seed, 1),
                                 cycle=cyc)
        self.expected = []       # (vector, first) in order
        self.received = []       # (cycle, vector, first)
        self.errors = []
        self.monitors = [
            StreamMonitor(dut, "weight", dut.clk, cycle=cyc, in_reset=self._in_reset),
            StreamMonitor(dut, "act", dut.clk, cycle=cyc, in_reset=self._in_reset),
            StreamMonitor(dut, "out", dut.clk, has_ready=False, cycle=cyc,
                          on_transfer=self._on_output, in_reset=self._in_reset),
        ]

    def _in_reset(self):
        return self.resetting

    async def _count(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle_count += 1

    async def start(self):
        """Start the clock and the drivers; hold reset for a few cycles."""
        cocotb.start_soon(Clock(self.dut.clk, 10, unit="ns").start())
        self.dut.rst.value = 1
        self.resetting = True
        cocotb.start_soon(self._count())
        for p in (self.weights, self.acts, *self.monitors):
            cocotb.start_soon(p.run())
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)
        self.resetting = False
        self.cycle_count = 0

    def _on_output(self, cycle, word):
        c, aw = self.cfg.cols, self.cfg.acc_width
        vec = unpack(word, aw, c)
        first = (word >> (c * aw)) & 1
        self.received.append((cycle, vec, first))
        k = len(self.received) - 1
        if k >= len(self.expected):
            raise AssertionError(f"unexpected output vector {k} at cycle {cycle}: {vec}")
        exp_vec, exp_first = self.expected[k]
        if vec != exp_vec or first != exp_first:
            raise AssertionError(
                f"output vector {k} at cycle {cycle}: got {vec} first={first}, "
                f"expected {exp_vec} first={exp_first}")

    def add_tile(self, weights, acts):
        """Queue one tile: its R weight beats, then its M activation vectors."""
        cfg = self.cfg
        weights = np.asarray(weights, dtype=np.int64)
        acts = np.asarray(acts, dtype=np.int64)
        for row in weights:
            self.weights.send(pack(row, cfg.operand_width))
        for m, vec in enumerate(acts):
            first = int(m == 0)
            self.acts.send(pack(vec, cfg.operand_width) | (first << (cfg.rows * cfg.operand_width)))
        for m, y in enumerate(array_outputs(cfg, weights, acts)):
            self.expected.append(([int(v) for v in y], int(m == 0)))

    async def wait_done(self, timeout_cycles=None):
        """Wait until every queued vector has come out, then a few idle cycles."""
        cfg = self.cfg
        limit = timeout_cycles or (50 + 4 * (len(self.expected) + len(self.weights.queue))
                                   + 4 * (cfg.rows + cfg.cols))
        start = self.cycle_count
        while len(self.received) < len(self.expected):
            if self.cycle_count - start > limit:
                raise AssertionError(
                    f"timeout: {len(self.received)} of {len(self.expected)} vectors after "
                    f"{limit} cycles")
            await RisingEdge(self.dut.clk)
        await ClockCycles(self.dut.clk, cfg.rows + cfg.cols + 4)
        await ReadOnly()
        assert len(self.received) == len(self.expected), "extra output vectors"
        assert resolved(self.dut.out__valid, "out.valid") == 0

    def random_tile(self, m, *, lo=None, hi=None):
        cfg = self.cfg
        lo = cfg.operand_type.min if lo is None else lo
        hi = cfg.operand_type.max if hi is None else hi
        w = self.np_rng.integers(lo, hi + 1, (cfg.rows, cfg.cols))
        x = self.np_rng.integers(lo, hi + 1, (m, cfg.rows))
        return w, x

    def describe(self):
        return json.dumps({"config": self.cfg.to_dict(), "vectors": len(self.expected)})
