"""``tpugen run``: a random GEMM on a board (or the simulated board) over the UART link."""

import time

import numpy as np

from tpugen.fpga.board_link import BoardLink
from tpugen.fpga.protocol import DEFAULT_BAUD, config_from_board_id
from tpugen.sim.compiler import compile_gemm, gemm_reference
from tpugen.sim.cycles import ideal_cycles

__all__ = ["run_on_board"]


def run_on_board(port, *, m, k, n, baud=DEFAULT_BAUD, seed=1, timeout=30.0, out=print) -> int:
    """Identify the board, run an M x K x N GEMM, check it against NumPy, report; 0 on PASS."""
    for name, v in (("m", m), ("k", k), ("n", n)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    board = BoardLink(port, baud, timeout)
    try:
        info = board.identify()
        cfg = config_from_board_id(info)
        board.check(cfg)
        clk = info.get("clk_freq") or 0
        out(f"tpugen run: board at {port}: {cfg.rows} x {cfg.cols} {cfg.operand} core, "
            f"clock {clk / 1e6:.2f} MHz, link {info.get('baud', baud)} baud")
        rng = np.random.default_rng(seed)
        a = rng.integers(-128, 128, (m, k))
        b = rng.integers(-128, 128, (k, n))
        compiled = compile_gemm(cfg, a, b)
        t0 = time.monotonic()
        result = board.run(compiled.program)
        wall = time.monotonic() - t0
    finally:
        board.close()
    ok = False
    try:
        got = compiled.decode(result.host_out)
        ok = np.array_equal(got, gemm_reference(cfg, a, b)) and not result.mismatches
    except ValueError as e:
        out(f"  {e}")
    ops = 2 * m * k * n
    cycles = result.counters.get("cycles", 0)
    ideal = ideal_cycles(cfg, m, k, n)
    link = getattr(result, "link_bytes", 0)
    out(f"  shape        {m} x {k} x {n}")
    out(f"  cycles       {cycles} (board counter: core cycles incl. waiting on the link); "
        f"ideal {ideal}")
    out(f"  array busy   {result.counters.get('array_busy', 0)} cycles")
    out(f"  wall time    {wall:.3f} s")
    out(f"  link         {link} bytes, {link / wall / 1e3:.1f} kB/s" if wall else "  link  -")
    if clk and cycles:
        peak = 2 * cfg.rows * cfg.cols * clk / 1e9
        out(f"  GOPS         {peak:.2f} peak (2 x {cfg.rows} x {cfg.cols} x {clk / 1e6:.2f} MHz); "
            f"{ops / (cycles / clk) / 1e9:.4f} from the counters, "
            f"{ops / wall / 1e9:.6f} sustained over the link (wall time)")
    out("PASS" if ok else "FAIL")
    return 0 if ok else 1
