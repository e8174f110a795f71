"""Config validation and JSON round trip."""

import dataclasses

import numpy as np
import pytest

from tpugen.hdl.config import Config


def test_defaults_and_round_trip():
    cfg = Config(rows=3, cols=5, acc_width=18, weight_fifo_depth=2)
    assert Config.from_json(cfg.to_json()) == cfg
    assert cfg.act_lanes == 0 and cfg.activation_lanes == 5
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


def test_act_lanes_kept_as_given():
    """0 means C: kept and saved as 0, so a later edit of ``cols`` keeps meaning "all columns";
    ``activation_lanes`` is the resolved count."""
    auto = Config(rows=3, cols=5)
    assert auto.act_lanes == 0 and auto.activation_lanes == 5
    assert auto.to_dict()["act_lanes"] == 0
    explicit = Config(rows=3, cols=5, act_lanes=5)
    assert explicit.act_lanes == 5 and explicit.activation_lanes == 5
    assert explicit.to_dict()["act_lanes"] == 5
    assert Config.from_json(auto.to_json()) == auto
    edited = auto.to_dict() | {"cols": 9}
    assert Config.from_dict(edited).activation_lanes == 9
    assert auto.replace(cols=2).activation_lanes == 2
    assert explicit.replace(cols=7).activation_lanes == 5
    assert Config(rows=3, cols=5, act_lanes=2).activation_lanes == 2


def test_equality_agrees_with_to_dict():
    """Configs are equal exactly when they save the same: 0 and C are different configs (of the
    same hardware, so of the same ``name``)."""
    auto, explicit = Config(cols=8), Config(cols=8, act_lanes=8)
    assert auto != explicit and auto.to_dict() != explicit.to_dict()
    assert auto.name == explicit.name
    assert auto.activation_lanes == explicit.activation_lanes
    assert Config(cols=8, act_lanes=4).name != auto.name
    assert Config(cols=16, act_lanes=8).name != Config(cols=16).name
    for a in (auto, explicit, Config(rows=3, cols=5, act_lanes=2)):
        for b in (auto, explicit, Config(rows=3, cols=5, act_lanes=2)):
            assert (a == b) == (a.to_dict() == b.to_dict())
            if a == b:
                assert hash(a) == hash(b)
        assert Config.from_dict(a.to_dict()) == a


@pytest.mark.parametrize("cfg", [Config(cols=8), Config(cols=8, act_lanes=8),
                                 Config(rows=3, cols=5, act_lanes=2)])
def test_dataclasses_replace_is_replace(cfg):
    for changes in ({"cols": 16}, {"cols": 8}, {"rows": 2}, {"act_lanes": 1}):
        assert dataclasses.replace(cfg, **changes) == cfg.replace(**changes)
    assert dataclasses.replace(cfg, cols=16).act_lanes == cfg.act_lanes


def test_numpy_integers_are_accepted_as_int():
    cfg = Config(rows=np.int64(3), cols=np.uint8(5), act_lanes=np.int32(2),
                 acc_width=np.int16(40), ub_rows=np.uint16(64), quant_sets=np.int8(2))
    assert cfg == Config(rows=3, cols=5, act_lanes=2, acc_width=40, ub_rows=64, quant_sets=2)
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        assert type(v) in (int, str), (f.name, type(v))
    assert Config.from_json(cfg.to_json()) == cfg           # JSON can save it
    assert cfg.replace(cols=np.int64(6)).cols.__class__ is int
    with pytest.raises(TypeError, match="rows must be an integer"):
        Config(rows=np.bool_(True))
    with pytest.raises(TypeError, match="cols must be an integer"):
        Config(cols=np.float64(4))
    with pytest.raises(ValueError, match="rows must be in 1..256, not 300"):
        Config(rows=np.int64(300))
