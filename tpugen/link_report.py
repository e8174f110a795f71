"""What a network costs on a board's link, per image: bytes each way with its programs sent
whole (weights every time) and as resident models (weights once), the weights that stay on the
board, and inferences per second at the board's clock and bit rate.

``link_figures(model, x, config)`` runs ``x`` (one input) through ``model`` (a
``tpugen.tflite.TFLiteModel``) on the golden model, records the programs it runs, and plans each
one as the board backend sends it (``fpga.host.frame_plan``): the bytes are exact for that
protocol, with RESULT beats narrow where the golden model's values fit 8 bits (what the ECP5
board tops do; ``narrow_beats=False``: every beat wide, as the iCE40 board tops send them,
``Board.narrow_beats``), and the resident figures for the steady state (every model already
loaded; the first image also sends ``load_bytes``). Cycles come from the caller (e.g. the
Verilator harness's for one image): ``LinkFigures.per_second`` adds the link's time (10 bits
a byte: 8N1, half duplex) at a bit rate to the cycles at a clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpugen.backends import get_backend
from tpugen.compiler.resident import make_resident
from tpugen.fpga.host.frame_plan import link_bytes, plan_program
from tpugen.fpga.protocol import (
    DEFAULT_MAX_PAYLOAD,
    default_max_reply,
    narrow_beat_size,
    result_beat_size,
)
from tpugen.hdl.checks import check_int
from tpugen.hdl.config import Config, check_config
from tpugen.sim.machine import Machine

__all__ = ["LinkFigures", "link_figures"]


@dataclass
class LinkFigures:
    """Per image: ``plain`` and ``resident`` bytes ``(to the board, from the board)``;
    ``weight_bytes``: weights held on the board (resident); ``streamed_bytes``: weights a
    resident run still sends; ``load_bytes``: the one-time load (both ways); ``programs``: the
    programs an image runs."""

    plain: tuple[int, int]
    resident: tuple[int, int] | None
    weight_bytes: int
    streamed_bytes: int
    load_bytes: int
    programs: int

    def per_second(self, cycles: float, clock_hz: float, baud: float,
                   resident: bool = True) -> float:
        """Inferences per second: 10 bits a byte on the link plus ``cycles`` at the clock."""
        to, back = self.resident if resident and self.resident else self.plain
        return 1.0 / ((to + back) * 10 / baud + cycles / clock_hz)


class _Recorder:
    """An accelerator for ``TFLiteModel.run`` that runs programs on the golden model and keeps
    them."""

    def __init__(self, config: Config):
        self.config = config
        self.backend_name = "model"
        self._backend = get_backend("model", config)
        self.programs = []

    def run(self, program, **kw):
        self.programs.append(program)
        return self._backend.run(program, **kw)


def _bytes(plan, narrow_beats: bool, *, reset: bool = True) -> tuple[int, int]:
    """``link_bytes`` of ``plan``; without ``narrow_beats`` its narrow beats are sent wide."""
    to, back = link_bytes(plan, reset=reset)
    if not narrow_beats:
        cfg, beats = plan.program.config, plan.expected.host_out
        narrow = int(((beats >= -128) & (beats < 128)).all(axis=1).sum())
        back += narrow * (result_beat_size(cfg) - narrow_beat_size(cfg))
    return to, back


def link_figures(model, x, config: Config, *, max_payload: int = DEFAULT_MAX_PAYLOAD,
                 max_reply: int | None = None, narrow_beats: bool = True) -> LinkFigures:
    """The link figures of one input ``x`` through ``model`` on ``config`` (module
    docstring); ``max_payload`` / ``max_reply``: the board's (its ID reply);
    ``narrow_beats``: whether the board sends RESULT beats narrow (``Board.narrow_beats``)."""
    check_config(config)
    check_int("max_payload", max_payload, 1)
    if not isinstance(narrow_beats, bool):
        raise TypeError(f"narrow_beats must be a bool, not {narrow_beats!r}")
    max_reply = default_max_reply(config, max_payload) if max_reply is None else max_reply
    recorder = _Recorder(config)
    model.run(x, recorder)
    plain = [0, 0]
    for p in recorder.programs:
        to, back = _bytes(plan_program(p, max_payload=max_payload, max_reply=max_reply),
                          narrow_beats)
        plain[0] += to
        plain[1] += back
    if config.weight_tiles == 0 or config.program_words == 0:
        return LinkFigures(tuple(plain), None, 0, 0, 0, len(recorder.programs))
    resident, state = [0, 0], Machine(config)
    weights = streamed = load = 0
    bases = [0, 0, 0]
    for p in recorder.programs:
        rp = make_resident(p, tile_base=bases[0], word_base=bases[1],
                           quant_free=range(bases[2], config.quant_sets))
        trial = Machine(config)
        trial.run(rp.load)
        try:
            plan_program(rp.call, max_payload=max_payload, max_reply=max_reply, state=trial)
        except ValueError:      # its CALL's reply does not fit: the board sends it whole
            to, back = _bytes(plan_program(p, max_payload=max_payload,
                                           max_reply=max_reply), narrow_beats)
            resident[0] += to
            resident[1] += back
            streamed += rp.weight_bytes() + rp.weight_bytes(resident=False)
            continue
        bases = [bases[0] + rp.resident_tiles, bases[1] + rp.stored_words,
                 bases[2] + rp.resident_sets]
        state.core_reset()
        lp = plan_program(rp.load, max_payload=max_payload, max_reply=max_reply)
        load += sum(_bytes(lp, narrow_beats))
        state.run(rp.load, reset=False)
        plan = plan_program(rp.call, max_payload=max_payload, max_reply=max_reply,
                            state=state)
        state = plan.state
        to, back = _bytes(plan, narrow_beats, reset=False)
        resident[0] += to
        resident[1] += back
        weights += rp.weight_bytes()
        streamed += rp.weight_bytes(resident=False)
    return LinkFigures(tuple(plain), tuple(resident), weights, streamed, load,
                       len(recorder.programs))
