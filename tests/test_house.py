"""The house rules a maintainer relies on, checked: no source file above 600 lines and no
function above 120 lines (``python -m pytest tests/test_house.py`` is the command that states
it), and every module named once."""

import ast
from collections import Counter
from pathlib import Path

import pytest

from tpugen.cli import COMMANDS

REPO = Path(__file__).resolve().parent.parent
#: The folders of the repository's Python source.
FOLDERS = ("hdl", "sim", "tb", "fpga", "tpugen", "tests", "bench", "examples")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120


def _sources() -> list[Path]:
    return sorted(p for f in FOLDERS for p in (REPO / f).rglob("*.py"))


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.relative_to(REPO)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_file_above_600_lines():
    long = [f"{p.relative_to(REPO)} ({n} lines)" for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES]
    assert not long, "files above 600 lines:\n" + "\n".join(long)


def test_no_function_above_120_lines():
    long = [line for p in _sources() for line in _long_functions(p)]
    assert not long, "functions above 120 lines:\n" + "\n".join(long)


def test_the_checker_sees_a_long_function(tmp_path):
    f = REPO / "tests" / "_probe_long.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    try:
        f.write_text(f"def g():\n{body}\n")
        assert _long_functions(f) == [f"tests/_probe_long.py:1 g ({MAX_FUNCTION_LINES + 1} "
                                      f"lines)"]
    finally:
        f.unlink()


@pytest.mark.parametrize("folder", ["hdl", "sim", "tb", "fpga", "tpugen"])
def test_no_two_modules_share_a_name(folder):
    """Within the package, each module's file name is its own (``__init__`` and ``__main__``
    aside, and the command line's modules, each named after its command: ``tpugen.cli.verilog``
    is ``tpugen verilog``)."""
    commands = {c.__name__.rsplit(".", 1)[1] for c in COMMANDS}
    names = Counter(p.name for f in ("hdl", "sim", "tb", "fpga", "tpugen")
                    for p in (REPO / f).rglob("*.py")
                    if p.name not in ("__init__.py", "__main__.py")
                    and not (p.parent.name == "cli" and p.stem in commands))
    mine = {p.name for p in (REPO / folder).rglob("*.py")}
    assert not [n for n, c in names.items() if c > 1 and n in mine]
