"""Programs: builders, the instruction and host-in streams, and the file format."""

import json

import numpy as np
import pytest

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim.program import FORMAT, FORMAT_VERSION, Program, Step
from tpugen.sim.quant_beats import set_beats
from tpugen.sim.requant import QuantParams


def p_quant(config):
    return QuantParams(bias=np.arange(config.cols) - 2, multiplier=-123456, shift=-32,
                       out_zp=-128, act_min=-5, act_max=9)


def _full_program(config: Config, seed=0) -> Program:
    rng = np.random.default_rng(seed)
    R, C = config.rows, config.cols
    p = Program(config)
    p.read_host(2, rng.integers(-128, 128, (3, R)))
    p.read_weights(rng.integers(-128, 128, (2, R, C)))
    p.matmul(2, 0, 3, accumulate=False, new_tile=True)
    p.matmul(2, 0, 3, accumulate=True, new_tile=False)
    p.read_quant(1, [QuantParams(bias=np.arange(C) - 2, multiplier=-123456, shift=-32,
                                 out_zp=-128, act_min=-5, act_max=9)])
    p.activate(0, 5, 3, part=0, qset=1)
    p.write_host(5, 3, part=0)
    p.write_host(0, 3, from_acc=True)
    p.nop().sync().read_counters()
    p.raw(0xFFFF_FFFF_FFFF_FFFF)
    p.raw(isa.encode(13), data=rng.integers(-128, 128, (4, 1)), last=[1, 0, 1, 0])
    return p


def test_builders_encode_with_isa():
    cfg = Config(rows=3, cols=5)
    p = _full_program(cfg)
    expect = [
        isa.encode(isa.Op.READ_HOST, dst=2, n=3),
        isa.encode(isa.Op.READ_WEIGHTS, n=2),
        isa.encode(isa.Op.MATMUL, isa.Flag.NEW_TILE, src=2, dst=0, n=3),
        isa.encode(isa.Op.MATMUL, isa.Flag.ACCUMULATE, src=2, dst=0, n=3),
        isa.encode(isa.Op.READ_QUANT, dst=1, n=1),
        isa.encode(isa.Op.ACTIVATE, 1, src=0, dst=5, n=3),
        isa.encode(isa.Op.WRITE_HOST, src=5, n=3),
        isa.encode(isa.Op.WRITE_HOST, isa.Flag.FROM_ACC, src=0, n=3),
        isa.encode(isa.Op.NOP), isa.encode(isa.Op.SYNC), isa.encode(isa.Op.READ_COUNTERS),
        0xFFFF_FFFF_FFFF_FFFF, isa.encode(13),
    ]
    assert p.words() == expect
    assert p[4].fields == {"op": 11, "flags": 0, "src": 0, "dst": 1, "n": 1, "part": 0}
    assert p[4].beats == isa.QUANT_BEATS
    assert np.array_equal(p[4].data[:, :5], set_beats(p_quant(cfg), 5))
    assert "qset=1" in p.disassemble()
    assert p[2].fields["flags"] == isa.Flag.NEW_TILE
    assert "MATMUL" in p.disassemble() and "OP15" in p.disassemble()


def test_host_in_stream_layout():
    cfg = Config(rows=3, cols=5)   # host-in beats carry max(R, C) = 5 lanes
    p = Program(cfg)
    rows = np.array([[1, 2, 3], [-4, -5, -6]])
    tiles = np.arange(2 * 3 * 5).reshape(2, 3, 5) - 15
    p.read_host(0, rows).matmul(0, 0, 1).read_weights(tiles)
    data, last = p.host_in_beats()
    assert data.shape == (2 + 6, 5) and data.dtype == np.int64
    assert np.array_equal(data[:2, :3], rows) and not data[:2, 3:].any()
    # beat i of a tile = tile row i (lanes 0..C-1)
    assert np.array_equal(data[2:], tiles.reshape(6, 5))
    assert last.tolist() == [False, True] + [False] * 5 + [True]

    empty = Program(cfg)
    d, la = empty.host_in_beats()
    assert d.shape == (0, 5) and la.shape == (0,)


def test_read_host_pads_narrow_rows_and_single_tile():
    cfg = Config(rows=4, cols=2)
    p = Program(cfg).read_host(0, [[7], [8]]).read_weights(np.ones((4, 2), dtype=np.int8))
    data, _ = p.host_in_beats()
    assert data[:2].tolist() == [[7, 0, 0, 0], [8, 0, 0, 0]]
    assert p[1].fields["n"] == 1 and p[1].beats == 4


@pytest.mark.parametrize("call, match", [
    (lambda p: p.read_host(0, [[128]]), "int8"),
    (lambda p: p.read_host(0, [[1.5]]), "integer"),
    (lambda p: p.read_host(0, [1, 2]), "2-dimensional"),
    (lambda p: p.read_host(0, np.zeros((1, 5), dtype=int)), "at most R=4"),
    (lambda p: p.read_weights(np.zeros((1, 4, 3), dtype=int)), r"\(n, 4, 2\)"),
    (lambda p: p.matmul(0, 0, 65536), "n must be"),
    (lambda p: p.write_host(-1, 1), "src must be"),
    (lambda p: p.activate(0, 0, 1, part=256), "part must be"),
    (lambda p: p.read_quant(0, QuantParams(bias=[1, 2, 3])), "3 channels, not 2"),
    (lambda p: p.activate(0, 0, 1, qset=16), "flags must be"),
    (lambda p: p.raw(1 << 64), "64-bit"),
    (lambda p: p.raw(0, data=[[1]], last=[1, 0]), "last must have shape"),
    (lambda p: p.raw(0, last=[1]), "without data"),
])
def test_builder_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call(Program(Config(rows=4, cols=2)))


