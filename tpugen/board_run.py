"""``tpugen run``: a GEMM (random operands or the user's) or a saved program on a board (or the
simulated board) over the UART link, checked against the golden model.

``open_board`` connects and identifies the board (its ``Config`` comes from its ID reply); then
``board_gemm`` / ``board_program`` run and report (``tpugen.simulate.Report``).
"""

import numpy as np

from tpugen.accelerator import GemmJob, result_dtype
from tpugen.fpga.host.board_link import BoardLink
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.config import Config
from tpugen.sim.ideal_cycles import ideal_cycles
from tpugen.sim.program import Program
from tpugen.simulate import Report

__all__ = ["open_board", "board_gemm", "board_program"]


def open_board(port, *, baud=DEFAULT_BAUD, timeout=30.0) -> tuple[BoardLink, dict, Config]:
    """Open the link at ``port``, identify the board; returns ``(link, id, config)``. Raises
    what ``BoardLink`` raises (``serial.SerialException``, ``fpga.host.LinkError``,
    ``ConfigMismatch``); the link is closed when it does."""
    board = BoardLink(port, baud, timeout)
    try:
        info = board.identify()
        return board, info, board.board_config()
    except BaseException:
        board.close()
        raise


def _title(port, info, cfg: Config) -> str:
    clk = info.get("clk_freq") or 0
    return (f"tpugen run: board at {port}: {cfg.rows} x {cfg.cols} array ({cfg.operand}), "
            f"clock {clk / 1e6:.2f} MHz, link {info.get('baud')} baud")


def _link_lines(result, info, cfg: Config, ops: int | None) -> tuple[list, dict]:
    clk = info.get("clk_freq") or 0
    wall = result.wall_time
    cycles = result.counters.get("cycles", 0)
    lines = [f"array busy   {result.counters.get('array_busy', 0)} cycles",
             f"wall time    {wall:.3f} s",
             f"link         {result.link_bytes} bytes, {result.frames} frames"
             + (f", {result.link_bytes / wall / 1e3:.1f} kB/s" if wall else "")]
    fields = {"wall_time": round(wall, 6), "link_bytes": result.link_bytes,
              "frames": result.frames, "clk_freq": clk, "baud": info.get("baud")}
    if clk:
        peak = 2 * cfg.rows * cfg.cols * clk / 1e9
        lines.append(f"peak         {peak:.2f} GOPS (2 x {cfg.rows} x {cfg.cols} x "
                     f"{clk / 1e6:.2f} MHz)")
        fields["gops_peak"] = peak
    if ops and clk and cycles and wall:
        lines.append(f"GOPS         {ops / (cycles / clk) / 1e9:.4f} from the counters, "
                     f"{ops / wall / 1e9:.6f} sustained over the link (wall time)")
        fields["gops_counters"] = ops / (cycles / clk) / 1e9
        fields["gops_wall"] = ops / wall / 1e9
    return lines, fields


def board_gemm(board: BoardLink, info: dict, cfg: Config, job: GemmJob, *, port,
               out_file=None) -> Report:
    """Run a prepared GEMM (``tpugen.accelerator.prepare_gemm`` for the board's config), check
    it, write the result to ``out_file`` (``.npy``) when it is right, and report."""
    m, k, n = job.shape
    result = board.run(job.compiled.program)
    problem = None
    try:
        got = job.compiled.decode(result.host_out)
    except ValueError as e:
        got, problem = None, f"the board gave no result: {e}"
    exp = result.expected
    problems = [] if problem is None else [problem]
    problems += exp.mismatches(result.host_out, result.last)
    if got is not None and not np.array_equal(got, job.expected):
        i, j = (int(v) for v in np.argwhere(got != job.expected)[0])
        problems.insert(0, f"C[{i}, {j}] = {got[i, j]}, expected {job.expected[i, j]}")
    if result.error != int(exp.error):
        problems.append(f"error cause {result.error}, expected {int(exp.error)}")
    cycles = result.counters.get("cycles", 0)
    ideal = ideal_cycles(cfg, m, k, n)
    lines = [f"shape        {m} x {k} x {n} on a {cfg.rows} x {cfg.cols} array",
             f"cycles       {cycles} (board counter: core cycles incl. waiting on the link); "
             f"ideal {ideal}"]
    more, fields = _link_lines(result, info, cfg, 2 * m * k * n)
    lines += more
    fields = {"command": "run", "port": str(port), "config": cfg.to_dict(),
              "shape": {"m": m, "k": k, "n": n}, "array": {"rows": cfg.rows, "cols": cfg.cols},
              "cycles": cycles, "ideal_cycles": ideal,
              "counters": {key: int(v) for key, v in result.counters.items()},
              "problems": problems, **fields}
    if out_file is not None:
        if not problems:
            np.save(out_file, got.astype(result_dtype(cfg, job.out)))
            lines.append(f"result       {out_file} ({m} x {n})")
            fields["result_file"] = str(out_file)
        else:
            lines.append(f"result       not written to {out_file} (the run FAILed)")
    lines += [f"problem      {p}" for p in problems[:3]]
    return Report(_title(port, info, cfg), lines, not problems, fields)


def board_program(board: BoardLink, info: dict, program: Program, *, port, name: str,
                  out_file=None) -> Report:
    """Run ``program`` (for the board's config), compare it with the golden model's run of
    the program as sent (long WRITE_HOSTs split by ``fpga.plan``: ``BoardRunResult.expected``),
    write its host-out beats to ``out_file`` (``.npy``), and report."""
    cfg = program.config
    result = board.run(program)
    exp = result.expected
    problems = exp.mismatches(result.host_out, result.last)
    if result.error != int(exp.error):
        problems.append(f"error cause {result.error}, expected {int(exp.error)}")
    lines = [f"program      {name}: {len(program)} instructions on a {cfg.rows} x {cfg.cols} "
             f"array, {len(result.host_out)} host-out beats, error cause {result.error}",
             f"cycles       {result.counters.get('cycles', 0)} (board counter)"]
    more, fields = _link_lines(result, info, cfg, None)
    lines += more
    fields = {"command": "run", "port": str(port), "config": cfg.to_dict(), "program": name,
              "instructions": len(program), "array": {"rows": cfg.rows, "cols": cfg.cols},
              "host_out_beats": len(result.host_out), "error_cause": int(result.error),
              "counters": {key: int(v) for key, v in result.counters.items()},
              "problems": problems, **fields}
    if out_file is not None:
        np.save(out_file, np.asarray(result.host_out, dtype=np.int64))
        lines.append(f"host-out     {out_file} ({len(result.host_out)} x {cfg.cols} int64)")
        fields["result_file"] = str(out_file)
    lines += [f"problem      {p}" for p in problems[:3]]
    return Report(_title(port, info, cfg), lines, not problems, fields)
