"""A board (or ``tb.simboard``) as a ``sim.backend_base.Backend``, and ``identify_board``: the
config of the board at a port (what ``tpugen run`` and ``tpugen infer --backend board`` make
their ``Accelerator`` of)."""

from __future__ import annotations

from tpugen.fpga.host.board_link import BoardLink
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config
from tpugen.sim.backend_base import Backend
from tpugen.sim.program import Program

__all__ = ["BoardBackend", "identify_board"]


def identify_board(port, baud: int = DEFAULT_BAUD, *, timeout: float = 10.0) -> Config:
    """The ``Config`` of the board at ``port`` (from its ID reply): the link is opened, the
    board identified, and the link closed. Raises what ``BoardLink`` raises
    (``serial.SerialException``, ``fpga.host.serial_link.LinkError``, ``ConfigMismatch`` for a
    board of another protocol or ISA version)."""
    check_int("baud", baud, 1)
    with BoardLink(port, baud, timeout) as board:
        board.identify()
        return board.board_config()


class BoardBackend(Backend):
    """A board as a ``sim.backend_base.Backend``: each program runs with ``BoardLink.run`` and is
    checked against the golden model on the program as run (split WRITE_HOSTs; see
    ``fpga.plan.split_program``): host-out beats and ``last`` flags, the error cause and the
    retired count, into ``mismatches``.

    ``port``, ``baud`` and ``timeout`` are ``BoardLink``'s; the link is opened (and the board
    identified against ``config``) on first use and closed by ``close`` (or ``with``). ``info``
    is the board's ID (its clock and link rate: ``protocol.decode_id``); each result is a
    ``BoardRunResult``, with the link's figures (``wall_time``, ``link_bytes``, ``frames``).
    """

    name = "board"

    def __init__(self, config: Config, port, baud: int = DEFAULT_BAUD, *,
                 timeout: float = 10.0):
        super().__init__(config)
        self.port, self.baud, self.timeout = port, baud, timeout
        self._board: BoardLink | None = None

    @property
    def board(self) -> BoardLink:
        """The open ``BoardLink`` (opened and identified against the config on first use)."""
        if self._board is None:
            board = BoardLink(self.port, self.baud, self.timeout)
            try:
                board.identify(self.config)
            except BaseException:
                board.close()
                raise
            self._board = board
        return self._board

    @property
    def info(self) -> dict:
        """The board's ID reply (``protocol.decode_id``; the link opened on first use)."""
        return self.board.info

    def close(self):
        if self._board is not None:
            self._board.close()
            self._board = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run_many(self, programs, *, waves=None, **kw) -> list:
        """``kw`` (``stalls``, ``seed``, ...) have no meaning on a board and are ignored."""
        if waves:
            raise ValueError("waves: a board has no waveforms (use a simulator backend)")
        out = []
        for p in programs:
            if not isinstance(p, Program):
                raise TypeError(f"programs must be Programs, not {p!r}")
            if not p.config.same_hardware(self.config):
                raise ValueError(f"program is for config {p.config.name}, the backend is for "
                                 f"{self.config.name}")
            r = self.board.run(p)
            exp = r.expected
            problems = exp.mismatches(r.host_out, r.last)
            if r.error != int(exp.error):
                problems.append(f"error cause {r.error}, expected {int(exp.error)}")
            if r.counters["retired"] != exp.retired:
                problems.append(f"retired {r.counters['retired']}, expected {exp.retired}")
            r.mismatches = problems
            out.append(r)
        return out
