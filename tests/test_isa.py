"""The ISA tables (hdl/isa.py): the encoder and decoder against the hardware layout, the op rules
against the documented ones, and the controller's interlocks derived from them."""

import numpy as np
import pytest

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.controller import _interlocks
from tpugen.hdl.layouts import STATUS_COUNTERS, STATUS_LAYOUT

Op, Flag, Cause, Buffer = isa.Op, isa.Flag, isa.Cause, isa.Buffer

CONFIGS = [Config(rows=4, cols=4, ub_rows=16, acc_rows=8),
           Config(rows=3, cols=5, ub_rows=12, acc_rows=20, quant_sets=3),
           Config(rows=8, cols=2, ub_rows=9, acc_rows=5),
           Config(rows=1, cols=1, ub_rows=4, acc_rows=4),
           Config(rows=4, cols=4, ub_rows=200, acc_rows=8, window=1)]


def _edge(rng, field: isa.Field) -> int:
    """A value of ``field``: an edge (min, max, 0, +-1 around them) or random."""
    lo, hi = field.min, field.max
    choices = [lo, lo + 1, hi, hi - 1, 0, 1, int(rng.integers(lo, hi + 1))]
    return int(choices[int(rng.integers(0, len(choices)))])


def _layout_word(op, flags, fields) -> int:
    """The word by the Amaranth layout (the hardware's view of the fields)."""
    value = isa.INSTR_LAYOUT.const({"op": op, "flags": flags, "body": {"mem": fields}})
    return value.as_value().value


def test_encoder_matches_the_hardware_layout():
    rng = np.random.default_rng(1)
    for k in range(3000):
        op = k % 16 if k < 64 else int(rng.integers(0, 16))
        flags = int(rng.integers(0, 16))
        fields = {f.name: _edge(rng, f) for f in isa.body_fields(op)}
        word = isa.encode(op, flags, **fields)
        assert word == _layout_word(op, flags, fields), (op, flags, fields)
        assert isa.decode(word) == {"op": op, "flags": flags, **fields}
        # Decoding any word agrees with the layout's view of it.
        raw = int(rng.integers(0, 1 << 63)) << 1 | int(rng.integers(0, 2))
        view = isa.INSTR_LAYOUT.from_bits(raw)
        got = isa.decode(raw)
        body = view.body.mem
        assert got == {"op": int(view.op), "flags": int(view.flags),
                       **{f.name: int(getattr(body, f.name)) for f in isa.body_fields(got["op"])}}


def test_fields_and_layouts_agree():
    mem = isa.INSTR_LAYOUT["body"].offset
    for f in isa.MEM_FIELDS:
        assert isa.MEM_LAYOUT[f.name].offset + mem == f.offset
        assert isa.MEM_LAYOUT[f.name].shape == f.shape
    for f in isa.HEADER_FIELDS:
        assert isa.INSTR_LAYOUT[f.name].offset == f.offset
    assert max(f.offset + f.width for f in isa.MEM_FIELDS) <= isa.INSTR_BITS
    counters = [STATUS_LAYOUT[c.name.lower()] for c in isa.Counter]
    assert [c.offset for c in counters] == list(range(STATUS_COUNTERS.start, STATUS_COUNTERS.stop,
                                                      64))


