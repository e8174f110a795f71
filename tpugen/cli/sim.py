"""``tpugen sim``: a GEMM (or a saved program) on a simulator or the model, checked against
the golden model."""

import tpugen.cli.gemm_options as gemm_options
from tpugen.accelerator import Accelerator
from tpugen.backends import BACKENDS
from tpugen.cli.options import (
    SHAPE_OPTIONS,
    add_shape,
    add_trace,
    cell,
    config,
    fault,
    load_program,
    output_file,
    trace_files,
    typed,
)
from tpugen.cli.user_errors import CLIError
from tpugen.simulate import check_waves, golden_program, sim_gemm, sim_program

__all__ = ["add_parser", "cmd_sim"]


def add_parser(sub):
    s = sub.add_parser("sim", help="run a GEMM (or a program) on a backend and check it against "
                                   "the golden model")
    add_shape(s, what="8")
    gemm_options.add_gemm(s)
    gemm_options.add_requant(s)
    s.add_argument("--backend", choices=[b for b in BACKENDS if not BACKENDS[b].needs_port],
                   default="verilator",
                   help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()
                                  if not b.needs_port))
    s.add_argument("--waves", metavar="FILE", help="write a waveform (VCD or FST) to FILE")
    s.add_argument("--traffic", action="store_true",
                   help="print the run's memory traffic and energy estimate (always in --json)")
    add_trace(s)
    s.add_argument("--debug-fault-cell", type=cell, metavar="ROW,COL",
                   help="debug: corrupt one cell's product (the run must then FAIL)")
    s.set_defaults(func=cmd_sim)


def cmd_sim(args):
    program = load_program(args.program) if args.program is not None else None
    if program is not None:
        gemm_options.program_only(args)
        cfg = program.config
        if args.config is not None or typed(args, SHAPE_OPTIONS):
            wanted = config(args)
            if wanted != cfg:
                raise CLIError(f"--program {args.program}: made for config {cfg.name}, not "
                               f"{wanted.name} (drop --config and the shape options)")
    else:
        cfg = config(args)
    backend = args.backend
    at = fault(args, cfg, backend)
    waves = None
    if args.waves:
        try:
            waves = str(check_waves(backend, args.waves))
        except ValueError as e:
            raise CLIError(f"--waves {args.waves}: {e}") from None
    out_file = output_file(args.out, "--out", ".npy")
    trace, timeline = trace_files(args, backend)
    if program is not None:
        try:
            expected = golden_program(program)
        except ValueError as e:
            raise CLIError(f"--program {args.program}: {e}") from None
        acc = Accelerator(cfg, backend, fault=at)
        report = sim_program(acc, program, expected, name=args.program, waves=waves,
                             seed=args.seed, out_file=out_file, traffic=args.traffic,
                             trace=trace, timeline=timeline)
    else:
        source = gemm_options.gemm_source(args)
        try:
            a, b, names = gemm_options.gemm_operands(source, cfg, args.seed)
            job = gemm_options.prepare(cfg, a, b, names, args)
            acc = Accelerator(cfg, backend, fault=at)
            report = sim_gemm(acc, job, waves=waves, seed=args.seed, out_file=out_file,
                              traffic=args.traffic, trace=trace, timeline=timeline)
        except MemoryError as e:
            raise CLIError(f"{' '.join(source['names'])}: not enough memory for this GEMM "
                           f"({e})") from None
    report.emit(as_json=args.json)
    return 0 if report.passed else 1
