"""The core's cocotb testbench: a ``CoreTB`` owns clock, reset, the three stream drivers, the
stream-rule monitors on every port, and runs programs against the golden model."""

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from tpugen.hdl.config import Config
from tpugen.hdl.isa import Counter
from tpugen.hdl.layouts import STATUS_LAYOUT, host_lane_width, host_lanes
from tpugen.sim.stalls import StallPattern
from tpugen.tb.cocotb_streams import StreamMonitor, StreamSink, StreamSource, resolved
from tpugen.tb.harness_timing import RESET_EDGES, RESULT_DELAY
from tpugen.tb.packing import pack, unpack

__all__ = ["CoreTB", "RESET_EDGES", "RESULT_DELAY"]


class CoreTB:
    """Drives a ``tpugen_core`` top.

    ``stalls`` = (cmd, host-in, host-out) stall probabilities (``tpugen.sim.stalls``, streams
    0, 1, 2 of ``seed``, as in ``tpugen.sim.core_sim``).
    """

    def __init__(self, dut, config: Config, *, seed=0, stalls=(0.0, 0.0, 0.0)):
        self.dut = dut
        self.cfg = config
        self.cycle = 0
        self.resetting = True
        cyc = lambda: self.cycle  # noqa: E731
        self.cmd = StreamSource(dut, "cmd", dut.clk, cycle=cyc)
        self.host_in = StreamSource(dut, "host_in", dut.clk, cycle=cyc)
        self.host_out = StreamSink(dut, "host_out", dut.clk)
        self.set_stalls(stalls, seed)
        self.out = []        # (cycle, lanes, last)
        self.monitors = [
            StreamMonitor(dut, "cmd", dut.clk, cycle=cyc, in_reset=self._in_reset),
            StreamMonitor(dut, "host_in", dut.clk, cycle=cyc, in_reset=self._in_reset),
            StreamMonitor(dut, "host_out", dut.clk, cycle=cyc, in_reset=self._in_reset,
                          on_transfer=self._on_out),
        ]
        dut.clear_error.value = 0
        dut.clear_counters.value = 0

    def set_stalls(self, stalls, seed):
        """New stall patterns: probabilities ``stalls`` (cmd, host-in, host-out), ``seed``."""
        for k, port in enumerate((self.cmd, self.host_in, self.host_out)):
            port.stalls = StallPattern(stalls[k], seed, k)

    def _in_reset(self):
        return self.resetting

    def _on_out(self, cycle, word):
        c, aw = self.cfg.cols, self.cfg.acc_width
        self.out.append((cycle, unpack(word, aw, c), (word >> (c * aw)) & 1))

    async def _count(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle += 1

    async def start(self):
        cocotb.start_soon(Clock(self.dut.clk, 10, unit="ns").start())
        cocotb.start_soon(self._count())
        for p in (self.cmd, self.host_in, self.host_out, *self.monitors):
            cocotb.start_soon(p.run())
        await self.reset()

    async def reset(self, cycles=RESET_EDGES, program=None):
        """Synchronous reset; drops whatever the drivers still had queued, then queues
        ``program`` (if given) so that every stream draws its first stall decision in cycle 0.

        The cycle model of every harness (``tpugen.tb.harness`` too): ``rst`` is high for
        ``cycles`` clock edges, low for one idle edge (no offer, ``ready`` low), then cycle 0
        starts: sources with an item draw, the sink draws in every cycle."""
        self.host_out.active = False     # now: no draw at the next edge either
        await RisingEdge(self.dut.clk)
        self.resetting = True
        self.dut.rst.value = 1
        self.cmd.flush()
        self.host_in.flush()
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst.value = 0
        # After every coroutine woken by the last reset edge: the sources and the sink see the
        # queued program and the active sink first at the idle edge's wake-up, i.e. cycle 0.
        await ReadOnly()
        if program is not None:
            self.queue_program(program)
        self.host_out.active = True
        self.cycle = -1          # _count makes the cycle after the idle edge cycle 0
        await RisingEdge(self.dut.clk)
        self.resetting = False

    def status(self):
        v = STATUS_LAYOUT.from_bits(resolved(self.dut.status, "status"))
        fields = {name: int(getattr(v, name)) for name in ("busy", "error", "cause")}
        for c in Counter:
            fields[c.name.lower()] = int(getattr(v, c.name.lower()))
        return fields

    def queue_program(self, program):
        cfg = self.cfg
        for w in program.words():
            self.cmd.send(int(w))
        lanes, lasts = program.host_in_beats()
        width = host_lane_width(cfg)
        lw = host_lanes(cfg) * width
        for row, last in zip(lanes.tolist(), lasts.tolist(), strict=True):
            self.host_in.send(pack(row, width) | (int(last) << lw))

    async def run_program(self, program, expected_beats, *, timeout=None):
        """Reset the core and run ``program`` from cycle 0; wait for ``expected_beats`` host-out
        beats and for the core to be idle (``status.busy`` low with every command and host-in
        beat taken in an earlier cycle); read the status ``RESULT_DELAY`` cycles later. Returns
        a dict of what happened."""
        n_cmd = len(program)
        await self.reset(program=program)
        # Counted from here: the reset's first edge may still complete a transfer of what ran
        # before it, and nothing of ``program`` moves before the end of cycle 0.
        first_out = len(self.out)
        start_cmd = len(self.cmd.transfers)
        limit = timeout or 100_000 + 40 * (n_cmd + len(self.host_in.queue) + expected_beats)
        t0 = self.cycle
        while True:
            await ReadOnly()
            done = (len(self.cmd.transfers) - start_cmd == n_cmd
                    and len(self.out) - first_out >= expected_beats
                    and not self.host_in.queue
                    and self.status()["busy"] == 0)
            if done:
                break
            if self.cycle - t0 > limit:
                raise AssertionError(
                    f"timeout after {limit} cycles: {len(self.cmd.transfers) - start_cmd}/"
                    f"{n_cmd} commands, {len(self.out) - first_out}/{expected_beats} beats out, "
                    f"{len(self.host_in.queue)} host-in beats left, status {self.status()}")
            await RisingEdge(self.dut.clk)
        await ClockCycles(self.dut.clk, RESULT_DELAY)
        await ReadOnly()
        outs = self.out[first_out:]
        st = self.status()
        first_cmd = self.cmd.transfers[start_cmd] if n_cmd else t0
        return {
            "host_out": np.array([o[1] for o in outs], dtype=np.int64).reshape(-1, self.cfg.cols),
            "last": np.array([o[2] for o in outs], dtype=bool),
            "status": st,
            "first_cmd": first_cmd,
            "last_out": outs[-1][0] if outs else -1,
            "cycles": (outs[-1][0] - first_cmd + 1) if outs else 0,
        }
