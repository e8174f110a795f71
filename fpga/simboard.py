"""A board you can run without a board: ``BoardTop`` in a simulator behind a pseudo-terminal.

    with SimulatedBoardTop(Config(rows=4, cols=4)) as board:
        with BoardLink(board.port, 115200, timeout=60) as link:   # any baud: a pty ignores it
            link.identify(config)
            result = link.run(program)

``python -m fpga.simboard --rows 4 --cols 4`` prints the pty's path and serves until killed.

Three simulators run the same RTL:

  ``verilator`` (default) / ``icarus``  the generated Verilog of ``BoardTop`` (built once per
      parameter set with ``sim.runner.build``, cached under ``build/cocotb/``) runs in a cocotb
      process that owns the pty; the UART bits come from ``tb.test_board.UartHost``. Fast:
      the UART, not the simulator, sets the pace.
  ``amaranth``  the Amaranth simulator in a thread of this process (``fpga.linksim``'s
      ``SimulatedBoard`` machinery); no build step, but about 1000 clocks per second, so a
      20x30x10 GEMM on a 4x4 core (about 110k clocks at 4 clocks per bit) takes two minutes.

In all of them the host's bytes become UART bits on ``rx`` at the simulated ``baud``, whatever
rate the host's serial port claims (a pty has none), and ``tx`` is decoded back into bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import tty
from pathlib import Path

from tpugen.hdl.config import Config

from .top import BoardTop

__all__ = ["SimulatedBoardTop", "SIMS", "main"]

SIMS = ("verilator", "icarus", "amaranth")
#: Environment variable that carries the served board's parameters into the cocotb process.
_ENV = "TPUGEN_SIMBOARD"
#: Bit-times between polls of the pty while nothing moves.
_POLL_BITS = 10
#: Polls without traffic and with the board idle after which the server sleeps between polls
#: (so that an idle simulated board does not burn a CPU).
_IDLE_POLLS = 200


class SimulatedBoardTop:
    """The whole ``BoardTop`` RTL (link endpoint, bridge, core) in a simulator behind a pty.

    Parameters: ``config``; ``sim`` (one of ``SIMS``); ``clk_freq`` and ``baud`` of the simulated
    board (default 4 clocks per bit, near the UART's minimum, to keep the simulation short);
    ``max_payload``; ``timeout_bits`` (the link's idle timeout, short so that error replies
    come quickly); ``start_timeout`` (seconds to wait for a cocotb simulator to come up, the
    Verilator build included).

    ``port`` is the pty's path (valid after ``start()`` / ``with``); ``top`` the ``BoardTop``.
    ``stop()`` ends the simulation and raises anything it failed with.
    """

    def __init__(self, config: Config, *, sim: str = "verilator", clk_freq: float = 4e6,
                 baud: float = 1e6, max_payload: int = 1024, timeout_bits: int = 40,
                 start_timeout: float = 600.0):
        if sim not in SIMS:
            raise ValueError(f"sim must be one of {', '.join(SIMS)}, not {sim!r}")
        self.top = BoardTop(config, clk_freq, baud, max_payload=max_payload,
                            timeout_bits=timeout_bits)
        self.top._MustUse__silence = True   # a cached Verilog build never elaborates it
        self.config = config
        self.sim = sim
        self.clk_freq, self.baud = clk_freq, baud
        self.max_payload, self.timeout_bits = max_payload, timeout_bits
        self.start_timeout = start_timeout
        self.port: str | None = None
        self.error: BaseException | None = None
        self._board = None
        self._thread = None

    @property
    def spec(self) -> dict:
        """The parameters of the generated top (what ``tb.test_board`` reads)."""
        return {"config": self.config.to_dict(), "clk_freq": self.clk_freq, "baud": self.baud,
                "max_payload": self.max_payload, "max_reply": self.top.max_reply,
                "timeout_bits": self.timeout_bits}

    def start(self):
        if self.sim == "amaranth":
            self._board = _AmaranthBoard(self)
            self._board.start()
            self.port = self._board.port
            return self
        self._start_cocotb()
        return self

    # --- cocotb ------------------------------------------------------------------------------
    def build(self):
        """Build (or find cached) the simulator binary of this top; returns the ``Build``."""
        return build_board(self.sim, self.top, self.spec)

    def _start_cocotb(self):
        b = self.build()
        self._dir = Path(tempfile.mkdtemp(prefix="simboard_"))
        spec = dict(self.spec, port_file=str(self._dir / "port"),
                    stop_file=str(self._dir / "stop"), parent=os.getpid())
        self.log_file = self._dir / "sim.log"
        name = f"serve_{os.getpid()}_{id(self):x}"

        self._run_dir = b.build_dir / f"run_{name}"

        def run():
            try:
                _, failed = b.run("tpugen.fpga.simboard", env={_ENV: json.dumps(spec)},
                                  testcase="simboard_serve", name=name, log_file=self.log_file)
                if failed:
                    raise RuntimeError(f"the {self.sim} simulated board failed; see "
                                       f"{self.log_file}")
            except BaseException as e:  # reported by start() / stop()
                self.error = e

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        port_file = Path(spec["port_file"])
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


#: The ``fpga/`` sources the board's gateware comes from.
_RTL_SOURCES = ("uart.py", "crc.py", "protocol.py", "framing.py", "link.py", "bridge.py",
                "top.py")


def _fpga_digest() -> str:
    """Hash of the board gateware's ``fpga/`` sources: ``sim.runner.build`` rebuilds when
    ``hdl/`` changes, this makes a change of the link or the bridge rebuild too."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _RTL_SOURCES:
        h.update(name.encode())
        h.update((here / name).read_bytes())
    return h.hexdigest()[:8]


def board_key(spec: dict) -> str:
    """The build directory name of a board top's parameters (and of ``fpga/``'s sources)."""
    cfg = Config.from_dict(spec["config"])
    return (f"board_{cfg.name}_clk{spec['clk_freq']:g}_baud{spec['baud']:g}"
            f"_p{spec['max_payload']}_r{spec['max_reply']}_t{spec['timeout_bits']}"
            f"_{_fpga_digest()}")


def build_board(sim: str, top: BoardTop, spec: dict):
    """``sim.runner.build`` of ``top``'s Verilog (module ``tpugen_board``)."""
    from tpugen.hdl.convert import to_verilog
    from tpugen.sim.runner import build

    return build(sim, board_key(spec), lambda: to_verilog(top, "tpugen_board"), "tpugen_board")


# --- the Amaranth simulator -----------------------------------------------------------------
class _AmaranthBoard:
    """``SimulatedBoard`` (``fpga.linksim``) around ``BoardTop`` instead of a bare endpoint."""

    def __init__(self, owner: SimulatedBoardTop):
        from .linksim import HostSide, SimulatedBoard

        class Board(SimulatedBoard):
            def __init__(self):  # the base's set-up, with BoardTop as the DUT
                self.dut = owner.top
                self.clk_freq, self.baud = owner.clk_freq, owner.baud
                self.host = HostSide(self.dut.rx, self.dut.tx, owner.baud)
                self._master, self._slave = os.openpty()
                tty.setraw(self._slave)
                self.port = os.ttyname(self._slave)
                self._stop = threading.Event()
                self._thread = threading.Thread(target=self._run, daemon=True)
                self.error = None

            def _run(self):
                from amaranth.sim import Simulator

                try:
                    sim = Simulator(self.dut)
                    sim.add_clock(1 / self.clk_freq)
                    sim.add_testbench(self._bridge)
                    sim.add_testbench(self.host.monitor.run, background=True)
                    sim.run()
                except BaseException as e:  # reported by stop()
                    self.error = e

        self._board = Board()
        self.port = self._board.port

    def start(self):
        self._board.start()

    def stop(self):
        self._board.stop()


# --- the cocotb server (runs inside the simulator process) ----------------------------------
if _ENV in os.environ:
    import cocotb
    from cocotb.triggers import Timer

    @cocotb.test()
    async def simboard_serve(dut):
        """Serve the board on a new pty until the stop file appears or the parent goes."""
        from tpugen.tb.test_board import BoardTB, spec_from_env

        spec = spec_from_env(_ENV)
        tb = BoardTB(dut, spec)
        await tb.start()
        master, slave = os.openpty()
        tty.setraw(slave)
        tmp = spec["port_file"] + ".tmp"
        Path(tmp).write_text(os.ttyname(slave))
        os.replace(tmp, spec["port_file"])
        uart = tb.uart
        sent = idle = 0
        try:
            while True:
                data = b""
                if select.select([master], [], [], 0)[0]:
                    data = os.read(master, 4096)
                if data:
                    idle = 0
                    await uart.send(data)
                else:
                    idle += 1
                    if idle > _IDLE_POLLS and not int(dut.led_busy.value):
                        # Nothing moves: wait for the host in real time, not in clocks.
                        select.select([master], [], [], 0.05)
                    await Timer(_POLL_BITS * uart.bit_ps, unit="ps")
                if len(uart.received) > sent:
                    os.write(master, bytes(uart.received[sent:]))
                    sent = len(uart.received)
                    idle = 0
                if idle > _IDLE_POLLS or (idle and idle % 64 == 0):
                    if os.path.exists(spec["stop_file"]) or os.getppid() != spec["parent"]:
                        break
        finally:
            os.close(master)
            os.close(slave)


def main(argv=None):
    """``python -m fpga.simboard``: serve a simulated board on a pty until interrupted."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--cols", type=int, default=4)
    parser.add_argument("--acc-width", type=int, default=32)
    parser.add_argument("--ub-rows", type=int, default=256)
    parser.add_argument("--acc-rows", type=int, default=128)
    parser.add_argument("--weight-fifo-depth", type=int, default=4)
    parser.add_argument("--max-payload", type=int, default=1024)
    parser.add_argument("--sim", choices=SIMS, default="verilator")
    args = parser.parse_args(argv)
    try:
        cfg = Config(rows=args.rows, cols=args.cols, acc_width=args.acc_width,
                     ub_rows=args.ub_rows, acc_rows=args.acc_rows,
                     weight_fifo_depth=args.weight_fifo_depth)
    except (TypeError, ValueError) as e:
        parser.error(str(e))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # stop the simulator cleanly
    print(f"building the {args.sim} simulation of {cfg.name} ...", flush=True)
    with SimulatedBoardTop(cfg, sim=args.sim, max_payload=args.max_payload) as board:
        print(f"simulated board {cfg.name} on {board.port} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
