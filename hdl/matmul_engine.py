"""The matmul engine: feeds unified-buffer rows to the array, tagging each with its
accumulator row."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tpugen.hdl.array import act_layout
from tpugen.hdl.config import Config
from tpugen.hdl.isa import WINDOW_BLOCK
from tpugen.hdl.layouts import acc_bits, ub_bits
from tpugen.hdl.read_ahead import ReadAhead
from tpugen.hdl.unified_buffer import ub_row_layout
from tpugen.hdl.window import WALK_BITS, WINDOW_AT_LAYOUT, WINDOW_SHAPE_LAYOUT

__all__ = ["MatmulEngine", "acc_tag_layout"]


def acc_tag_layout(config: Config) -> data.StructLayout:
    """What travels beside a vector through the array: its accumulator row and mode."""
    return data.StructLayout({"addr": max(1, (config.acc_rows - 1).bit_length()),
                              "accumulate": 1})


class MatmulEngine(wiring.Component):
    """Streams rows ``src .. src+n-1`` of the unified buffer into the array.

    Job (``start`` pulse while ``busy`` is low; the job registers follow the job inputs in every
    cycle ``busy`` is low, so they hold the start cycle's): ``src``, ``dst``, ``n`` (>= 1), the
    range ends ``src_end = src + n`` and ``dst_end = dst + n`` (precomputed by the caller; every
    range in its buffer), ``accumulate``, ``new_tile``. The first vector carries
    ``first = new_tile`` (the array then switches to the next weight tile); every vector's
    transfer into the array outputs ``tag`` (its accumulator row ``dst + b`` and
    ``accumulate``) in the same cycle, for the caller to delay (to the accumulator's request,
    ``hdl.core``). Reads are synchronous (``ub_rd_*``, data the next cycle) and go into a
    register (the ``act`` payload: the block RAM's read data feeds no logic), two rows ahead
    (``ReadAhead`` with latency 2), so that rows enter the array one per cycle while
    ``act.ready`` holds: the first row three cycles after ``start``. ``busy`` ends in the cycle
    after the last row entered the array; ``done`` pulses with that transfer, so the first row
    of the next job enters four cycles after the last of this one at the soonest: with a job's
    accumulator rows distinct, rows come back to the accumulator at least that far apart (its
    ``ACC_REPEAT_GAP`` rule, which spares it a bypass). ``ub_lo`` / ``ub_hi`` and ``acc_lo`` /
    ``acc_hi`` (registers) are the job's row ranges while ``busy``.

    With ``Config.window`` the engine also holds the window walk (``hdl.window``): its SHAPE
    and AT registers load ``body`` in a cycle ``set_shape`` / ``set_at`` is high (a NOP
    issuing; they take effect for jobs started later). ``shape_word`` / ``at_word``: the word
    at issue is a NOP SHAPE / AT, issuing or not (from the issue register, so that the walk's
    start row ``iy * in_w`` is multiplied from registers into a register, off the job's path).
    A job with ``window`` set sends the walk's vectors from the plane at ``src`` (``src_end``:
    the extent's end) with the same timing as rows; a vector outside the plane is the pad lane
    in every lane and reads no row.
    ``window_bad`` (combinational, from registers and ``part``): a window job would be refused
    (a zero SHAPE field, or ``part`` too small for the plane).
    """

    def __init__(self, config: Config):
        self.config = config
        uw, xw = ub_bits(config), acc_bits(config)
        nw = min(config.ub_rows, config.acc_rows).bit_length()
        super().__init__({
            "start": In(1),
            "src": In(uw),
            "src_end": In(uw),
            "dst": In(xw),
            "dst_end": In(xw),
            "n": In(nw),
            "accumulate": In(1),
            "new_tile": In(1),
            "busy": Out(1),
            "done": Out(1),
            "ub_lo": Out(uw),
            "ub_hi": Out(uw),
            "acc_lo": Out(xw),
            "acc_hi": Out(xw),
            "ub_rd_en": Out(1),
            "ub_rd_addr": Out(uw),
            "ub_rd_data": In(ub_row_layout(config)),
            "act": Out(stream.Signature(act_layout(config))),
            "tag_valid": Out(1),
            "tag": Out(acc_tag_layout(config)),
            **({"window": In(1), "part": In(8), "set_shape": In(1), "set_at": In(1),
                "shape_word": In(1), "at_word": In(1),
                "body": In(WINDOW_SHAPE_LAYOUT.size), "window_bad": Out(1)}
               if config.window else {}),
        })

    def elaborate(self, platform):
        m = Module()
        src, src_end = Signal.like(self.src), Signal.like(self.src_end)
        dst, dst_end = Signal.like(self.dst), Signal.like(self.dst_end)
        n = Signal.like(self.n)
        acc, first = Signal(), Signal()   # first: the next row is a new tile's first
        row_acc = Signal.like(self.dst)    # the accumulator row of the next row: dst + rows sent
        left = Signal.like(self.n)     # rows still to enter
        final = Signal()               # left == 1, as a register
        busy = Signal()
        go = self.act.valid & self.act.ready
        ahead = ReadAhead(m, active=busy, count=n, go=go, latency=2)
        row = Signal(ub_row_layout(self.config))     # the row offered to the array
        with m.If(ahead.load):
            m.d.sync += row.eq(self.ub_rd_data)
        m.d.comb += [
            self.busy.eq(busy),
            self.ub_lo.eq(src), self.ub_hi.eq(src_end),
            self.acc_lo.eq(dst), self.acc_hi.eq(dst_end),
            self.ub_rd_en.eq(ahead.read),
            self.ub_rd_addr.eq(src + ahead.issued),
        ]
        if self.config.window:
            self._walk(m, ahead, busy, src, row)
        m.d.comb += [
            self.act.valid.eq(ahead.staged),
            self.act.payload.data.eq(row),
            self.act.payload.first.eq(first),
            self.tag_valid.eq(go),
            self.tag.addr.eq(row_acc),
            self.tag.accumulate.eq(acc),
        ]
        with m.If(go):
            m.d.sync += [row_acc.eq(row_acc + 1), left.eq(left - 1), final.eq(left == 2),
                         first.eq(0)]
            with m.If(final):
                m.d.comb += self.done.eq(1)
                m.d.sync += busy.eq(0)
        with m.If(~busy):      # job fields follow the inputs while idle: the start cycle's stay
            m.d.sync += [src.eq(self.src), src_end.eq(self.src_end), dst.eq(self.dst),
                         dst_end.eq(self.dst_end), n.eq(self.n),
                         acc.eq(self.accumulate), first.eq(self.new_tile),
                         row_acc.eq(self.dst), left.eq(self.n), final.eq(self.n == 1),
                         busy.eq(self.start), *ahead.restart()]
        return m

    def _walk(self, m, ahead: ReadAhead, busy, src, row):
        """The window walk: its registers, the job's walk, the pad lanes (``hdl.window``)."""
        shape = Signal(WINDOW_SHAPE_LAYOUT)
        at = Signal(WINDOW_AT_LAYOUT)
        shape_ok = Signal()
        blocks = Signal(11)         # the plane's rows in WINDOW_BLOCKs, rounded up
        sh, new_at = WINDOW_SHAPE_LAYOUT(self.body), WINDOW_AT_LAYOUT(self.body)
        at_row = Signal(16)         # at.iy * shape.in_w (mod 2**16), kept with the registers
        with m.If(self.set_shape | self.set_at):
            m.d.sync += at_row.eq(Mux(self.at_word, new_at.iy, at.iy)
                                  * Mux(self.shape_word, sh.in_w, shape.in_w))
        with m.If(self.set_shape):
            m.d.sync += [shape.eq(self.body), blocks.eq(
                (sh.in_w * sh.in_h + WINDOW_BLOCK - 1) >> WINDOW_BLOCK.bit_length() - 1),
                shape_ok.eq(Cat(sh.in_w != 0, sh.in_h != 0, sh.out_w != 0, sh.stride != 0).all())]
        with m.If(self.set_at):
            m.d.sync += at.eq(self.body)
        m.d.comb += self.window_bad.eq(~shape_ok | (blocks > self.part + 1))
        # The job's copy (a NOP may change the registers while the job runs).
        win = Signal()
        job = Signal(WINDOW_SHAPE_LAYOUT)
        s_in_w = Signal(12)         # stride * in_w: the address step of a row of the walk
        ixr = Signal(signed(WALK_BITS))
        wy, wx = Signal(signed(WALK_BITS)), Signal(signed(WALK_BITS))
        wox = Signal(8)
        waddr = Signal(16)          # the unified-buffer row of (wy, wx): src + wy * in_w + wx
        inside = Signal()           # (wy, wx) is in the plane; a register like waddr, so the
                                    # read's enable and address come from registers
        pad_fetched = Signal()      # the row on the read port is a pad
        ny, nx = Signal(signed(WALK_BITS)), Signal(signed(WALK_BITS))   # the next (wy, wx)

        def in_plane(y, x, s):
            return (y >= 0) & (y < s.in_h) & (x >= 0) & (x < s.in_w)

        with m.If(~busy):
            m.d.sync += [win.eq(self.window), job.eq(shape), s_in_w.eq(shape.stride * shape.in_w),
                         ixr.eq(at.ixr), wy.eq(at.iy), wx.eq(at.ix), wox.eq(at.ox),
                         waddr.eq(self.src + at_row + at.ix),
                         inside.eq(in_plane(at.iy, at.ix, shape))]
        with m.If(win):
            m.d.comb += [self.ub_rd_en.eq(ahead.read & inside), self.ub_rd_addr.eq(waddr)]
        row_end = wox == job.out_w - 1
        m.d.comb += [ny.eq(Mux(row_end, wy + job.stride, wy)),
                     nx.eq(Mux(row_end, ixr, wx + job.stride))]
        with m.If(busy & ahead.read):
            m.d.sync += [pad_fetched.eq(win & ~inside), wy.eq(ny), wx.eq(nx),
                         inside.eq(in_plane(ny, nx, job)), wox.eq(Mux(row_end, 0, wox + 1)),
                         waddr.eq(waddr + Mux(row_end, s_in_w + ixr - wx, job.stride))]
        width = self.config.operand_width
        with m.If(ahead.load & pad_fetched):
            m.d.sync += row.eq(Cat(*[job.pad[:width]] * self.config.rows))
