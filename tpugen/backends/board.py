"""A board (or ``tb.simboard``) as a ``sim.backend_base.Backend``, and ``identify_board``: the
config of the board at a port (what ``tpugen run`` and ``tpugen infer --backend board`` make
their ``Accelerator`` of)."""

from __future__ import annotations

from tpugen.compiler.resident import ResidentProgram, make_resident
from tpugen.fpga.host.board_link import BoardLink, BridgeRejected
from tpugen.fpga.host.frame_plan import plan_program
from tpugen.fpga.host.serial_link import LinkError
from tpugen.fpga.protocol import DEFAULT_BAUD
from tpugen.hdl import isa
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config
from tpugen.sim.backend_base import Backend
from tpugen.sim.machine import Machine
from tpugen.sim.program import Program
from tpugen.sim.trace import LinkTrace

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
    ``BoardRunResult``, with the link's figures (``wall_time``, ``link_bytes``,
    ``bytes_to_board``, ``bytes_from_board``, ``frames``).

    ``resident`` (default: when the config has a weight memory and a program memory): each
    program that can (``tpugen.compiler.resident``; else as it is) runs as
    a resident model (``tpugen.compiler.resident``): its load program goes to the board only
    when the board does not hold that model, then its run program (the inputs and a CALL)
    without a core reset. The first run of a connection checks the tag (CHECK_TAG before the
    CALL): a board that holds the model from an earlier connection runs it without a reload;
    later runs skip the check (only this host reaches the board while it is connected; a core
    reset keeps the memories, and a board reconfigured has an empty program memory, whose CALL
    sends no result). Models stay side by side: each gets its own region of the weight memory,
    the program memory and the parameter sets (the next free one; when none is left, all are
    given up and placing starts over), so the chains of a network, or several networks, do not
    push each other out. A run the board refuses
    (WRONG_MODEL: another model, a reset, a load cut short; or words a cut-off load's STORE
    swallowed) resets the core and loads the model, then runs again (the result's bytes, frames
    and wall time include the load's). ``last_loaded``: whether the last run loaded the model;
    ``last_resident``: its ``ResidentProgram``.
    """

    name = "board"
    #: A ``tpugen.sim.trace.Trace`` that gets each run's link frames (None: no tracing).
    tracer = None

    def __init__(self, config: Config, port, baud: int = DEFAULT_BAUD, *,
                 timeout: float = 10.0, resident: bool | None = None):
        super().__init__(config)
        self.port, self.baud, self.timeout = port, baud, timeout
        self._board: BoardLink | None = None
        memories = config.weight_tiles > 0 and config.program_words > 0
        if resident and not memories:
            raise ValueError(f"resident: config {config.name} needs a weight memory and a "
                             f"program memory (weight_tiles, program_words)")
        self.resident = memories if resident is None else bool(resident)
        self._state: Machine | None = None  # the golden model of the board's core (None: a
        self._dirty = False                 # new connection); the core's sticky error is set
        self._held: set[int] = set()        # tags of the models this connection knows loaded
        self._regions: dict = {}            # a model -> (first tile, first word, first set)
        self._free = (0, 0, 0)              # the next region
        self.last_loaded = False
        self.last_resident: ResidentProgram | None = None

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
        self._state = None
        self._held.clear()

    def _place(self, program: Program) -> ResidentProgram:
        """``program`` as a resident model in its region of the memories: the one it had, or
        the next free one (when none is left, every region is given up and it starts at 0)."""
        cfg = self.config
        key = make_resident(program).tag          # the model, wherever it goes
        if key not in self._regions:
            tb, wb, qb = self._free
            rp = make_resident(program, tile_base=tb, word_base=wb,
                               quant_free=range(qb, cfg.quant_sets))
            if (rp.streamed_tiles or (rp.stored_words == 0)) and (tb, wb) != (0, 0):
                self._regions.clear()             # full: start over (the others reload)
                self._held.clear()
                tb = wb = qb = 0
                rp = make_resident(program, quant_free=range(cfg.quant_sets))
            self._regions[key] = (tb, wb, qb)
            self._free = (tb + rp.resident_tiles, wb + rp.stored_words, qb + rp.resident_sets)
        tb, wb, qb = self._regions[key]
        return make_resident(program, tile_base=tb, word_base=wb,
                             quant_free=range(qb, cfg.quant_sets))

    def _run_resident(self, program: Program):
        """``program`` as a resident model (class docstring): the run's ``BoardRunResult``."""
        self.last_loaded = False
        try:
            rp = self._place(program)
            held = Machine(self.config)
            held.run(rp.load)                   # what the board holds when it has the model
            plan_program(rp.run, max_payload=self.info["max_payload"],
                         max_reply=self.info["max_reply"], state=held)
        except ValueError:     # it uses the memories itself, or its CALL's reply does not fit
            self.last_resident = None
            return self.board.run(program)
        self.last_resident = rp
        fresh = self._state is None               # a new connection: nothing is known
        if fresh or rp.tag in self._held:
            try:
                r = self.board.run(rp.call if rp.tag in self._held else rp.run, reset=False,
                                   state=held if fresh else self._state,
                                   clear_error=self._dirty or fresh, clear_counters=fresh)
                if r.error != isa.Cause.WRONG_MODEL:
                    self._held.add(rp.tag)
                    self._state, self._dirty = r.state, bool(r.error)
                    return r
            except (LinkError, BridgeRejected, ValueError):
                pass
            self._held.discard(rp.tag)
        if self._state is None:
            self._state = Machine(self.config)
        self._state.core_reset()                  # what the load's reset leaves
        self._state.run(rp.load, reset=False)
        load = self.board.run(rp.load)            # a core reset first: no STORE half done
        if load.error:
            raise LinkError(f"the board refused the model's load program: error cause "
                            f"{isa.Cause(load.error).name}")
        self.last_loaded = True
        self._held.add(rp.tag)
        r = self.board.run(rp.call, reset=False, state=self._state)
        self._state, self._dirty = r.state, bool(r.error)
        # The result counts the load's bytes and time too (what this call cost).
        r.bytes_to_board += load.bytes_to_board
        r.bytes_from_board += load.bytes_from_board
        r.link_bytes += load.link_bytes
        r.wall_time += load.wall_time
        r.frames += load.frames
        return r

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
            if self.tracer is not None:      # the link's frames, timed (tpugen.sim.trace)
                with LinkTrace(self.board, self.info, self.tracer, p) as frames:
                    r = self._run_resident(p) if self.resident else self.board.run(p)
                frames.finish(r)
            else:
                r = self._run_resident(p) if self.resident else self.board.run(p)
            exp = r.expected
            problems = exp.mismatches(r.host_out, r.last)
            if r.error != int(exp.error):
                problems.append(f"error cause {r.error}, expected {int(exp.error)}")
            if r.counters["retired"] != exp.retired:
                problems.append(f"retired {r.counters['retired']}, expected {exp.retired}")
            r.mismatches = problems
            out.append(r)
        return out
