"""Memory traffic (``sim.traffic``) and the energy estimate (``sim.energy``) of programs, and
their place in ``tpugen sim``'s report."""

import json

import numpy as np
import pytest

from tpugen import cli
from tpugen.compiler import compile_gemm
from tpugen.compiler.resident import make_resident
from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.sim import energy as en
from tpugen.sim.program import Program
from tpugen.sim.requant import QuantParams
from tpugen.sim.traffic import program_traffic


def _quant(cols):
    return QuantParams(bias=np.zeros(cols, dtype=np.int64), multiplier=1 << 30, shift=-3,
                       out_zp=0, act_min=-128, act_max=127)


@pytest.mark.parametrize("rows, cols", [(4, 4), (3, 5), (6, 2)])
def test_hand_built_program_counts(rows, cols):
    cfg = Config(rows=rows, cols=cols)
    rng = np.random.default_rng(1)
    p = Program(cfg)
    p.read_host(0, rng.integers(-128, 128, (5, rows)))            # 5 UB rows written
    p.read_weights(rng.integers(-128, 128, (2, rows, cols)))      # 2 tiles pushed
    p.read_quant(0, [_quant(cols)])                               # 1 set
    p.matmul(0, 0, 5, new_tile=True)                              # write 5 ACC rows, pop 1
    p.matmul(0, 0, 3, accumulate=True, new_tile=True)             # rmw 3 rows, pop 1
    p.matmul(1, 8, 2, accumulate=True, new_tile=False)            # rmw 2 rows, reuse the tile
    p.activate(0, 10, 4, qset=0)                                  # ACC read 4, UB write 4
    p.write_host(10, 4)                                           # UB read 4, 4 beats out
    p.write_host(0, 2, from_acc=True)                             # ACC read 2, 2 beats out
    p.sync()                                                      # 1 beat out
    p.raw(isa.encode(isa.Op.MATMUL, src=0, dst=0, n=0))           # n == 0: dropped
    t = program_traffic(p)
    lanes, ob, ab = max(rows, cols), 1, 4
    in_beats = 5 + 2 * rows + isa.QUANT_BEATS
    assert (t.instructions, t.dropped) == (11, 1)
    assert t.host_in_beats == in_beats and t.host_in_bytes == in_beats * lanes
    assert t.host_in_bytes == p.host_in_arrays()[0].size * ob
    assert t.host_out_beats == 4 + 2 + 1 and t.host_out_bytes == 7 * cols * ab
    assert (t.ub_write_rows, t.ub_write_bytes) == (5 + 4, 9 * rows * ob)
    assert (t.ub_read_rows, t.ub_read_bytes) == (5 + 3 + 2 + 4, 14 * rows * ob)
    assert (t.fifo_push_beats, t.fifo_push_bytes) == (2 * rows, 2 * rows * cols * ob)
    assert (t.fifo_pop_beats, t.fifo_pop_bytes) == (2 * rows, 2 * rows * cols * ob)
    assert (t.acc_write_rows, t.acc_rmw_rows, t.acc_read_rows) == (5, 5, 6)
    assert (t.acc_write_bytes, t.acc_rmw_bytes, t.acc_read_bytes) == (
        5 * cols * ab, 5 * cols * ab, 6 * cols * ab)
    assert (t.quant_in_beats, t.quant_set_reads) == (isa.QUANT_BEATS, 1)
    assert t.macs == 10 * rows * cols
    assert t.operand_bytes == 10 * rows * ob + 2 * rows * cols * ob
    assert t.no_reuse_operand_bytes == 2 * t.macs * ob
    assert t.no_reuse_psum_bytes == 2 * t.macs * ab
    assert t.reuse == pytest.approx(t.no_reuse_operand_bytes / t.operand_bytes)
    d = t.to_dict()
    assert d["macs"] == t.macs and d["reuse"] == t.reuse
    json.dumps(d)


def test_int4_and_bf16_lane_bytes():
    for operand, lane_bytes, op_bits in (("int4", 1, 4), ("bf16", 2, 16)):
        cfg = Config(rows=4, cols=4, operand=operand)
        p = Program(cfg).read_host(0, np.zeros((3, 4), dtype=np.int64))
        p.read_weights(np.zeros((1, 4, 4), dtype=np.int64)).matmul(0, 0, 3)
        t = program_traffic(p)
        assert t.host_in_bytes == (3 + 4) * 4 * lane_bytes
        assert t.ub_write_bytes == 3 * 4 * op_bits // 8
        assert t.fifo_pop_bytes == 4 * 4 * op_bits // 8


@pytest.mark.parametrize("shape, rc", [((20, 37, 11), (4, 4)), ((9, 8, 30), (3, 5))])
def test_compiled_gemm(shape, rc):
    m, k, n = shape
    cfg = Config(rows=rc[0], cols=rc[1])
    rng = np.random.default_rng(2)
    prog = compile_gemm(cfg, rng.integers(-128, 128, (m, k)),
                        rng.integers(-128, 128, (k, n))).program
    t = program_traffic(prog)
    matmul_rows = sum(isa.decode(w)["n"] for w in prog.words()
                      if isa.decode(w)["op"] == isa.Op.MATMUL)
    assert t.macs == matmul_rows * cfg.rows * cfg.cols
    assert t.macs >= m * k * n
    data, _ = prog.host_in_arrays()
    assert t.host_in_bytes == data.size * data.itemsize
    assert t.dropped == 0 and t.reuse > 1


