"""Running programs on a board (or ``tb.simboard``) over the UART link: the host side of
``fpga.gateware.bridge``.

    from tpugen.fpga.host.board_link import BoardLink
    with BoardLink("/dev/ttyUSB1") as board:         # protocol.DEFAULT_BAUD
        board.identify(config)               # raises ConfigMismatch naming what differs
        result = board.run(program)          # a sim.backend_base.RunResult, plus link figures

``backends.board.BoardBackend`` runs it as a ``sim.backend_base.Backend`` (results checked
against the golden model). The formats (records, RESULT header, CONTROL) are in
``fpga.protocol``; ``fpga.host.records`` encodes and decodes them, ``fpga.host.frame_plan`` packs
programs.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from tpugen.fpga.host.frame_plan import plan_program
from tpugen.fpga.host.records import Reply, decode_reply
from tpugen.fpga.host.serial_link import Link, LinkError, RemoteError
from tpugen.fpga.protocol import (
    BRIDGE_REASONS,
    CTRL_CLEAR_COUNTERS,
    CTRL_CLEAR_ERROR,
    CTRL_RESET,
    DEFAULT_BAUD,
    OVERHEAD,
    PROTOCOL_VERSION,
    BridgeError,
    FrameType,
    config_from_board_id,
    decode_id,
)
from tpugen.hdl import isa
from tpugen.hdl.config import Config, check_config
from tpugen.sim.backend_base import RunResult
from tpugen.sim.machine import Result as MachineResult
from tpugen.sim.program import Program

__all__ = ["ConfigMismatch", "BridgeRejected", "BoardRunResult", "BoardLink"]


class ConfigMismatch(ValueError):
    """The board's accelerator is not the one the host expects; the message names each field
    that differs."""


class BridgeRejected(RemoteError):
    """The bridge answered ERROR with one of its codes (``protocol.BridgeError``); ``offset``
    is the payload offset of the record it stopped at."""

    def __init__(self, code: int, frame_type: int = 0, detail: bytes = b""):
        super().__init__(code, frame_type, detail)
        self.offset = int.from_bytes(detail[:2], "little") if len(detail) >= 2 else None
        self.reason = BRIDGE_REASONS.get(code, self.reason)
        at = f" at payload offset {self.offset}" if self.offset is not None else ""
        self.args = (f"board bridge replied ERROR {BridgeError(code).name}: {self.reason}{at} "
                     f"(frame type {frame_type:#04x})",)


@dataclass
class BoardRunResult(RunResult):
    """A ``RunResult`` from a board, with what the link did.

    ``cycles`` is the board's cycle counter from the core reset before the run to the last
    reply, so it includes the time the core waited for frames over the link (a run without a
    reset: from the previous reply). ``wall_time``: seconds of the run (reset to last reply);
    ``link_bytes``: bytes on the wire in both directions (frames with headers and CRCs),
    ``bytes_to_board`` and ``bytes_from_board`` each way; ``frames``: PROGRAM frames sent;
    ``program``:
    the program as run (WRITE_HOSTs split, see ``fpga.host.frame_plan.split_program``);
    ``expected``: the golden model's result for it; ``state``: the golden model after it.
    """

    wall_time: float = 0.0
    link_bytes: int = 0
    bytes_to_board: int = 0
    bytes_from_board: int = 0
    frames: int = 0
    program: Program | None = None
    expected: MachineResult | None = field(default=None, repr=False)
    state: object = field(default=None, repr=False)


class BoardLink:
    """Runs programs on a board over a serial port (``fpga.host.serial_link.Link``).

    ``port`` is a device path, a pty path (``tb.simboard``) or a pyserial URL; ``baud`` the
    bit rate; ``timeout`` the seconds to wait for each reply.
    """

    def __init__(self, port, baud: int = DEFAULT_BAUD, timeout: float = 10.0):
        self.link = Link(port, baud, timeout)
        self.info: dict | None = None
        self.bytes_to_board = self.bytes_from_board = 0
        self.counters: dict | None = None     # the counters of the last RESULT reply

    def close(self):
        self.link.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def link_bytes(self) -> int:
        """Bytes on the wire so far, both directions."""
        return self.bytes_to_board + self.bytes_from_board

    def request(self, ftype: int, payload: bytes = b"") -> bytes:
        """Send one request frame and return its reply's payload
        (``fpga.host.serial_link.Link.request``; the bridge's ERROR replies raise
        ``BridgeRejected``). Counts the bytes each way."""
        self.bytes_to_board += OVERHEAD + len(payload)
        try:
            _, reply = self.link.request(ftype, payload)
        except RemoteError as e:
            self.bytes_from_board += OVERHEAD + 2 + len(e.detail)
            if e.code in BridgeError.__members__.values():
                raise BridgeRejected(e.code, e.frame_type, e.detail) from None
            raise
        self.bytes_from_board += OVERHEAD + len(reply)
        return reply

    def identify(self, config: Config | None = None) -> dict:
        """The board's ID (``protocol.decode_id``); with ``config``, check that the board's
        accelerator is that one (``ConfigMismatch`` names every field that differs)."""
        payload = self.request(FrameType.ID)
        try:
            info = decode_id(payload)
        except ValueError as e:
            raise LinkError(f"bad ID reply: {e}") from None
        self.info = self.link.info = info
        self.link.max_payload = info["max_payload"]
        if config is not None:
            self.check(config)
        return info

    def board_config(self) -> Config:
        """The ``Config`` of the identified board's accelerator (``ConfigMismatch`` when the
        board speaks another protocol or ISA version, or its ID has no accelerator part)."""
        info = self.info if self.info is not None else self.identify()
        if info["protocol_version"] != PROTOCOL_VERSION:
            raise ConfigMismatch(f"the board speaks link protocol version "
                                 f"{info['protocol_version']}, this host {PROTOCOL_VERSION} "
                                 f"(rebuild the board's bitstream or update tpugen)")
        try:
            board = config_from_board_id(info)
        except ValueError as e:
            raise ConfigMismatch(str(e)) from None
        if info["isa_version"] != isa.ISA_VERSION:
            raise ConfigMismatch(f"the board's core has ISA version {info['isa_version']}, "
                                 f"this host {isa.ISA_VERSION}")
        return board

    def check(self, config: Config) -> None:
        """Raise ``ConfigMismatch`` unless the identified board implements ``config`` (every
        ``Config`` field equal, ``act_lanes`` resolved: ``Config.same_hardware``; the message
        names each one that differs)."""
        config = check_config(config)
        board, want = self.board_config().resolved(), config.resolved()
        diff = [f"{f.name}: board {getattr(board, f.name)!r}, expected "
                f"{getattr(want, f.name)!r}" for f in dataclasses.fields(Config)
                if getattr(board, f.name) != getattr(want, f.name)]
        if diff:
            raise ConfigMismatch(f"the board does not implement config {config.name}: "
                                 + "; ".join(diff))

    def control(self, *, reset: bool = False, clear_error: bool = False,
                clear_counters: bool = False) -> Reply:
        """Send a CONTROL frame (core reset first, then the clears); returns the status after
        it (a ``Reply`` without beats)."""
        bits = ((CTRL_RESET if reset else 0) | (CTRL_CLEAR_ERROR if clear_error else 0)
                | (CTRL_CLEAR_COUNTERS if clear_counters else 0))
        return decode_reply(None, self.request(FrameType.CONTROL, bytes([bits])))

    def send_program_frame(self, config: Config, payload: bytes) -> Reply:
        """Send one PROGRAM frame and decode its RESULT."""
        return decode_reply(config, self.request(FrameType.PROGRAM, payload))

    def run(self, program: Program, *, reset: bool = True, state=None,
            clear_error: bool = False, clear_counters: bool = False) -> BoardRunResult:
        """Run ``program`` from a freshly reset core and return its host-out stream.

        ``reset=False``: no CONTROL frame (but one for ``clear_error`` / ``clear_counters``
        when asked): the program
        continues from the core's state, which ``state`` (a ``sim.machine.Machine``: the golden
        model after what the core ran before, e.g. ``BoardRunResult.state``) describes; cycles
        count from the previous reply (``counters``). A resident model's runs go so (see
        ``tpugen.compiler.resident``): no byte but the run's own.

        The core is reset (engines, counters, error; the buffers keep their contents, so the
        program must not read rows it did not write) with a CONTROL frame, then the program
        goes in PROGRAM frames as ``fpga.host.frame_plan.plan_program`` packs them: WRITE_HOSTs too
        big for one reply are split into several on smaller row ranges, which is semantically
        identical
        except that the ``retired`` counter counts the extra instructions. The replies'
        host-out beats are concatenated. Raises ``LinkError`` if a reply overflowed or the
        board's core waited for host-in data where the golden model says it would not (or the
        other way round).
        """
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, not {program!r}")
        cfg = program.config
        if self.info is None:
            self.identify()
        self.check(cfg)
        if not reset and state is None:
            raise ValueError("state must describe the core for a run without a reset")
        if reset:
            state = None
        elif clear_error or clear_counters:
            state = copy.deepcopy(state)
            if clear_error:
                state.error = isa.Cause.NONE
            if clear_counters:
                state.retired = 0
        plan = plan_program(program, max_payload=self.info["max_payload"],
                            max_reply=self.info["max_reply"], state=state)
        start_to, start_from = self.bytes_to_board, self.bytes_from_board
        start_cycles = 0 if reset or self.counters is None else self.counters["cycles"]
        t0 = time.monotonic()
        if reset or clear_error or clear_counters:
            reply = self.control(reset=reset, clear_error=reset or clear_error,
                                 clear_counters=reset or clear_counters)
            if reset or clear_counters:
                start_cycles = 0
        outs, lasts = [], []
        for k, frame in enumerate(plan.frames):
            reply = self.send_program_frame(cfg, frame.payload)
            if reply.overflow:
                raise LinkError(f"frame {k}: the reply overflowed ({reply.dropped} host-out "
                                f"beats dropped)")
            if reply.waiting != frame.mid_data:
                raise LinkError(
                    f"frame {k}: the board's core {'waits' if reply.waiting else 'does not wait'}"
                    f" for host-in data after the frame, the golden model says it "
                    f"{'does' if frame.mid_data else 'does not'}")
            outs.append(reply.host_out)
            lasts.append(reply.last)
        wall = time.monotonic() - t0
        host_out = np.concatenate(outs) if outs else np.zeros((0, cfg.cols), dtype=np.int64)
        last = np.concatenate(lasts) if lasts else np.zeros(0, dtype=bool)
        self.counters = dict(reply.counters)
        sent, got = self.bytes_to_board - start_to, self.bytes_from_board - start_from
        return BoardRunResult(host_out=host_out, last=last, error=reply.cause,
                              counters=dict(reply.counters),
                              cycles=reply.counters["cycles"] - start_cycles,
                              wall_time=wall, link_bytes=sent + got, bytes_to_board=sent,
                              bytes_from_board=got, frames=len(plan.frames),
                              program=plan.program, expected=plan.expected, state=plan.state)
