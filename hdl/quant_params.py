"""The requantization parameter sets: what READ_QUANT loads and ACTIVATE reads.

``Config.quant_sets`` sets, each per output lane ``c`` a bias (int32), a multiplier (int32) and
a shift (signed 6 bits), and per set the output zero point and the clamp bounds (int8 each).
The lanes are stored in ``chunks = ceil(C / act_lanes)`` rows per set, each row the
``act_lanes`` lanes that the activation unit processes together, so a read gives exactly the
parameters of one chunk (on an FPGA: block RAM or LUT RAM, no C-lane register file).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import Config
from .isa import QUANT_BEATS, QUANT_MAX_BEAT, QUANT_MIN_BEAT, QUANT_SHIFT_BEAT, QUANT_ZP_BEAT

__all__ = ["QuantParamStore", "lane_params_layout", "layer_params_layout", "quant_write_layout",
           "chunks"]

#: Bytes of one lane's record in the store: bias (4), multiplier (4), shift (1).
_LANE_BYTES = QUANT_SHIFT_BEAT + 1


def chunks(config: Config) -> int:
    """Chunks of ``act_lanes`` lanes per row: ``ceil(C / act_lanes)``."""
    return -(-config.cols // config.act_lanes)


def lane_params_layout() -> data.StructLayout:
    """One lane's parameters: ``bias``, ``mult`` (the quantized multiplier ``q``), ``shift``
    (``e``: left when > 0, right when < 0)."""
    return data.StructLayout({"bias": signed(32), "mult": signed(32), "shift": signed(6)})


def layer_params_layout() -> data.StructLayout:
    """A set's per-layer parameters: the output zero point and the clamp bounds."""
    return data.StructLayout({"zp": signed(8), "lo": signed(8), "hi": signed(8)})


def quant_write_layout(config: Config) -> data.StructLayout:
    """One READ_QUANT beat: its set, its index in the set (0 .. ``QUANT_BEATS - 1``) and the
    C byte lanes."""
    return data.StructLayout({
        "set": range(config.quant_sets),
        "beat": range(QUANT_BEATS),
        "data": data.ArrayLayout(8, config.cols),
    })


class QuantParamStore(wiring.Component):
    """The parameter sets, written one READ_QUANT beat at a time, read one chunk at a time.

    Ports:
      w        ``In(stream)`` of ``quant_write_layout``: beat ``b`` of set ``s`` (see
               ``hdl.isa``: bias bytes 0-3, multiplier bytes 4-7, shift 8, zp 9, act_min 10,
               act_max 11). A lane beat (b <= 8) takes ``chunks`` cycles: it writes byte ``b``
               of every lane, one chunk row a cycle, ``ready`` in the last; a layer beat (zp,
               bounds: lane 0) takes one.
      rd_en, rd_set, rd_chunk  a read of chunk ``rd_chunk`` of set ``rd_set``:
      lanes    ``Out(ArrayLayout(lane_params_layout, act_lanes))``, that chunk's parameters the
               cycle after ``rd_en``; they hold while ``rd_en`` is low.
      layer_rd_en, layer_rd_set  a read of set ``layer_rd_set``'s layer parameters:
      layer    ``Out(layer_params_layout)``, the cycle after ``layer_rd_en`` (held likewise).
    The contents survive reset (zero after power-up). A read of a row being written gives
    either value: the controller keeps READ_QUANT and ACTIVATE of one set apart.
    """

    def __init__(self, config: Config):
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {config!r}")
        self.config = config
        lanes = config.act_lanes
        super().__init__({
            "w": In(stream.Signature(quant_write_layout(config))),
            "rd_en": In(1),
            "rd_set": In(range(config.quant_sets)),
            "rd_chunk": In(range(chunks(config))),
            "lanes": Out(data.ArrayLayout(lane_params_layout(), lanes)),
            "layer_rd_en": In(1),
            "layer_rd_set": In(range(config.quant_sets)),
            "layer": Out(layer_params_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        lanes, n = cfg.act_lanes, chunks(cfg)
        row_bits = lanes * _LANE_BYTES * 8
        m.submodules.lane_mem = lane_mem = Memory(shape=row_bits, depth=cfg.quant_sets * n,
                                                  init=[])
        m.submodules.layer_mem = layer_mem = Memory(shape=24, depth=cfg.quant_sets, init=[])
        lw = lane_mem.write_port(granularity=8)
        yw = layer_mem.write_port(granularity=8)
        lr = lane_mem.read_port()
        yr = layer_mem.read_port()

        # Writes: a lane beat walks the chunk rows of its set (``wc``), a layer beat is one
        # write of lane 0 into the set's layer word.
        beat = self.w.payload
        wc = Signal(range(n))
        lane_beat = beat.beat < _LANE_BYTES
        last_chunk = (wc == n - 1) if n > 1 else Const(1)
        m.d.comb += self.w.ready.eq(~lane_beat | last_chunk)
        with m.If(self.w.valid & lane_beat):
            m.d.sync += wc.eq(Mux(last_chunk, 0, wc + 1))
        byte_lanes = [beat.data[c] if c < cfg.cols else Const(0, 8) for c in range(n * lanes)]
        with m.Switch(wc):
            for j in range(n):
                with m.Case(j):
                    chunk_bytes = byte_lanes[j * lanes:(j + 1) * lanes]
                    # Byte ``b`` of each lane's record gets the lane's byte.
                    m.d.comb += lw.data.eq(Cat(*(Cat(*([v] * _LANE_BYTES))
                                                 for v in chunk_bytes)))
        m.d.comb += [
            lw.addr.eq(beat.set * n + wc),
            yw.addr.eq(beat.set),
            yw.data.eq(Cat(beat.data[0], beat.data[0], beat.data[0])),
        ]
        with m.If(self.w.valid):
            with m.If(lane_beat):
                for k in range(lanes):
                    for b in range(_LANE_BYTES):
                        m.d.comb += lw.en[k * _LANE_BYTES + b].eq(beat.beat == b)
            with m.Else():
                for k, b in enumerate((QUANT_ZP_BEAT, QUANT_MIN_BEAT, QUANT_MAX_BEAT)):
                    m.d.comb += yw.en[k].eq(beat.beat == b)

        # Reads.
        m.d.comb += [
            lr.en.eq(self.rd_en), lr.addr.eq(self.rd_set * n + self.rd_chunk),
            yr.en.eq(self.layer_rd_en), yr.addr.eq(self.layer_rd_set),
        ]
        for k in range(lanes):
            rec = lr.data[k * _LANE_BYTES * 8:(k + 1) * _LANE_BYTES * 8]
            lane = self.lanes[k]
            m.d.comb += [lane.bias.eq(rec[:32]), lane.mult.eq(rec[32:64]),
                         lane.shift.eq(rec[64:70])]
        m.d.comb += [self.layer.zp.eq(yr.data[:8]), self.layer.lo.eq(yr.data[8:16]),
                     self.layer.hi.eq(yr.data[16:24])]
        return m
