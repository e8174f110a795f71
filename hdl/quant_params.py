"""The requantization parameter sets: what READ_QUANT loads and ACTIVATE reads.

``Config.quant_sets`` sets, each per output lane ``c`` a bias (int32), a multiplier (int32) and
a shift (signed 6 bits), and per set the output zero point and the clamp bounds (int8 each).
The lanes are stored in ``chunks = ceil(C / L)`` rows per set (L = ``Config.activation_lanes``),
each row the L lanes that the activation unit processes together and the set's layer values, so
a read gives exactly the parameters of one chunk (on an FPGA: block RAM or LUT RAM, no C-lane
register file). Both stores take a READ_QUANT beat in ``chunks`` cycles (it writes every chunk
of its set, one a cycle, ``ready`` in the last). Their contents survive reset (zero after
power-up); a read of a row being written gives either value: the controller keeps READ_QUANT and
ACTIVATE of one set apart.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import Config, check_config
from tpugen.hdl.isa import (
    QUANT_BEATS,
    QUANT_BIAS_BEATS,
    QUANT_MAX_BEAT,
    QUANT_MIN_BEAT,
    QUANT_MULT_BEATS,
    QUANT_SHIFT_BEAT,
    QUANT_ZP_BEAT,
)

__all__ = ["QuantParamStore", "QuantWordStore", "WORD_ORDER", "word_store_depth",
           "lane_params_layout", "layer_params_layout", "quant_write_layout", "chunks"]

#: Bytes of one lane's record in the store: bias (4), multiplier (4), shift (1).
_LANE_BYTES = QUANT_SHIFT_BEAT + 1
#: The beats of a set in the order ``QuantWordStore`` keeps a chunk's words (the order the
#: serial requantizer, ``hdl.serial_requant``, uses them): the bias bytes, the shift, the
#: multiplier bytes, the zero point and the bounds.
WORD_ORDER = (*QUANT_BIAS_BEATS, QUANT_SHIFT_BEAT, *QUANT_MULT_BEATS, QUANT_ZP_BEAT,
              QUANT_MIN_BEAT, QUANT_MAX_BEAT)
assert sorted(WORD_ORDER) == list(range(QUANT_BEATS))


def chunks(config: Config) -> int:
    """Chunks of L = ``activation_lanes`` lanes per row: ``ceil(C / L)``."""
    return -(-config.cols // config.activation_lanes)


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


def _walk_chunks(m: Module, w, n: int):
    """A write beat on stream ``w`` walks the ``n`` chunks of its set, one a cycle, ``ready`` in
    the last: returns the chunk counter (a register) and the last-chunk flag."""
    wc = Signal(range(n), name="wc")
    last_chunk = (wc == n - 1) if n > 1 else Const(1)
    m.d.comb += w.ready.eq(last_chunk)
    with m.If(w.valid):
        m.d.sync += wc.eq(Mux(last_chunk, 0, wc + 1))
    return wc, last_chunk


def _chunk_bytes(config: Config, beat) -> list[list]:
    """The byte lanes of a READ_QUANT beat by chunk: ``chunks`` lists of ``activation_lanes``
    bytes (zeros past the C lanes)."""
    lanes, n = config.activation_lanes, chunks(config)
    padded = [beat.data[c] if c < config.cols else Const(0, 8) for c in range(n * lanes)]
    return [padded[j * lanes:(j + 1) * lanes] for j in range(n)]


class QuantParamStore(wiring.Component):
    """The parameter sets, written one READ_QUANT beat at a time, read one chunk at a time.

    Storage: ``quant_sets * 2**b`` rows (``b`` bits for a chunk index), row ``set * 2**b + j``
    (the bits of ``set`` above those of ``j``: no multiplier in the address when ``chunks`` is
    not a power of two) holding chunk ``j``'s lanes (9 bytes each: bias, multiplier, shift) and
    the set's layer bytes (zero point, act_min, act_max) after them, so that one read gives a
    chunk everything it needs.

    Ports:
      w        ``In(stream)`` of ``quant_write_layout``: beat ``b`` of set ``s`` (see
               ``hdl.isa``: bias bytes 0-3, multiplier bytes 4-7, shift 8, zp 9, act_min 10,
               act_max 11, the layer bytes from lane 0), written into every chunk row of its
               set (module docstring).
      rd_en, rd_set, rd_chunk  a read of chunk ``rd_chunk`` of set ``rd_set``:
      lanes    ``Out(ArrayLayout(lane_params_layout, activation_lanes))`` and
      layer    ``Out(layer_params_layout)``: that chunk's parameters and its set's, the cycle
               after ``rd_en``; they hold while ``rd_en`` is low.
    """

    def __init__(self, config: Config):
        self.config = check_config(config)
        super().__init__({
            "w": In(stream.Signature(quant_write_layout(config))),
            "rd_en": In(1),
            "rd_set": In(range(config.quant_sets)),
            "rd_chunk": In(range(chunks(config))),
            "lanes": Out(data.ArrayLayout(lane_params_layout(), config.activation_lanes)),
            "layer": Out(layer_params_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        lanes, n = cfg.activation_lanes, chunks(cfg)
        layer_bytes = QUANT_BEATS - _LANE_BYTES
        row_bytes = lanes * _LANE_BYTES + layer_bytes
        chunk_bits = (n - 1).bit_length()
        m.submodules.mem = mem = Memory(shape=8 * row_bytes, depth=cfg.quant_sets << chunk_bits,
                                        init=[])

        def row(set_, chunk):
            return Cat(chunk[:chunk_bits], set_) if chunk_bits else set_
        wp = mem.write_port(granularity=8)
        rp = mem.read_port()

        # Writes: a beat walks the chunk rows of its set (``wc``).
        beat = self.w.payload
        wc, _ = _walk_chunks(m, self.w, n)
        with m.Switch(wc):
            for j, chunk_bytes in enumerate(_chunk_bytes(cfg, beat)):
                with m.Case(j):
                    # Byte ``b`` of each lane's record gets the lane's byte; the layer bytes
                    # get lane 0's.
                    m.d.comb += wp.data.eq(Cat(*(Cat(*([v] * _LANE_BYTES)) for v in chunk_bytes),
                                               *([beat.data[0]] * layer_bytes)))
        m.d.comb += wp.addr.eq(row(beat.set, wc))
        with m.If(self.w.valid):
            for b in range(_LANE_BYTES):
                for k in range(lanes):
                    m.d.comb += wp.en[k * _LANE_BYTES + b].eq(beat.beat == b)
            for b in range(layer_bytes):
                m.d.comb += wp.en[lanes * _LANE_BYTES + b].eq(beat.beat == _LANE_BYTES + b)

        # Reads.
        m.d.comb += [rp.en.eq(self.rd_en), rp.addr.eq(row(self.rd_set, self.rd_chunk))]
        for k in range(lanes):
            rec = rp.data[k * _LANE_BYTES * 8:(k + 1) * _LANE_BYTES * 8]
            lane = self.lanes[k]
            m.d.comb += [lane.bias.eq(rec[:32]), lane.mult.eq(rec[32:64]),
                         lane.shift.eq(rec[64:70])]
        base = lanes * _LANE_BYTES * 8
        m.d.comb += [self.layer.zp.eq(rp.data[base:base + 8]),
                     self.layer.lo.eq(rp.data[base + 8:base + 16]),
                     self.layer.hi.eq(rp.data[base + 16:base + 24])]
        return m


def word_store_depth(config: Config) -> int:
    """Words of a ``QuantWordStore``: ``QUANT_BEATS`` per chunk of each set."""
    return config.quant_sets * chunks(config) * QUANT_BEATS


class QuantWordStore(wiring.Component):
    """The parameter sets for the serial requantizer (``hdl.serial_requant``), written one
    READ_QUANT beat at a time, read one word at a time: a word is one byte of each of a chunk's
    ``activation_lanes`` lanes (on an FPGA a byte-wide block RAM for one lane, no wide register
    file and no wide multiplexer).

    Storage: ``word_store_depth`` words; chunk ``j`` of set ``s`` is words ``(s * chunks + j) *
    12`` onwards, one per beat in ``WORD_ORDER`` (so a chunk's words, and the chunks of a set,
    are read at consecutive addresses); the layer words (zero point, bounds) hold lane 0's byte
    of their beat in byte lane 0.

    Ports:
      w        ``In(stream)`` of ``quant_write_layout``: beat ``b`` of set ``s`` (``hdl.isa``),
               written as its word of every chunk of its set (module docstring).
      rd_en, rd_addr  a read of word ``rd_addr``;
      rd_data  ``Out(ArrayLayout(8, activation_lanes))``: that word, the cycle after ``rd_en``;
               it holds while ``rd_en`` is low.
    """

    def __init__(self, config: Config):
        self.config = check_config(config)
        self.depth = word_store_depth(config)
        super().__init__({
            "w": In(stream.Signature(quant_write_layout(config))),
            "rd_en": In(1),
            "rd_addr": In(range(self.depth)),
            "rd_data": Out(data.ArrayLayout(8, config.activation_lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        lanes, n = cfg.activation_lanes, chunks(cfg)
        m.submodules.mem = mem = Memory(shape=8 * lanes, depth=self.depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port()

        # Writes: a beat walks the chunks of its set (``wc``); ``row`` is ``12 * wc``.
        beat = self.w.payload
        wc, last_chunk = _walk_chunks(m, self.w, n)
        row = Signal(range(n * QUANT_BEATS))
        with m.If(self.w.valid):
            m.d.sync += row.eq(Mux(last_chunk, 0, row + QUANT_BEATS))
        set_base = Array(Const(s * n * QUANT_BEATS, range(self.depth))
                         for s in range(cfg.quant_sets))
        position = Array(Const(WORD_ORDER.index(b), 4) for b in range(QUANT_BEATS))
        m.d.comb += wp.addr.eq(set_base[beat.set] + position[beat.beat] + row)
        with m.If(beat.beat >= QUANT_ZP_BEAT):
            m.d.comb += wp.data.eq(Cat([beat.data[0]] * lanes))
        with m.Else():
            with m.Switch(wc):
                for j, chunk_bytes in enumerate(_chunk_bytes(cfg, beat)):
                    with m.Case(j):
                        m.d.comb += wp.data.eq(Cat(*chunk_bytes))
        m.d.comb += wp.en.eq(self.w.valid)

        # Reads.
        m.d.comb += [rp.en.eq(self.rd_en), rp.addr.eq(self.rd_addr),
                     self.rd_data.eq(rp.data)]
        return m
