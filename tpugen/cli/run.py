"""``tpugen run``: a GEMM (or a saved program) on a board over its UART link, checked against
the golden model: ``tpugen sim``'s run (``sim_gemm`` / ``sim_program``) on the ``board``
backend, with the board's own config."""

import tpugen.cli.gemm_options as gemm_options
import tpugen.cli.port as port
from tpugen.cli.options import (
    add_trace,
    load_program,
    output_file,
    positive_float,
    positive_int,
    trace_files,
)
from tpugen.cli.user_errors import CLIError
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.simulate import golden_program, sim_gemm, sim_program

__all__ = ["add_parser", "cmd_run"]


def add_parser(sub):
    r = sub.add_parser("run", help="run a GEMM (or a program) on a board over its UART link")
    r.add_argument("--port", required=True, help="serial device (or the simulated board's pty)")
    r.add_argument("--baud", type=positive_int, default=DEFAULT_BAUD)
    gemm_options.add_gemm(r)
    gemm_options.add_requant(r)
    r.add_argument("--timeout", type=positive_float("seconds"), default=30.0,
                   help="seconds to wait for a reply")
    add_trace(r)
    r.set_defaults(func=cmd_run)


def cmd_run(args):
    port.check_port(args.port)
    program = load_program(args.program) if args.program is not None else None
    source = None
    if program is not None:
        gemm_options.program_only(args)
        try:
            expected = golden_program(program)
        except ValueError as e:
            raise CLIError(f"--program {args.program}: {e}") from None
    else:
        source = gemm_options.gemm_source(args)
    out_file = output_file(args.out, "--out", ".npy")
    trace, timeline = trace_files(args, "board")
    cfg = port.board_config(args)
    if program is not None:
        if not program.config.same_hardware(cfg):
            raise CLIError(f"--program {args.program}: made for config {program.config.name}, "
                           f"but the board at {args.port} is {cfg.name}")
    else:
        a, b, names = gemm_options.gemm_operands(source, cfg, args.seed)
        job = gemm_options.prepare(cfg, a, b, names, args)
    acc = port.board_accelerator(args, cfg)
    try:
        if program is not None:
            report = sim_program(acc, program, expected, name=args.program, out_file=out_file,
                                 command="run", trace=trace, timeline=timeline)
        else:
            report = sim_gemm(acc, job, out_file=out_file, command="run", trace=trace,
                              timeline=timeline)
    except port.LINK_ERRORS as e:
        raise port.link_error(args.port, args.timeout, e) from None
    finally:
        acc.backend.close()
    report.emit(as_json=args.json)
    return 0 if report.passed else 1
