"""The accelerator core: controller, systolic array, weight FIFO, buffers, activation unit."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.accumulator import ACC_DATA_DELAY, AccumulatorBuffer
from tpugen.hdl.activation import ActivationUnit
from tpugen.hdl.array import SystolicArray, array_latency, array_signature
from tpugen.hdl.command_source import CommandSource
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.controller import PROBE_LAYOUT, Controller
from tpugen.hdl.delay import delay
from tpugen.hdl.dsp import check_dsp_family, check_dsp_plan, check_dsp_sites
from tpugen.hdl.float_activation import FloatActivationUnit
from tpugen.hdl.isa import INSTR_LAYOUT
from tpugen.hdl.layouts import STATUS_LAYOUT, host_in_layout, host_out_layout
from tpugen.hdl.matmul_engine import acc_tag_layout
from tpugen.hdl.place import place_component
from tpugen.hdl.unified_buffer import UnifiedBuffer
from tpugen.hdl.weight_fifo import WeightFIFO

__all__ = ["Core", "core_signature"]


def core_signature(config: Config, *, snapshot_port: bool = False,
                   probe_port: bool = False) -> wiring.Signature:
    """The core bus: the ports of ``Core`` (see there), all of them, and nothing else.

    ``Core``'s own signature is this one, so its members keep their flat names (the Verilog
    ports ``cmd__valid``, ``host_in__payload``, ...). A component that drives the core takes a
    member of this signature flipped (``In(core_signature(config, ...))``, e.g.
    ``fpga.gateware.bridge.Bridge.core``, with ``snapshot_port=True``) and is joined to the
    core with one ``wiring.connect(m, driver.bus_member, core)``."""
    members = {
        "cmd": In(stream.Signature(INSTR_LAYOUT)),
        "host_in": In(stream.Signature(host_in_layout(config))),
        "host_out": Out(stream.Signature(host_out_layout(config))),
        "status": Out(STATUS_LAYOUT),
        "clear_error": In(1),
        "clear_counters": In(1),
    }
    if snapshot_port:
        members.update({"snap_hold": In(1), "snap_next": In(1), "snap_chunk": Out(16),
                        "snap_busy": Out(1)})
    if probe_port:
        members["probe"] = Out(PROBE_LAYOUT)
    return wiring.Signature(members)


class Core(wiring.Component):
    """A TPU-style core that runs an instruction stream (``hdl.isa``): the command source
    (``hdl.command_source``: program memory, model tag), the controller and its engines (the
    host-in engine holds the weight memory), the array, the buffers and the activation unit.

    Ports:
      cmd       ``In(stream)`` of 64-bit instruction words (``INSTR_LAYOUT``).
      host_in   ``In(stream)`` of ``host_in_layout``: the data of READ_HOST / READ_WEIGHTS, in
                instruction order, ``last`` on each instruction's final beat.
      host_out  ``Out(stream)`` of ``host_out_layout``: WRITE_HOST, SYNC and READ_COUNTERS beats,
                ``last`` on each instruction's final beat.
      status    ``Out(STATUS_LAYOUT)``: busy, the sticky error and its cause, 64-bit counters.
      clear_error, clear_counters  ``In(1)`` pulses.
      snap_hold, snap_next, snap_chunk, snap_busy  with ``snapshot_port=True`` only: the
                counter snapshot that READ_COUNTERS uses (``hdl.counter_snapshot``), for a board
                bridge's reply header (one snapshot instead of two): ``snap_hold`` keeps the
                counters of the cycle before it rose (while it and ``snap_busy`` are low the
                snapshot follows the counters), ``snap_next`` moves on, ``snap_chunk`` is the
                chunk shown.
                ``snap_busy``: a READ_COUNTERS holds it; use it only while that is low and no
                READ_COUNTERS can start (the core idle, or waiting for host-in data).
      probe     with ``probe_port=True`` only: ``Out(hdl.controller.PROBE_LAYOUT)``, the engines'
                state each cycle (busy, issue, waits), for the compiled Verilator harness's
                traces (``tpugen.sim.trace``).
    Reset (synchronous ``rst``) returns every engine and counter to idle; the memories keep
    their contents (a program must not read buffer rows it did not write).

    ``hierarchical=True`` instances the array as the Verilog module ``array_module`` (from
    ``hdl.verilog.array_verilog``); otherwise everything is elaborated flat (Amaranth simulator).
    ``dsp_plan`` (``hdl.dsp.dsp_plan``, flat only): the array cells whose multiplier is an FPGA
    DSP block. ``dsp_family`` (``hdl.dsp.DSP_FAMILIES``, default none): the FPGA family whose
    DSP primitives the activation unit's multipliers instance (``hdl.activation``).
    ``dsp_sites`` (``{(i, j): BEL}``, ``fpga.floorplan``): where the array's ECP5 blocks go.
    """

    def __init__(self, config: Config, *, hierarchical=False, array_module=None, fault=None,
                 dsp_plan=None, snapshot_port=False, dsp_family=None, dsp_sites=None,
                 probe_port=False):
        check_config(config)
        if hierarchical and not array_module:
            raise ValueError("array_module must name the array's Verilog module when "
                             "hierarchical")
        self.dsp_plan = check_dsp_plan(config, dsp_plan)
        self.dsp_family = check_dsp_family(dsp_family)
        self.dsp_sites = check_dsp_sites(config, self.dsp_plan, dsp_sites)
        if hierarchical and self.dsp_plan:
            raise ValueError("dsp_plan needs the flat elaboration (hierarchical=False)")
        self.config = config
        self.hierarchical = hierarchical
        self.array_module = array_module
        self.fault = fault
        self.snapshot_port = bool(snapshot_port)
        self.probe_port = bool(probe_port)
        super().__init__(core_signature(config, snapshot_port=self.snapshot_port,
                                        probe_port=self.probe_port))

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.ctrl = ctrl = Controller(cfg)
        m.submodules.cmds = cmds = CommandSource(cfg)
        m.submodules.ub = ub = UnifiedBuffer(cfg)
        m.submodules.acc = acc = AccumulatorBuffer(cfg, family=self.dsp_family)
        m.submodules.fifo = fifo = WeightFIFO(cfg)
        m.submodules.act = act = (FloatActivationUnit(cfg) if cfg.operand_type.is_float
                                  else ActivationUnit(cfg, dsp_family=self.dsp_family))
        array = place_component(
            m, "array", lambda: SystolicArray(cfg, fault=self.fault, dsp_plan=self.dsp_plan,
                                      dsp_sites=self.dsp_sites),
            module_name=self.array_module if self.hierarchical else None,
            signature=array_signature(cfg))

        wiring.connect(m, wiring.flipped(self.cmd), cmds.i)
        wiring.connect(m, cmds.o, ctrl.cmd)
        wiring.connect(m, wiring.flipped(self.host_in), ctrl.host_in)
        wiring.connect(m, ctrl.host_out, wiring.flipped(self.host_out))
        wiring.connect(m, ctrl.act, array.act)
        wiring.connect(m, ctrl.w_out, fifo.w_in)
        wiring.connect(m, fifo.w_out, array.weight)
        wiring.connect(m, ctrl.q_in, act.i)
        wiring.connect(m, act.o, ctrl.q_out)
        wiring.connect(m, ctrl.quant_w, act.qw)
        if self.snapshot_port:
            m.d.comb += [
                ctrl.snap_hold.eq(self.snap_hold),
                ctrl.snap_next.eq(self.snap_next),
                self.snap_chunk.eq(ctrl.snap_chunk),
                self.snap_busy.eq(ctrl.snap_busy),
            ]
        if self.probe_port:
            m.d.comb += self.probe.eq(ctrl.probe)
        m.d.comb += [
            self.status.eq(ctrl.status),
            self.status.busy.eq(ctrl.status.busy | cmds.busy),
            ctrl.clear_error.eq(self.clear_error),
            ctrl.clear_counters.eq(self.clear_counters),
            ub.wr_en.eq(ctrl.ub_we),
            ub.wr_addr.eq(ctrl.ub_waddr),
            ub.wr_data.eq(ctrl.ub_wdata),
            ub.rd0_en.eq(ctrl.ub_rd0_en),
            ub.rd0_addr.eq(ctrl.ub_rd0_addr),
            ctrl.ub_rd0_data.eq(ub.rd0_data),
            ub.rd1_en.eq(ctrl.ub_rd1_en),
            ub.rd1_addr.eq(ctrl.ub_rd1_addr),
            ctrl.ub_rd1_data.eq(ub.rd1_data),
            acc.rd_en.eq(ctrl.acc_rd_en),
            acc.rd_addr.eq(ctrl.acc_rd_addr),
            ctrl.acc_rd_data.eq(acc.rd_data),
        ]
        # Each vector's accumulator row travels beside it, delayed so that the accumulator's
        # request comes ACC_DATA_DELAY cycles before the vector leaves the array (its row is
        # read ahead of the data); an array faster than that delays the data instead. (The
        # accumulator's rules hold: the matmul engine sends a row at most once per MATMUL and
        # leaves four cycles between MATMULs; the drain interlock keeps readers back.)
        latency = array_latency(cfg)
        ahead = max(0, latency - ACC_DATA_DELAY)
        tag = acc_tag_layout(cfg)(delay(m, ctrl.tag.as_value(), ahead, name="tag"))
        tag_valid = delay(m, ctrl.tag_valid, ahead, name="tag_valid", reset_less_ok=False)
        m.d.comb += [
            acc.wr_valid.eq(tag_valid),
            acc.wr_addr.eq(tag.addr),
            acc.wr_accumulate.eq(tag.accumulate),
            acc.wr_data.eq(delay(m, array.out.payload.data, max(0, ACC_DATA_DELAY - latency),
                                 name="acc_data")),
            ctrl.results.eq(array.out.valid),
        ]
        return m