@pytest.mark.parametrize("call, match", [
    (lambda: isa.encode(16), "op must be an integer in 0..15"),
    (lambda: isa.encode(Op.MATMUL, 16), "flags must be"),
    (lambda: isa.encode(Op.MATMUL, n=1 << 16), "n must be an integer in 0..65535"),
    (lambda: isa.encode(Op.MATMUL, part=256), "part must be"),
    (lambda: isa.encode(Op.MATMUL, src=-1), "src must be"),
    (lambda: isa.encode(Op.MATMUL, src=1.5), "src must be"),
    (lambda: isa.encode(Op.READ_HOST, mult=1), "fields of op 9"),
    (lambda: isa.encode(Op.READ_QUANT, qset=1), "fields of op 11"),
    (lambda: isa.decode(1 << 64), "64-bit"),
    (lambda: isa.decode(-1), "64-bit"),
])
def test_encode_decode_reject_bad_values(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_encode_accepts_numpy_integers_and_enums():
    assert isa.encode(Op.MATMUL, Flag.NEW_TILE, src=np.int64(3), n=np.uint8(2)) == \
        isa.encode(1, 2, src=3, n=2)


def _documented_cause(f, c: Config) -> Cause:
    """BAD_OPCODE / OUT_OF_RANGE as the golden model's docstring stated them, op by op."""
    op = f["op"]
    if op not in set(Op):
        return Cause.BAD_OPCODE
    src, dst, n, part = f["src"], f["dst"], f["n"], f["part"]
    R, C = c.rows, c.cols
    bad = {
        # MATMUL WINDOW (hdl.window): needs the window walk; reads its extent, (part+1)*64
        Op.MATMUL: n == 0 or dst + n > c.acc_rows or (
            (not c.window or src + (part + 1) * 64 > c.ub_rows) if f["flags"] & Flag.WINDOW
            else src + n > c.ub_rows),
        Op.ACTIVATE: (n == 0 or src + n > c.acc_rows or dst + n > c.ub_rows
                      or (part > 0 and part * R >= C) or f["flags"] >= c.quant_sets),
        Op.WRITE_HOST: n == 0 or (src + n > c.acc_rows or part != 0
                                  if f["flags"] & Flag.FROM_ACC
                                  else src + n > c.ub_rows or (part > 0 and part * C >= R)),
        Op.READ_HOST: n == 0 or dst + n > c.ub_rows,
        Op.READ_WEIGHTS: n == 0,
        Op.READ_QUANT: n == 0 or dst + n > c.quant_sets,
        Op.LOAD_WEIGHTS: n == 0 or src + n > c.weight_tiles,
        Op.STORE_WEIGHTS: n == 0 or dst + n > c.weight_tiles,
        # PROGRAM: CALL (no STORE, no TAG) reads src.., STORE (STORE only) writes dst..
        Op.PROGRAM: (c.program_words == 0 or f["flags"] & 3 == 0 and src + n > c.program_words
                     or f["flags"] & 3 == 1 and dst + n > c.program_words),
    }.get(op, False)
    if bad:
        return Cause.OUT_OF_RANGE
    if op == Op.PROGRAM and f["flags"] & Flag.NESTED:
        return Cause.BAD_PROGRAM
    if op == Op.PROGRAM and f["flags"] & Flag.MISMATCH:
        return Cause.WRONG_MODEL
    return Cause.NONE


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_static_cause_is_the_documented_rule(config):
    rng = np.random.default_rng(config.rows)
    small = max(config.ub_rows, config.acc_rows) + 2
    for _ in range(4000):
        op = int(rng.integers(0, 16))
        fields = {f.name: int(rng.integers(0, small)) if f.name in ("src", "dst")
                  else int(rng.integers(0, 6)) if f.name in ("n", "part") else _edge(rng, f)
                  for f in isa.body_fields(op)}
        if rng.random() < 0.05:
            fields.update(src=0xFFFF, dst=int(rng.integers(0, 0x10000)), n=0xFFFF)
        f = isa.decode(isa.encode(op, int(rng.integers(0, 16)), **fields))
        assert isa.static_cause(f, config) == _documented_cause(f, config), f


def test_op_rules():
    c = Config(rows=3, cols=5, ub_rows=16, acc_rows=8)
    R = c.rows

    def f(op, flags=0, **kw):
        return isa.decode(isa.encode(op, flags, **kw))

    assert isa.accesses(f(Op.MATMUL, 3, src=1, dst=2, n=3), c) == [
        (Buffer.UB, 1, 4, False), (Buffer.ACC, 2, 5, True)]
    assert isa.accesses(f(Op.ACTIVATE, 3, src=0, dst=4, n=2), c) == [
        (Buffer.ACC, 0, 2, False), (Buffer.UB, 4, 6, True), (Buffer.QUANT, 3, 4, False)]
    assert isa.accesses(f(Op.READ_QUANT, dst=1, n=2), c) == [(Buffer.QUANT, 1, 3, True)]
    assert isa.accesses(f(Op.WRITE_HOST, src=3, dst=9, n=2), c) == [(Buffer.UB, 3, 5, False)]
    assert isa.accesses(f(Op.WRITE_HOST, Flag.FROM_ACC, src=3, n=2), c) == [
        (Buffer.ACC, 3, 5, False)]
    assert isa.accesses(f(Op.READ_HOST, src=7, dst=1, n=4), c) == [(Buffer.UB, 1, 5, True)]
    for op in (Op.NOP, Op.SYNC, Op.READ_COUNTERS, Op.READ_WEIGHTS, 8, 13, 15):
        assert isa.accesses(f(op), c) == []
    assert isa.accesses(f(Op.LOAD_WEIGHTS, src=2, n=3), c) == [(Buffer.WMEM, 2, 5, False)]
    assert isa.accesses(f(Op.STORE_WEIGHTS, dst=1, n=2), c) == [(Buffer.WMEM, 1, 3, True)]
    assert isa.accesses(f(Op.PROGRAM, src=4, dst=9, n=2), c) == [(Buffer.PMEM, 4, 6, False)]
    assert isa.accesses(f(Op.PROGRAM, Flag.STORE, src=4, dst=9, n=2), c) == [
        (Buffer.PMEM, 9, 11, True)]
    assert isa.accesses(f(Op.PROGRAM, Flag.TAG, src=4, dst=9, n=2), c) == []
    assert isa.host_in_beats(f(Op.STORE_WEIGHTS, n=2), c) == 2 * R

    assert isa.host_in_beats(f(Op.READ_HOST, n=5), c) == 5
    assert isa.host_in_beats(f(Op.READ_WEIGHTS, n=2), c) == 2 * R
    assert isa.host_in_beats(f(Op.READ_QUANT, n=3), c) == 3 * isa.QUANT_BEATS == 36
    assert isa.host_out_beats(f(Op.WRITE_HOST, n=6), c) == 6
    assert isa.host_out_beats(f(Op.SYNC), c) == 1
    assert isa.host_out_beats(f(Op.READ_COUNTERS), c) == isa.COUNTER_BEATS == 4 * len(isa.Counter)
    for op in set(Op) - {Op.READ_HOST, Op.READ_WEIGHTS, Op.READ_QUANT, Op.STORE_WEIGHTS}:
        assert isa.host_in_beats(f(op), c) == 0
        assert isa.has_host_data(op) is False
    assert all(isa.has_host_data(op) is True
               for op in (Op.READ_HOST, Op.READ_WEIGHTS, Op.READ_QUANT, Op.STORE_WEIGHTS, 8, 15))
    assert isa.parts(Op.ACTIVATE, 0, c) == 2            # ceil(5 / 3)
    assert isa.parts(Op.WRITE_HOST, 0, c) == 1          # ceil(3 / 5)
    assert isa.parts(Op.WRITE_HOST, 0, Config(rows=5, cols=2)) == 3
    assert isa.parts(Op.WRITE_HOST, Flag.FROM_ACC, Config(rows=5, cols=2)) == 1
    assert isa.parts(Op.MATMUL, 0, c) is None
    assert isa.OPS[Op.READ_HOST].fields == ("dst", "n")
    assert isa.OPS[Op.READ_QUANT].fields == ("dst", "n")
    assert isa.OPS[Op.ACTIVATE].flag_mask == 0xF        # the flags are the parameter set
    assert isa.OPS[Op.MATMUL].flag_mask == Flag.ACCUMULATE | Flag.NEW_TILE | Flag.WINDOW
    assert isa.OPS[Op.NOP].flag_mask == Flag.SHAPE | Flag.AT
    # A window MATMUL reads its extent, (part + 1) * WINDOW_BLOCK rows (hdl.window).
    w = f(Op.MATMUL, Flag.WINDOW, src=3, dst=1, n=2, part=1)
    assert isa.accesses(w, c) == [(Buffer.UB, 3, 3 + 2 * isa.WINDOW_BLOCK, False),
                                  (Buffer.ACC, 1, 3, True)]

    assert isa.conflict([(Buffer.UB, 0, 4, False)], [(Buffer.UB, 3, 5, True)])
    assert not isa.conflict([(Buffer.UB, 0, 4, False)], [(Buffer.UB, 3, 5, False)])
    assert not isa.conflict([(Buffer.UB, 0, 4, True)], [(Buffer.ACC, 0, 4, True)])
    assert not isa.conflict([(Buffer.UB, 0, 4, True)], [(Buffer.UB, 4, 5, True)])

    assert all(isa.body_fields(op) == isa.MEM_FIELDS for op in range(16))
    with pytest.raises(ValueError, match="op must be an integer in 0..15"):
        isa.body_fields(16)
    with pytest.raises(ValueError, match="decoded word"):
        isa.accesses({"src": 1}, c)
    with pytest.raises(TypeError, match="Config"):
        isa.static_cause(f(Op.NOP), None)


def test_controller_interlocks_are_the_documented_ones():
    """The pairs the controller derives from the table (the controller's docstring): an
    issuing instruction's rows against the jobs in flight of other engines."""
    got = {(op.name, a.field, e, buf.value, rows) for op, a, e, buf, rows in _interlocks()}
    assert got == {
        # READ_HOST: its UB rows vs. the UB readers and the other UB writer.
        ("READ_HOST", "dst", "av_ub", "ub", True), ("READ_HOST", "dst", "mm_ub", "ub", True),
        ("READ_HOST", "dst", "ho", "ub", True),
        # MATMUL: its UB rows vs. the UB writers; its ACC rows vs. the ACC readers.
        ("MATMUL", "src", "hi_ub", "ub", True), ("MATMUL", "src", "av_ub", "ub", True),
        ("MATMUL", "dst", "ho", "acc", True), ("MATMUL", "dst", "av_acc", "acc", True),
        # ACTIVATE: its ACC rows vs. MATMUL results not yet written, the ACC read port; its UB
        # rows vs. every other UB reader and writer.
        ("ACTIVATE", "src", "mm_acc", "acc", True), ("ACTIVATE", "src", "drain", "acc", True),
        ("ACTIVATE", "src", "ho", "acc", False),
        ("ACTIVATE", "dst", "hi_ub", "ub", True), ("ACTIVATE", "dst", "mm_ub", "ub", True),
        ("ACTIVATE", "dst", "ho", "ub", True),
        # WRITE_HOST: its rows vs. their writers (and the ACC read port).
        ("WRITE_HOST", "src", "hi_ub", "ub", True), ("WRITE_HOST", "src", "av_ub", "ub", True),
        ("WRITE_HOST", "src", "mm_acc", "acc", True), ("WRITE_HOST", "src", "drain", "acc", True),
        ("WRITE_HOST", "src", "av_acc", "acc", False),
    }