def test_read_quant_takes_quant_params():
    with pytest.raises(TypeError, match="params must be QuantParams, not 1"):
        Program(Config(rows=4, cols=2)).read_quant(0, [QuantParams(), 1])


def test_builders_do_not_check_buffer_bounds():
    cfg = Config(rows=2, cols=2, ub_rows=4, acc_rows=4)
    p = Program(cfg).matmul(60000, 60000, 100).write_host(0, 0).activate(0, 0, 1, part=9)
    assert len(p) == 3


@pytest.mark.parametrize("config", [Config(rows=1, cols=1), Config(rows=3, cols=5),
                                    Config(rows=8, cols=8, acc_width=18)])
def test_save_load_round_trip(tmp_path, config):
    p = _full_program(config, seed=config.rows)
    path = tmp_path / "prog.json"
    p.save(path)
    q = Program.load(path)
    assert q == p
    assert q.config == config and q.isa_version == isa.ISA_VERSION
    assert q.words() == p.words()
    for a, b in zip(p.host_in_beats(), q.host_in_beats(), strict=True):
        assert np.array_equal(a, b)
    d = json.loads(path.read_text())
    assert d["format"] == FORMAT and d["version"] == FORMAT_VERSION
    assert d["steps"][0]["asm"].startswith("READ_HOST")


def test_append_checks_step_data():
    p = Program(Config(rows=2, cols=3))
    with pytest.raises(ValueError, match=r"shape \(beats, 3\)"):
        p.append(Step(0, np.zeros((1, 2), dtype=np.int64), np.array([True])))
    with pytest.raises(ValueError, match=r"host-in lanes \(-128..127\)"):
        p.append(Step(0, np.full((1, 3), 200, dtype=np.int64), np.array([True])))
    with pytest.raises(ValueError, match="one entry per beat"):
        p.append(Step(0, np.zeros((2, 3), dtype=np.int64), np.array([True])))
    with pytest.raises(TypeError):
        p.append(5)


def test_step_equality():
    a = Step(5, np.zeros((1, 2), dtype=np.int64), np.array([True]))
    b = Step(5, np.zeros((1, 2), dtype=np.int64), np.array([True]))
    c = Step(5, np.ones((1, 2), dtype=np.int64), np.array([True]))
    assert a == b and a != c and a != Step(5)


@pytest.mark.parametrize("change, match", [
    (lambda d: d.update(format="other"), "not a tpugen program"),
    (lambda d: d.update(version=1), "unsupported program file version 1"),
    (lambda d: d.update(isa_version=isa.ISA_VERSION + 1), "ISA version"),
    (lambda d: d.pop("steps"), "steps"),
    (lambda d: d["steps"][0].update(data="AAAA"), "step 0 is malformed.*bytes"),
    (lambda d: d["steps"][0].update(last=[99]), "step 0 is malformed.*last"),
    (lambda d: d["steps"][1].update(word="xyz"), "step 1 is malformed"),
    (lambda d: d["steps"][1].pop("word"), "step 1 is malformed"),
    (lambda d: d["config"].update(rows=0), "rows"),
])
def test_load_rejects_bad_files(tmp_path, change, match):
    p = _full_program(Config(rows=2, cols=3))
    d = p.to_dict()
    change(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=match):
        Program.load(path)


def test_load_rejects_non_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        Program.load(path)


@pytest.mark.parametrize("operand, width, dtype", [("bf16", 16, np.int16), ("int4", 4, np.int8),
                                                   ("fp8_e5m2", 8, np.int8)])
def test_operand_lanes_round_trip(tmp_path, operand, width, dtype):
    """Lanes are stored at ``host_lane_width`` (16 bits for bf16): the extreme operand bit
    patterns survive the JSON and the binary files; an operand outside the type's signed
    width, or a lane outside the lane width, is refused."""
    cfg = Config(rows=3, cols=2, operand=operand)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    p = Program(cfg).read_host(0, [[lo, hi, -1], [0, 1, lo]]).read_weights(
        np.full((3, 2), hi)).raw(0, data=[[-128, 127, 5]]).sync()
    data, _ = p.host_in_arrays()
    assert data.dtype == dtype and data[0].tolist() == [lo, hi, -1]
    for name, save in (("p.json", p.save), ("p.bin", p.save_binary)):
        save(tmp_path / name)
        assert Program.load(tmp_path / name) == p
    with pytest.raises(ValueError, match=f"{operand} operands"):
        Program(cfg).read_host(0, [[hi + 1]])
    with pytest.raises(ValueError, match="host-in lanes|signed"):
        Program(cfg).raw(0, data=[[1 << max(width, 8)]])
