"""A board you can run without a board: ``BoardTop`` in a simulator behind a pseudo-terminal.

    with SimulatedBoardTop(Config(rows=4, cols=4)) as board:
        with BoardLink(board.port, timeout=60) as link:   # any baud: a pty ignores it
            link.identify(config)
            result = link.run(program)

``python -m tpugen.tb.simboard --rows 4 --cols 4`` (or ``--board icebreaker``: a board's default
config) prints the pty's path and serves until killed.

Three simulators run the same RTL:

  ``verilator`` (default) / ``icarus``  the generated Verilog of ``BoardTop`` (built once per
      parameter set with ``sim.runner.build``, cached under ``build/cocotb/``) runs in a cocotb
      process (the test ``SERVE_TEST`` of the cocotb module ``SERVE_MODULE``) that owns the pty.
      Fast: the UART, not the simulator, sets the pace.
  ``amaranth``  the Amaranth simulator in a thread of this process (``tb.linksim``'s
      ``SimulatedBoard``); no build step, but about 1000 clocks per second, so a 20x30x10 GEMM
      on a 4x4 core (about 110k clocks at 4 clocks per bit) takes two minutes.

In all of them the host's bytes become UART bits on ``rx`` at the simulated ``baud``, whatever
rate the host's serial port claims (a pty has none), and ``tx`` is decoded back into bytes: by
the host-UART model ``tb.uart_model`` and the pty server ``tb.ptyserver``, in both kinds of
simulator.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from amaranth.hdl import UnusedElaboratable

import tpugen.fpga
from tpugen.fpga.flow.boards import get_board
from tpugen.fpga.gateware.top import BoardParameters, BoardTop
from tpugen.fpga.protocol import DEFAULT_MAX_PAYLOAD
from tpugen.hdl.config import Config
from tpugen.hdl.convert import to_verilog
from tpugen.sim.heartbeat import Heartbeat
from tpugen.sim.runner import Build, build
from tpugen.tb.linksim import SimulatedBoard

__all__ = ["SimulatedBoardTop", "SIMS", "SERVE_MODULE", "SERVE_TEST", "SERVE_ENV", "board_key",
           "build_simulated_board", "main"]

SIMS = ("verilator", "icarus", "amaranth")
#: The cocotb module and test that serve a board's Verilog on a pty (``board_serve.py``, the
#: simulator side of this module).
SERVE_MODULE = f"{__package__}.board_serve"
SERVE_TEST = "simboard_serve"
#: Environment variable that carries the served board's parameters into the cocotb process
#: (JSON: ``board``, a ``BoardParameters.to_dict()``; ``port_file``, where the server writes
#: the pty's path; ``stop_file``, whose appearance stops it; ``parent``, the process id whose
#: end stops it too).
SERVE_ENV = "TPUGEN_SIMBOARD"
#: The module name of the board top's Verilog.
TOPLEVEL = "tpugen_board"


class SimulatedBoardTop:
    """The whole ``BoardTop`` RTL (link endpoint, bridge, core) in a simulator behind a pty.

    Parameters: ``config``; ``sim`` (one of ``SIMS``); ``clk_freq`` and ``baud`` of the simulated
    board (default 4 clocks per bit, near the UART's minimum, to keep the simulation short);
    ``max_payload``; ``timeout_bits`` (the link's idle timeout, short so that error replies
    come quickly); ``start_timeout`` (seconds to wait for a cocotb simulator to come up, the
    Verilator build included).

    ``params`` are the top's ``BoardParameters`` (validated here); ``port`` is the pty's path
    (valid after ``start()`` / ``with``). ``stop()`` ends the simulation and raises anything it
    failed with.
    """

    def __init__(self, config: Config, *, sim: str = "verilator", clk_freq: float = 4e6,
                 baud: float = 1e6, max_payload: int = DEFAULT_MAX_PAYLOAD,
                 timeout_bits: int = 40, start_timeout: float = 600.0):
        if sim not in SIMS:
            raise ValueError(f"sim must be one of {', '.join(SIMS)}, not {sim!r}")
        if (isinstance(start_timeout, bool) or not isinstance(start_timeout, int | float)
                or not start_timeout > 0):
            raise ValueError(f"start_timeout must be a positive number of seconds, not "
                             f"{start_timeout!r}")
        self.params = BoardParameters.make(config, clk_freq, baud, max_payload=max_payload,
                                           timeout_bits=timeout_bits)
        self.config = config
        self.sim = sim
        self.start_timeout = start_timeout
        self.port: str | None = None
        self.error: BaseException | None = None
        self._board: SimulatedBoard | None = None
        self._thread: threading.Thread | None = None

    @property
    def spec(self) -> dict:
        """The parameters of the generated top, as JSON (what ``tb.board_tb`` reads)."""
        return self.params.to_dict()

    def start(self):
        if self.sim == "amaranth":
            top = make_top(self.params)
            self._board = SimulatedBoard(top, clk_freq=self.params.clk_freq,
                                         baud=self.params.baud, busy=top.led_busy)
            self._board.start()
            self.port = self._board.port
            return self
        self._start_cocotb()
        return self

    # --- cocotb ------------------------------------------------------------------------------
    def build(self) -> Build:
        """Build (or find cached) the simulator binary of this top; returns the ``Build``."""
        return build_simulated_board(self.sim, self.params)

    def _start_cocotb(self):
        b = self.build()
        self._dir = Path(tempfile.mkdtemp(prefix="simboard_"))
        serve = {"board": self.spec, "port_file": str(self._dir / "port"),
                 "stop_file": str(self._dir / "stop"), "parent": os.getpid()}
        self.log_file = self._dir / "sim.log"
        name = f"serve_{os.getpid()}_{id(self):x}"

        self._run_dir = b.build_dir / f"run_{name}"

        def run():
            try:
                _, failed = b.run(SERVE_MODULE, env={SERVE_ENV: json.dumps(serve)},
                                  testcase=SERVE_TEST, name=name, log_file=self.log_file)
                if failed:
                    raise RuntimeError(f"the {self.sim} simulated board failed; see "
                                       f"{self.log_file}")
            except BaseException as e:  # reported by start() / stop()
                self.error = e

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        port_file = Path(serve["port_file"])
        deadline = time.monotonic() + self.start_timeout
        while not port_file.exists():
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._finish_cocotb()
                raise RuntimeError(f"the {self.sim} simulated board did not come up; see "
                                   f"{self.log_file}") from self.error
            time.sleep(0.02)
        self.port = port_file.read_text().strip()

    def _finish_cocotb(self):
        Path(self._dir / "stop").touch()
        self._thread.join(60)
        if self._thread.is_alive():
            raise RuntimeError(f"the {self.sim} simulated board did not stop; see "
                               f"{self.log_file}")

    def stop(self):
        if self._board is not None:
            self._board.stop()
        elif self._thread is not None:
            self._finish_cocotb()
            if self.error is not None:
                raise self.error
            shutil.rmtree(self._run_dir, ignore_errors=True)
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def make_top(params: BoardParameters) -> BoardTop:
    """The ``BoardTop`` of ``params``."""
    return BoardTop(params.config, params.clk_freq, params.baud,
                    max_payload=params.max_payload, max_reply=params.max_reply,
                    timeout_bits=params.timeout_bits)


#: The ``fpga/`` sources the board's gateware comes from.
def _fpga_digest() -> str:
    """Hash of the board gateware's sources (``fpga/gateware/`` and the wire format,
    ``fpga/protocol.py``): ``sim.runner.build`` rebuilds when ``hdl/`` changes, this makes a
    change of the link or the bridge rebuild too."""
    h = hashlib.sha256()
    here = Path(tpugen.fpga.__file__).resolve().parent
    for path in [here / "protocol.py", *sorted((here / "gateware").glob("*.py"))]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:8]


def board_key(params: BoardParameters) -> str:
    """The build directory name of a board top's parameters (and of ``fpga/``'s sources)."""
    p = params
    return (f"board_{p.config.name}_clk{p.clk_freq:g}_baud{p.baud:g}"
            f"_p{p.max_payload}_r{p.max_reply}_t{p.timeout_bits}_{_fpga_digest()}")


def build_simulated_board(sim: str, params: BoardParameters) -> Build:
    """``sim.runner.build`` of the Verilog (module ``TOPLEVEL``) of the ``BoardTop`` of
    ``params``; the top is only made when the Verilog is not cached."""
    if not isinstance(params, BoardParameters):
        raise TypeError(f"params must be BoardParameters, not {params!r}")
    return build(sim, board_key(params), lambda: to_verilog(make_top(params), TOPLEVEL),
                 TOPLEVEL)


#: ``main``'s options that set a ``Config`` field or a board parameter, by the field's name,
#: with the config they give without ``--board``.
_OPTIONS = {"rows": "--rows", "cols": "--cols", "acc_width": "--acc-width",
            "ub_rows": "--ub-rows", "acc_rows": "--acc-rows",
            "weight_fifo_depth": "--weight-fifo-depth", "max_payload": "--max-payload"}
_PLAIN = {"rows": 4, "cols": 4, "acc_width": 32, "ub_rows": 256, "acc_rows": 128,
          "weight_fifo_depth": 4}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UsageError(message)


class _UsageError(Exception):
    """A bad argument: one line, exit status 2."""


def _usage_error(e: Exception, args) -> _UsageError:
    """A Config / BoardParameters error with the option that caused it named."""
    field = str(e).split(" ", 1)[0]
    option = _OPTIONS.get(field)
    if option is None or getattr(args, field, None) is None:
        return _UsageError(str(e))
    return _UsageError(f"{option} {getattr(args, field)}: {e}")


def main(argv=None) -> int:
    """``python -m tpugen.tb.simboard``: serve a simulated board on a pty until interrupted
    (Ctrl-C or SIGTERM). Prints the pty's path on standard output; progress while it starts
    (the first Verilator build of a parameter set takes minutes) on standard error. Exit
    status 2 and one line for a bad argument, 1 when the board fails to start."""
    parser = _Parser(prog="python -m tpugen.tb.simboard", description=main.__doc__)
    parser.add_argument("--board", help="serve this board's default config (tpugen build "
                                         "--list); the options below change it")
    for name, default in _PLAIN.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int,
                            help=f"default {default} (or the board's)")
    parser.add_argument("--max-payload", type=int, default=DEFAULT_MAX_PAYLOAD)
    parser.add_argument("--sim", choices=SIMS, default="verilator")
    try:
        args = parser.parse_args(argv)
        given = {k: getattr(args, k) for k in _PLAIN if getattr(args, k) is not None}
        base = None
        if args.board:
            try:
                base = get_board(args.board).config
            except ValueError as e:
                raise _UsageError(f"--board {args.board}: {e}") from None
        try:
            cfg = base.replace(**given) if base else Config(**{**_PLAIN, **given})
            board = SimulatedBoardTop(cfg, sim=args.sim, max_payload=args.max_payload)
        except (TypeError, ValueError) as e:
            raise _usage_error(e, args) from None
    except _UsageError as e:
        warnings.simplefilter("ignore", UnusedElaboratable)
        print(f"simboard: error: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # stop the simulator cleanly
    try:
        with Heartbeat(f"simboard: starting the {args.sim} simulation of {cfg.name}",
                       detail="the first start of a parameter set builds the simulator, "
                              "minutes with Verilator; later starts reuse it", every=5):
            board.start()
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            board.stop()                                       # a simulator already running
        print("simboard: interrupted", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"simboard: error: {e}", file=sys.stderr)
        return 1
    try:
        print(f"simulated board {cfg.name} on {board.port} (Ctrl-C to stop)", flush=True)
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        board.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
