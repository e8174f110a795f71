"""Small programs with their exact cycle counts, derived from the design's documented timing
(``timing_cases``): the core tests check that every backend's cycle counts equal them."""

from tpugen.hdl.accumulator import ACC_DATA_DELAY
from tpugen.hdl.activation import activation_timing
from tpugen.hdl.array import array_latency
from tpugen.hdl.config import Config, check_config
from tpugen.hdl.quant_params import chunks
from tpugen.sim.program import Program
from tpugen.sim.random_data import as_rng, int8_data
from tpugen.sim.requant import QuantParams

__all__ = ["timing_cases"]


def timing_cases(config: Config, rng, ms=(1, 3)) -> list[tuple[str, Program, int]]:
    """Small programs and their exact cycle counts without stalls, from an idle core (from the
    first command transfer to the last host-out transfer, inclusive).

    Derived from the engines' documented timing, with L = ``array_latency`` (R + C - 1 +
    ``cell_pipeline``), L' = max(L, ``ACC_DATA_DELAY``) = max(L, 2) (the cycle, after a vector
    entered the array, in which its accumulator write lands), N = the activation unit's
    ``cycles_per_row``, Q = its ``latency`` (cycle 0 is the first command transfer; times below
    are cycles):

      * dispatch (``hdl.controller.Controller``) takes a command in the cycle it is offered,
        decodes it and issues it one cycle later at the earliest, then one per cycle while
        nothing blocks them; an engine starts the cycle after issue; the host-in engine takes
        one beat per cycle; the matmul and host-out engines read two rows ahead into their
        output registers (the first row enters the array / leaves on host-out three cycles
        after issue; a SYNC beat one cycle after); the weight FIFO passes one beat per cycle;
        an engine is idle the cycle after its ``done``, and SYNC issues two cycles later still
        (when that last retirement has been counted, and seen so a cycle after: the controller's
        ``quiet`` register), so a SYNC beat comes four cycles after the previous instruction's
        last beat or row;
      * ``sync``: SYNC alone: taken at 0, issued at 1, its beat at 2: ``3`` cycles.
      * ``ub``: READ_HOST M (issued at 1, beats 2 .. M + 1); WRITE_HOST M from those rows waits
        for the UB writes (issue M + 2), beats M + 5 .. 2M + 4; the SYNC beat at 2M + 8:
        ``2M + 9``.
      * ``mm``: READ_WEIGHTS 1; READ_HOST M; MATMUL M; WRITE_HOST FROM_ACC M; SYNC. Weight beats
        2 .. R + 1, READ_HOST issue R + 2 (beats R + 3 .. R + M + 2), MATMUL issue R + M + 3,
        vectors enter R + M + 6 .. R + 2M + 5, the drain interlock holds WRITE_HOST until
        L' + 1 cycles after the last one (issue R + 2M + L' + 6), its beats three cycles after
        its issue, the SYNC beat four after the last: ``3M + R + L' + 13``.
      * ``mm2``: as ``mm`` with two tiles, MATMUL M NEW_TILE twice (the second ACCUMULATE): the
        second MATMUL issues when the engine is free, three cycles of restart, and a tile starts
        at least R cycles after the one before (its R weight beats load behind the previous
        tile's start): ``4M + 2R + L' + 16 + max(0, R - M - 3)``.
      * ``act``: READ_QUANT of one set (issued at 1, its 12 beats from 2, each taking K =
        ``ceil(C / act_lanes)`` cycles in the parameter store: everything after it is 12K + 1
        cycles later than in ``mm``); as ``mm`` but ACTIVATE M into other UB rows, then
        WRITE_HOST from them: ACTIVATE issues like WRITE_HOST FROM_ACC above, rows enter the
        unit every N cycles from two cycles after issue and are written Q cycles later;
        WRITE_HOST issues the cycle after the last write, beats three cycles after:
        ``3M + R + L' + 17 + 12K + (M - 1) N + Q``.
    """
    check_config(config)
    rng = as_rng(rng)
    cfg = config
    R, C = cfg.rows, cfg.cols
    L = max(array_latency(cfg), ACC_DATA_DELAY)
    N, Q = activation_timing(cfg, 0, 4)     # the parameters below shift right by 4
    K = chunks(cfg)
    out = [("sync", Program(cfg).sync(), 3)]
    for M in ms:
        if 2 * M > min(cfg.ub_rows, cfg.acc_rows):
            raise ValueError(f"M = {M} needs {2 * M} UB and ACC rows")
        p = Program(cfg).read_host(0, int8_data(rng, (M, R))).write_host(0, M).sync()
        out.append((f"ub_m{M}", p, 2 * M + 9))
        p = Program(cfg).read_weights(int8_data(rng, (R, C))).read_host(
            0, int8_data(rng, (M, R))).matmul(0, 0, M).write_host(0, M, from_acc=True).sync()
        out.append((f"mm_m{M}", p, 3 * M + R + L + 13))
        if cfg.weight_fifo_depth >= 2:
            p = Program(cfg).read_weights(int8_data(rng, (2, R, C))).read_host(
                0, int8_data(rng, (M, R))).matmul(0, 0, M).matmul(0, 0, M, accumulate=True)
            p.write_host(0, M, from_acc=True).sync()
            out.append((f"mm2_m{M}", p, 4 * M + 2 * R + L + 16 + max(0, R - M - 3)))
        params = QuantParams(bias=3, multiplier=3 << 28, shift=-4, out_zp=-2)
        p = Program(cfg).read_quant(0, params).read_weights(int8_data(rng, (R, C)))
        p.read_host(0, int8_data(rng, (M, R))).matmul(0, 0, M).activate(0, M, M)
        p.write_host(M, M).sync()
        out.append((f"act_m{M}", p, 3 * M + R + L + 17 + 12 * K + (M - 1) * N + Q))
    return out