def test_energy_table_is_horowitz_2014():
    assert en.PJ == {"int8_mul": 0.2, "int8_add": 0.03, "int32_add": 0.1, "int32_mul": 3.1,
                     "fp16_add": 0.4, "fp16_mul": 1.1, "fp32_add": 0.9, "fp32_mul": 3.7}
    assert en.SRAM_PJ_64 == ((8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0))
    assert en.DRAM_PJ_64 == (1300.0, 2600.0)
    assert "Horowitz" in en.__doc__ and "ISSCC 2014" in en.__doc__
    assert [en.sram_pj_64(b) for b in (1, 8192, 8193, 32768, 1 << 20, 1 << 22)] == [
        10.0, 10.0, 20.0, 20.0, 100.0, 100.0]


def test_energy_of_a_program():
    cfg = Config(rows=4, cols=4)          # UB 4 KB, FIFO 64 B: 8 KB class; ACC 8 KB: 8 KB
    p = Program(cfg).read_host(0, np.ones((8, 4), dtype=np.int64))
    p.read_weights(np.ones((1, 4, 4), dtype=np.int64)).matmul(0, 0, 8).write_host(0, 8,
                                                                                  from_acc=True)
    t = program_traffic(p)
    e = en.energy(t, cfg)
    assert e.sram_pj_64 == {"ub": 10.0, "fifo": 10.0, "acc": 10.0}
    assert e.compute_pj == pytest.approx(t.macs * 0.3)
    moved = (t.ub_read_bytes + t.ub_write_bytes + t.fifo_push_bytes + t.fifo_pop_bytes
             + t.acc_read_bytes + t.acc_write_bytes + 2 * t.acc_rmw_bytes)
    assert e.move_pj == pytest.approx(moved * 10.0 / 8)
    assert e.pj_per_mac == pytest.approx((t.macs * 0.3 + moved * 10 / 8) / t.macs)
    assert e.link_pj == pytest.approx((t.host_in_bytes + t.host_out_bytes) * 1300 / 8)
    assert 0 < e.move_share < e.move_share_with_link < 1
    assert e.no_reuse_pj_per_mac > e.pj_per_mac
    json.dumps(e.to_dict())
    bf = Config(rows=4, cols=4, operand="bf16")
    assert en.energy(t, bf).mac_pj == pytest.approx(1.1 + 0.9)
    assert en.energy(program_traffic(Program(cfg).sync()), cfg).pj_per_mac is None


def _run(capsys, *args):
    status = cli.main([str(a) for a in args])
    return status, capsys.readouterr().out


def test_sim_json_has_traffic_and_energy(capsys):
    status, out = _run(capsys, "sim", "--backend", "model", "--rows", 4, "--cols", 4,
                       "--m", 9, "--k", 10, "--n", 7, "--json")
    assert status == 0
    d = json.loads(out)
    assert d["traffic"]["macs"] > 0 and d["energy"]["pj_per_mac"] > 0


def test_sim_traffic_flag_prints_the_lines(capsys):
    args = ("sim", "--backend", "model", "--rows", 4, "--cols", 4, "--m", 9, "--k", 10,
            "--n", 7)
    _, plain = _run(capsys, *args)
    assert "MACs" not in plain and "pJ/MAC" not in plain
    status, out = _run(capsys, *args, "--traffic")
    assert status == 0
    for word in ("link in", "weight FIFO", "accumulator", "MACs", "reuse", "pJ/MAC"):
        assert word in out


def test_sim_program_traffic(capsys, tmp_path):
    cfg = Config(rows=4, cols=4)
    p = Program(cfg).read_host(0, np.ones((2, 4), dtype=np.int64))
    p.read_weights(np.ones((1, 4, 4), dtype=np.int64)).matmul(0, 0, 2).write_host(0, 2,
                                                                                  from_acc=True)
    p.save(tmp_path / "p.json")
    status, out = _run(capsys, "sim", "--program", tmp_path / "p.json", "--backend", "model",
                       "--json")
    assert status == 0
    assert json.loads(out)["traffic"]["macs"] == 2 * 16
    status, out = _run(capsys, "sim", "--program", tmp_path / "p.json", "--backend", "model",
                       "--traffic")
    assert status == 0 and "MACs         32" in out


def test_resident_programs_count_what_runs():
    """A resident model's load and run: the STOREd words are not run, the CALLed ones are; the
    weight memory's writes and reads; the same MACs and FIFO pops as the program sent whole."""
    cfg = Config(rows=4, cols=4, weight_tiles=16, program_words=64)
    rng = np.random.default_rng(2)
    program = compile_gemm(cfg, rng.integers(-128, 128, (6, 10)),
                           rng.integers(-128, 128, (10, 7))).program
    rp = make_resident(program)
    whole = program_traffic(program)
    pmem = {}
    load, run = program_traffic(rp.load, pmem), program_traffic(rp.run, pmem)
    assert run.macs == whole.macs and run.fifo_pop_beats == whole.fifo_pop_beats
    assert run.wmem_read_rows == run.fifo_push_beats == whole.fifo_push_beats
    assert load.wmem_write_rows == whole.fifo_push_beats and load.macs == 0
    assert run.instructions == 2 + rp.stored_words       # CHECK_TAG, CALL and its words
    assert load.instructions == len(rp.load) - rp.stored_words   # the STORE's words not run
    assert run.host_in_beats == whole.host_in_beats - whole.fifo_push_beats
