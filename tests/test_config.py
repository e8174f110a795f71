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
