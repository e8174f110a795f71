"""The program of a convolution chain on planes (``planes`` module docstring), built in
order: the host-in table, the walks, the fully connected tail, then emission through an
``emit.Emitter`` (weights requested one tile ahead, outputs deferred past the next MATMUL)."""

from __future__ import annotations

import numpy as np

from tpugen.compiler.emit import Emitter, InstructionWords, OutputAction, OutputBlock
from tpugen.compiler.layers import fold_input_zero_point
from tpugen.compiler.operands import ceil_div
from tpugen.compiler.plan import MATMUL_GAP
from tpugen.compiler.plane_layout import (
    MAX_SIDE,
    ConvPlan,
    PlaneLayout,
    PlaneTensor,
    walk_band,
    walks,
)
from tpugen.hdl import isa, window
from tpugen.hdl.activation import activation_timing
from tpugen.hdl.config import Config
from tpugen.hdl.layouts import host_lanes
from tpugen.sim.program import lane_dtype
from tpugen.sim.quant_beats import set_beats
from tpugen.sim.requant import QuantParams

__all__ = ["PlaneBuilder"]


class PlaneBuilder:
    """The program (module docstring), built in order through an ``Emitter``."""

    def __init__(self, config: Config, x: np.ndarray, convs, fcs, tensors, lookahead: int):
        self.config = config
        self.R, self.C = config.rows, config.cols
        self.P = ceil_div(self.C, self.R)
        self.B = x.shape[0]
        self.G = self.B         # images per group (their last planes kept for the tail)
        self.g0 = 0             # the current group's first image
        self.fc_tiles: list = []
        self.s_turn = 0         # the next staging buffer (outputs to the host)
        self.convs, self.fcs, self.tensors = convs, fcs, tensors
        self.lookahead = lookahead
        self.word = InstructionWords()
        self.lanes = host_lanes(config)
        self.dtype = lane_dtype(config)
        self.parts: list[np.ndarray] = []
        self.rows_so_far = 0
        self.events: list[tuple] = []
        self.tiles: list[int] = []
        self.matmuls = [0] * (len(convs) + len(fcs))
        self.act_row = activation_timing(config)[0]
        self.input_base = self._table(self._input_rows(x))
        self.quant_rows: dict = {}
        self.acc_turn = 0

    # --- the host-in table ----------------------------------------------------------------
    def _table(self, rows: np.ndarray) -> int:
        start = self.rows_so_far
        self.parts.append(rows)
        self.rows_so_far += len(rows)
        return start

    def _input_rows(self, x: np.ndarray) -> np.ndarray:
        """Row ``(b * T + t) * H * W + y * W + x``: image b's plane t, pixel (y, x)."""
        src = self.tensors[0]
        B = x.shape[0]
        flat = x.reshape(B, src.hw, -1)
        out = np.zeros((B, src.planes, src.hw, self.lanes), dtype=self.dtype)
        for t in range(src.planes):
            ok = src.chan[t] >= 0
            view = out[:, t]
            view[..., np.flatnonzero(ok)] = flat[:, :, src.chan[t][ok]]
        return out.reshape(-1, self.lanes)

    def _tile(self, block: np.ndarray) -> int:
        """A weight tile (R x C) in the table; its first row."""
        rows = np.zeros((self.R, self.lanes), dtype=self.dtype)
        rows[:, :self.C] = block
        return self._table(rows)

    def _quant(self, key, q: QuantParams, nt: int, n: int) -> None:
        C = self.C
        arrays = []
        for a in q.per_channel(n):
            t = np.zeros(C, dtype=np.int64)
            part = a[nt * C:(nt + 1) * C]
            t[:len(part)] = part
            arrays.append(t)
        tq = QuantParams(bias=arrays[0], multiplier=arrays[1], shift=arrays[2],
                         out_zp=q.out_zp, act_min=q.act_min, act_max=q.act_max)
        beats = np.zeros((isa.QUANT_BEATS, self.lanes), dtype=self.dtype)
        beats[:, :C] = set_beats(tq, C)
        self.quant_rows[key] = self._table(beats)

    # --- events ------------------------------------------------------------------------------
    def _emit(self, word: int, data=()) -> None:
        self.events.append(("i", word, list(data)))

    def _matmul(self, li: int, tile: int, word: int, n: int) -> None:
        self.tiles.append(tile)
        self.matmuls[li] += 1
        self.events.append(("m", word, n))

    def _out(self, action: OutputAction) -> None:
        self.events.append(("o", action))

    def _acc(self, rows: int) -> int:
        """The next half of the accumulators (walks and n-tiles alternate)."""
        half = self.config.acc_rows // 2
        assert rows <= half
        base = self.acc_turn * half
        self.acc_turn ^= 1
        return base

    # --- convolutions -----------------------------------------------------------------------
    def conv_tiles(self, li: int) -> dict:
        conv, src = self.convs[li], self.tensors[li]
        kh, kw, _, cout = conv.weights.shape
        nts = ceil_div(cout, self.C)
        tiles, seen = {}, {}
        for ky in range(kh):
            for kx in range(kw):
                for t in range(src.planes):
                    ok = src.chan[t] >= 0
                    for nt in range(nts):
                        block = np.zeros((self.R, self.C), dtype=np.int64)
                        w = conv.weights[ky, kx][src.chan[t][ok], nt * self.C:(nt + 1) * self.C]
                        block[np.flatnonzero(ok), :w.shape[1]] = w
                        # A zero tile adds nothing (a depthwise convolution's are most): no
                        # MATMUL. An n-tile's first MATMUL starts its sums (no ACCUMULATE).
                        # Equal tiles (a pool's identities) are one table entry.
                        if block.any():
                            key = block.tobytes()
                            if key not in seen:
                                seen[key] = self._tile(block)
                            tiles[(ky, kx, t, nt)] = seen[key]
                        else:
                            tiles[(ky, kx, t, nt)] = None
        firsts = {}
        for nt in range(nts):
            mine = [k for k in tiles if k[3] == nt and tiles[k] is not None]
            if not mine:        # all zero: one MATMUL of zeros still starts the sums
                tiles[(0, 0, 0, nt)] = self._tile(np.zeros((self.R, self.C), dtype=np.int64))
                mine = [(0, 0, 0, nt)]
            firsts[nt] = mine[0]
        tiles["first"] = firsts
        folded = fold_input_zero_point(conv.params, conv.weights.reshape(-1, cout),
                                       conv.in_zp)
        for nt in range(nts):
            self._quant((li, nt), folded, nt, cout)
        return tiles

    def conv_image(self, li: int, b: int, plan: ConvPlan, tiles: dict, layout: PlaneLayout,
                   to_host: bool) -> None:
        """Convolution ``li`` over image ``b``, walk by walk."""
        conv, src, dst = self.convs[li], self.tensors[li], self.tensors[li + 1]
        kh, kw, _, cout = conv.weights.shape
        nts = ceil_div(cout, self.C)
        oh, ow = conv.out_hw
        s = conv.stride[0]
        (dy, dx), (top, left) = conv.dilation, conv.padding
        for wi, (p0, n, oy0, oy1) in enumerate(walks(conv, plan.px)):
            ox0 = p0 - oy0 * ow
            b0, b1 = walk_band(conv, src, oy0, oy1)
            in_h = b1 - b0 + 1
            if li == 0:
                buf = layout.band[wi % len(layout.band)]
                band_rows = in_h * src.w
                bases = [buf + t * (layout.band_size) for t in range(src.planes)]
                for t in range(src.planes):
                    tab = self.input_base + (b * src.planes + t) * src.hw + b0 * src.w
                    self._emit(self.word(isa.Op.READ_HOST, dst=bases[t], n=band_rows),
                               [(tab, band_rows)])
            else:
                bases = [layout.base[li] + t * src.hw + b0 * src.w for t in range(src.planes)]
            self._emit(self.word(isa.Op.NOP, isa.Flag.SHAPE, **window.shape_fields(
                in_w=src.w, in_h=in_h, out_w=ow, stride=s, pad=conv.in_zp)))
            acc = self._acc(nts * n)
            part = window.extent_part(in_h * src.w)
            for ky in range(kh):
                for kx in range(kw):
                    mine = [(t, nt) for t in range(src.planes) for nt in range(nts)
                            if tiles[(ky, kx, t, nt)] is not None]
                    if not mine:
                        continue
                    self._emit(self.word(isa.Op.NOP, isa.Flag.AT, **window.at_fields(
                        iy=oy0 * s + ky * dy - top - b0, ix=ox0 * s + kx * dx - left,
                        ixr=kx * dx - left, ox=ox0)))
                    for t, nt in mine:
                        tile = tiles[(ky, kx, t, nt)]
                        # The tile the array holds already (a pool's identity): no new one.
                        again = bool(self.tiles) and self.tiles[-1] == tile
                        flags = isa.Flag.WINDOW | (0 if again else isa.Flag.NEW_TILE) | (
                            isa.Flag.ACCUMULATE if tiles["first"][nt] != (ky, kx, t, nt)
                            else 0)
                        word = self.word(isa.Op.MATMUL, int(flags), src=bases[t],
                                         dst=acc + nt * n, n=n, part=part)
                        if again:
                            self.matmuls[li] += 1
                            self.events.append(("m0", word, n))
                        else:
                            self._matmul(li, tile, word, n)
            self._conv_outputs(li, b, p0, n, acc, nts, layout, to_host, dst)

    def _conv_outputs(self, li, b, p0, n, acc, nts, layout, to_host,
                      dst: PlaneTensor) -> None:
        """ACTIVATE of each n-tile part into the next planes; to the host, in chunks of
        ``layout.out_stage`` rows through two staging buffers in turn, each then a WRITE_HOST."""
        for nt in range(nts):
            for p in range(self.P):
                t = nt * self.P + p
                if not to_host:
                    bb = b - self.g0 if li + 1 == len(self.convs) else 0
                    mult = self.G if li + 1 == len(self.convs) else 1
                    row = layout.base[li + 1] + (t * mult + bb) * dst.hw + p0
                    self._out(OutputAction(self.word(isa.Op.ACTIVATE, src=acc + nt * n,
                                                     dst=row, n=n, part=p), 1, "av",
                                           n * self.act_row, (li, nt)))
                    continue
                for c0 in range(0, n, layout.out_stage):
                    k = min(layout.out_stage, n - c0)
                    row = layout.base[li + 1] + self.s_turn * layout.out_stage
                    self.s_turn ^= 1
                    self._out(OutputAction(self.word(isa.Op.ACTIVATE, src=acc + nt * n + c0,
                                                     dst=row, n=k, part=p), 1, "av",
                                           k * self.act_row, (li, nt)))
                    self._out(OutputAction(self.word(isa.Op.WRITE_HOST, src=row, n=k), 2,
                                           "ho", k, block=OutputBlock(
                                               b * dst.hw + p0 + c0, k,
                                               nt * self.C + p * self.R, min(self.R, self.C),
                                               1, (nt + 1) * self.C)))

    # --- fully connected layers -------------------------------------------------------------
    def fc_layers(self, layout: PlaneLayout, mb: int) -> None:
        """The fully connected layers' tiles and parameter sets (``fc_group`` runs them)."""
        k = len(self.convs)
        src = self.tensors[k]
        cch = int(src.chan.max()) + 1
        R, C, P = self.R, self.C, self.P
        tiles = []
        for j, fc in enumerate(self.fcs):
            W = fc.weights.astype(np.int64)
            K, N = W.shape
            nts = ceil_div(N, C)
            tj = {}
            if j == 0:
                for q in range(src.hw):
                    for t in range(src.planes):
                        ok = src.chan[t] >= 0
                        rows = q * cch + src.chan[t][ok]
                        for nt in range(nts):
                            block = np.zeros((R, C), dtype=np.int64)
                            w = W[rows, nt * C:(nt + 1) * C]
                            block[np.flatnonzero(ok), :w.shape[1]] = w
                            tj[(q * src.planes + t, nt)] = self._tile(block)
            else:
                prev_nt = ceil_div(self.fcs[j - 1].weights.shape[1], C)
                for kt in range(prev_nt * P):
                    r = np.arange(R)
                    lane = (kt % P) * R + r
                    ch = (kt // P) * C + lane
                    ok = (lane < C) & (ch < K)
                    for nt in range(nts):
                        block = np.zeros((R, C), dtype=np.int64)
                        w = W[ch[ok], nt * C:(nt + 1) * C]
                        block[np.flatnonzero(ok), :w.shape[1]] = w
                        tj[(kt, nt)] = self._tile(block)
            folded = fold_input_zero_point(fc.params, W, fc.in_zp)
            for nt in range(nts):
                self._quant((k + j, nt), folded, nt, N)
            tiles.append(tj)
        self.fc_tiles = tiles

    def fc_group(self, layout: PlaneLayout, mb: int, count: int) -> None:
        """The fully connected layers over the current group's ``count`` images."""
        for m0 in range(0, count, mb):
            rows = min(mb, count - m0)
            for j in range(len(self.fcs)):
                self._fc_block(j, self.fc_tiles[j], m0, rows, layout, mb)

    def _fc_block(self, j: int, tiles: dict, m0: int, rows: int, layout: PlaneLayout,
                  mb: int) -> None:
        k = len(self.convs)
        li = k + j
        src = self.tensors[k]
        R, C, P = self.R, self.C, self.P
        N = self.fcs[j].weights.shape[1]
        nts = ceil_div(N, C)
        kts = src.hw * src.planes if j == 0 else ceil_div(self.fcs[j - 1].weights.shape[1],
                                                          C) * P
        base = layout.base[k]
        walk = j == 0 and rows > 1 and src.hw <= MAX_SIDE and rows <= MAX_SIDE and all(
            base + (t * self.G + m0) * src.hw + ceil_div(rows * src.hw, isa.WINDOW_BLOCK)
            * isa.WINDOW_BLOCK <= self.config.ub_rows for t in range(src.planes))
        if walk:
            self._emit(self.word(isa.Op.NOP, isa.Flag.SHAPE, **window.shape_fields(
                in_w=src.hw, in_h=rows, out_w=1, stride=1, pad=0)))
        acc = self._acc(nts * rows)
        accs = [acc + nt * rows for nt in range(nts)]
        for kt in range(kts):
            if walk:
                q = kt // src.planes
                self._emit(self.word(isa.Op.NOP, isa.Flag.AT, **window.at_fields(
                    iy=0, ix=q, ixr=q, ox=0)))
            for nt in range(nts):
                acc_flag = isa.Flag.ACCUMULATE if kt else 0
                if j == 0:
                    q, t = divmod(kt, src.planes)
                    plane = base + (t * self.G + m0) * src.hw
                    if walk:
                        word = self.word(isa.Op.MATMUL, (isa.Flag.WINDOW | isa.Flag.NEW_TILE
                                                         | acc_flag).value, src=plane,
                                         dst=accs[nt], n=rows,
                                         part=window.extent_part(rows * src.hw))
                        self._matmul(li, tiles[(kt, nt)], word, rows)
                        continue
                    for i in range(rows):
                        flags = (isa.Flag.NEW_TILE if i == 0 else 0) | acc_flag
                        word = self.word(isa.Op.MATMUL, int(flags), src=plane + i * src.hw + q,
                                         dst=accs[nt] + i, n=1)
                        if i == 0:
                            self._matmul(li, tiles[(kt, nt)], word, 1)
                        else:
                            self.events.append(("m0", word, 1))
                    continue
                srow = layout.tail[j - 1] + kt * mb
                word = self.word(isa.Op.MATMUL, (isa.Flag.NEW_TILE | acc_flag).value,
                                 src=srow, dst=accs[nt], n=rows)
                self._matmul(li, tiles[(kt, nt)], word, rows)
        last = j == len(self.fcs) - 1
        for nt in range(nts):
            for p in range(P):
                key = (li, nt)
                if not last:
                    dst = layout.tail[j] + (nt * P + p) * mb
                    self._out(OutputAction(self.word(isa.Op.ACTIVATE, src=accs[nt], dst=dst,
                                                     n=rows, part=p), 1, "av",
                                           rows * self.act_row, key))
                    continue
                self._out(OutputAction(self.word(isa.Op.ACTIVATE, src=accs[nt],
                                                 dst=layout.stage, n=rows, part=p), 1, "av",
                                       rows * self.act_row, key))
                self._out(OutputAction(self.word(isa.Op.WRITE_HOST, src=layout.stage, n=rows),
                                       2, "ho", rows, block=OutputBlock(
                                           self.g0 + m0, rows, nt * C + p * R, min(R, C), 1,
                                           (nt + 1) * C)))

    # --- emission ---------------------------------------------------------------------------
    def program(self):
        quant_order = [e[1].quant for e in self.events if e[0] == "o" and e[1].quant]
        em = Emitter(self.config, self.quant_rows, quant_order)
        table = np.concatenate(self.parts)
        em.load_all_quant()
        requested = 0
        taken = 0

        def request(upto):
            nonlocal requested
            upto = min(upto, len(self.tiles))
            if upto > requested:
                em.emit(self.word(isa.Op.READ_WEIGHTS, n=upto - requested),
                        [(t, self.R) for t in self.tiles[requested:upto]])
                requested = upto

        for ev in self.events:
            if ev[0] == "i":
                em.emit(ev[1], ev[2])
            elif ev[0] in ("m", "m0"):
                if ev[0] == "m":
                    request(taken + 1)
                    taken += 1
                em.emit(ev[1], matmul=True)
                em.flush_due(max(ev[2] + MATMUL_GAP, self.R))
                if ev[0] == "m":
                    request(taken + self.lookahead)
            else:
                ev[1].due = em.matmuls + 1
                em.defer(ev[1])
        em.flush_all()
        em.emit(self.word(isa.Op.SYNC))
        return em.program(table), em.output_blocks
