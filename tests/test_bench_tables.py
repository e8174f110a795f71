"""Measured figures in the docs are generated from the bench scripts' records, not typed: each
page's generated table is the rendering of the record the script wrote."""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generation_table_is_the_record():
    gen_scale = _bench("gen_scale")
    record = json.loads(gen_scale.RECORD.read_text())
    page = gen_scale.DOCS.read_text()
    assert page.count(gen_scale.BEGIN) == 1 and page.count(gen_scale.END) == 1
    assert gen_scale.replace_table(page, gen_scale.render(record)) == page, (
        "docs/number-formats.md's generation table differs from bench/gen_scale.json: run "
        "python bench/gen_scale.py --docs")
    operands = {r["operand"] for r in record["rows"]}
    assert operands == set(__import__("tpugen.hdl.config").hdl.config.OPERAND_TYPES)


def test_render_changes_with_the_record():
    """The check above can fail: another figure renders another table."""
    gen_scale = _bench("gen_scale")
    record = json.loads(gen_scale.RECORD.read_text())
    record["rows"][0]["seconds"] += 1.0
    page = gen_scale.DOCS.read_text()
    assert gen_scale.replace_table(page, gen_scale.render(record)) != page
