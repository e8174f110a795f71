"""Config validation and JSON round trip."""

import pytest

from tpugen.hdl.config import Config


def test_defaults_and_round_trip():
    cfg = Config(rows=3, cols=5, acc_width=18, weight_fifo_depth=2)
    assert Config.from_json(cfg.to_json()) == cfg
    assert cfg.act_lanes == 5
    fpga = Config(rows=4, cols=4, act_mult="serial", counter_width=40, cell_pipeline=2)
    assert Config.from_json(fpga.to_json()) == fpga
    assert fpga.name != Config(rows=4, cols=4).name


@pytest.mark.parametrize("field,value,exc", [
    ("rows", 0, ValueError), ("rows", 257, ValueError), ("cols", -1, ValueError),
    ("rows", 2.0, TypeError), ("cols", "8", TypeError), ("rows", True, TypeError),
    ("acc_width", 15, ValueError), ("acc_width", 65, ValueError),
    ("operand", "int7", ValueError), ("operand", 8, TypeError),
    ("weight_fifo_depth", 0, ValueError), ("ub_rows", 0, ValueError),
    ("acc_rows", 70000, ValueError), ("act_lanes", 9, ValueError),
    ("act_mult", "booth", ValueError), ("act_mult", 1, TypeError),
    ("counter_width", 31, ValueError), ("counter_width", 65, ValueError),
    ("cell_pipeline", 3, ValueError),
])
def test_bad_field_names_field_and_value(field, value, exc):
    with pytest.raises(exc, match=field) as info:
        Config(**{field: value})
    assert repr(value) in str(info.value)


def test_from_json_errors():
    with pytest.raises(ValueError, match="not valid JSON"):
        Config.from_json("{")
    with pytest.raises(ValueError, match="unknown field 'depth'"):
        Config.from_json('{"depth": 3}')
    with pytest.raises(TypeError, match="JSON object"):
        Config.from_json("[1]")


def test_from_json_needs_rows_and_cols():
    for missing in ("rows", "cols"):
        data = {"rows": 3, "cols": 5}
        del data[missing]
        with pytest.raises(ValueError, match=f"no '{missing}' field"):
            Config.from_dict(data)


def test_act_lanes_saved_as_given():
    """0 means C: saved as 0, so a later edit of ``cols`` keeps meaning "all columns"; configs
    that resolve to the same lane count are equal (programs and boards compare configs)."""
    auto = Config(rows=3, cols=5)
    assert auto.act_lanes == 5 and auto.to_dict()["act_lanes"] == 0
    explicit = Config(rows=3, cols=5, act_lanes=5)
    assert explicit.to_dict()["act_lanes"] == 5
    assert auto == explicit and hash(auto) == hash(explicit) and auto.name == explicit.name
    assert Config.from_json(auto.to_json()).to_dict() == auto.to_dict()
    edited = auto.to_dict() | {"cols": 9}
    assert Config.from_dict(edited).act_lanes == 9
    assert auto.replace(cols=2).act_lanes == 2
    assert explicit.replace(cols=7).act_lanes == 5
    assert Config(rows=3, cols=5, act_lanes=2) != auto
