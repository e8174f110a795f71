"""The README's and the documentation pages' examples work: their Python runs as written, every
command line they show is a valid ``tpugen`` command (the cheap ones run here; the others name
the test that runs them), and every file path and link they give exists."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpugen.cli import build_parser
from tpugen.compiler import compile_gemm
from tpugen.hdl.config import Config
from tpugen.sim.cache import build_root

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
#: The README and the pages under docs/: every example and command in them is checked here.
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]


def _blocks(lang, pages=PAGES):
    """The fenced ``lang`` blocks of ``pages``, in order."""
    return [block for page in pages
            for block in re.findall(rf"```{lang}\n(.*?)```", page.read_text(), re.S)]


def _commands(pages=PAGES):
    """Each shell line of ``pages`` that starts a tpugen command, without its comment."""
    out = []
    for block in _blocks("sh", pages):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(("tpugen ", "python -m tpugen")):
                out.append(line)
    return out


COMMANDS = list(dict.fromkeys(_commands()))

#: Placeholders in the pages' commands and the values a test gives them.
PLACEHOLDERS = {"/dev/pts/N": "/dev/null", "cfg.json": "CFG", "--rows R": "--rows 4",
                "--cols C": "--cols 4", "--freq MHz": "--freq 50", "--dsp-blocks N":
                "--dsp-blocks 8"}

#: Commands run for real here (cheap, no board, no place-and-route). Every other command
#: is parsed here and run by the test named in ``ELSEWHERE``.
RUN_HERE = ("tpugen verilog", "tpugen build --list", "tpugen sim ", "tpugen --version",
            "python -m tpugen")
ELSEWHERE = {
    "tpugen demo": "tests/test_cli.py (demo with a fault must FAIL), make demo",
    "tpugen clean": "tests/test_cache.py (it would empty the suite's build directory)",
    "tpugen run": "tests/test_board_e2e.py (tpugen run against the simulated board)",
    "tpugen train": "tests/test_training.py (tpugen train on model, then tpugen infer --check "
                    "on its model), tests/test_training_rtl.py (on Verilator)",
    "tpugen build --board": "tests/test_fpga_build*.py",
    "tpugen flash": "tests/test_fpga_build.py (flash command line without a board)",
    "python -m tpugen.tb.simboard": "tests/test_board_e2e.py",
    "tpugen infer": "tests/test_tflite_infer.py, tests/test_tflite_backends.py (tpugen infer "
                    "--check on written models: model, verilator, the simulated board)",
}


def _operand_files(folder):
    """The files the pages' commands name: A.npy, B.npy and a program P.json."""
    rng = np.random.default_rng(0)
    a, b = rng.integers(-128, 128, (6, 7)), rng.integers(-128, 128, (7, 4))
    np.save(folder / "A.npy", a.astype(np.int8))
    np.save(folder / "B.npy", b.astype(np.int8))
    compile_gemm(Config(rows=3, cols=5), a, b).program.save(folder / "P.json")


def _argv(line, tmp_path):
    for k, v in PLACEHOLDERS.items():
        line = line.replace(k, v)
    line = re.sub(r"\[([^\]]*)\]", r"\1", line)          # optional parts: give them
    line = line.replace("build/", f"{tmp_path}/")
    argv = shlex.split(line)
    if argv[:3] == ["python", "-m", "tpugen"]:
        argv = argv[3:]
    elif argv[0] == "tpugen":
        argv = argv[1:]
    return [a if a != "CFG" else str(tmp_path / "cfg.json") for a in argv]


def test_readme_has_examples():
    """The front page shows the command line and the Python API; the pages add their own."""
    assert len(_commands([README])) >= 10
    assert _blocks("python", [README])
    assert len(COMMANDS) > len(_commands([README]))


@pytest.mark.parametrize("line", COMMANDS)
def test_command_is_valid(line, tmp_path):
    """Every command parses with the real parser; the cheap ones run and succeed."""
    if line.startswith("python -m tpugen.tb.simboard"):
        out = subprocess.run([sys.executable, "-m", "tpugen.tb.simboard", "--help"],
                             capture_output=True, text=True)
        assert out.returncode == 0 and "--rows" in out.stdout, out.stderr
        return
    (tmp_path / "cfg.json").write_text('{"rows": 3, "cols": 5}\n')
    _operand_files(tmp_path)
    argv = _argv(line, tmp_path)
    if argv == ["--version"]:
        return                                          # tests/test_packaging.py
    build_parser().parse_args(argv)
    if not line.startswith(RUN_HERE):
        assert any(line.startswith(k) for k in ELSEWHERE), f"no test runs {line!r}"
        return
    env = dict(os.environ, TPUGEN_BUILD_DIR=str(build_root()))
    out = subprocess.run([sys.executable, "-m", "tpugen", *argv], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    if argv[0] == "sim" and "--json" in argv:
        assert json.loads(out.stdout)["passed"] is True, out.stdout
    elif argv[0] == "sim":
        assert out.stdout.strip().endswith("PASS"), out.stdout


#: What a Python example must do besides running: the text that finds it, and code appended
#: to it that must print PASS last. The GEMM example (README) prints its report, PASS last;
#: the number-format example (docs/number-formats.md) returns float32.
PYTHON_CHECKS = {
    "acc.last.lines()": "",
    'operand="bf16"': "\nassert C.dtype == np.float32 and C.shape == (20, 9)\nprint('PASS')",
}


@pytest.mark.parametrize("code", _blocks("python"),
                         ids=lambda code: code.splitlines()[-1].split("#")[0].strip()[:40])
def test_python_examples(code, tmp_path):
    """Each Python example runs as written (in a fresh interpreter, another directory)."""
    checks = [check for key, check in PYTHON_CHECKS.items() if key in code]
    env = dict(os.environ, TPUGEN_BUILD_DIR=str(build_root()))
    out = subprocess.run([sys.executable, "-c", code + "".join(checks)], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    if checks:
        assert out.stdout.strip().endswith("PASS"), out.stdout


def test_python_checks_find_their_examples():
    """Each check of ``PYTHON_CHECKS`` applies to exactly one example (none is lost)."""
    for key in PYTHON_CHECKS:
        assert sum(key in code for code in _blocks("python")) == 1, key


#: A repository path in a page's text: a top-level folder of the repository, then a path.
_PATH = re.compile(r"(?<![\w/.<-])((?:hdl|sim|tb|fpga|tpugen|tests|bench|examples|docs)/"
                   r"[\w./-]*)")
#: A Markdown link or image: ``[text](target)``.
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(text):
    """The anchors of a page's headings, as GitHub makes them."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_paths_and_links_exist(page):
    """Every repository path a page names (relative to the repository) and every relative link
    it gives (relative to the page, with its #anchor) exists."""
    text = page.read_text()
    missing = []
    for path in _PATH.findall(text):
        path = path.rstrip(".")
        if not (REPO / path).exists():
            missing.append(path)
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue                                    # https://...
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            missing.append(target)
        elif anchor and anchor not in _anchors(dest.read_text()):
            missing.append(target)
    assert not missing, f"{page.name} names what does not exist: {missing}"
