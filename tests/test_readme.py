"""The README's examples work: its Python runs as written, and every command line it shows is a
valid ``tpugen`` command (the cheap ones run here; the others name the test that runs them)."""

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

README = Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text()


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", TEXT, re.S)


def _commands():
    """Each shell line of the README that starts a tpugen command, without its comment."""
    out = []
    for block in _blocks("sh"):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(("tpugen ", "python -m tpugen")):
                out.append(line)
    return out


COMMANDS = _commands()

#: Placeholders in the README's commands and the values a test gives them.
PLACEHOLDERS = {"/dev/pts/N": "/dev/null", "cfg.json": "CFG", "--rows R": "--rows 4",
                "--cols C": "--cols 4", "--freq MHz": "--freq 50", "--dsp-blocks N":
                "--dsp-blocks 8"}

#: Commands run for real here (cheap, no board, no place-and-route). Every other README command
#: is parsed here and run by the test named in ``ELSEWHERE``.
RUN_HERE = ("tpugen verilog", "tpugen build --list", "tpugen sim ", "tpugen --version",
            "python -m tpugen")
ELSEWHERE = {
    "tpugen demo": "tests/test_cli.py (demo with a fault must FAIL), make demo",
    "tpugen clean": "tests/test_cache.py (it would empty the suite's build directory)",
    "tpugen run": "tests/test_board_e2e.py (tpugen run against the simulated board)",
    "tpugen build --board": "tests/test_fpga_build*.py",
    "tpugen flash": "tests/test_fpga_build.py (flash command line without a board)",
    "python -m tpugen.tb.simboard": "tests/test_board_e2e.py",
    "tpugen infer": "tests/test_tflite_infer.py, tests/test_tflite_backends.py (tpugen infer "
                    "--check on written models: model, verilator, the simulated board)",
}


def _operand_files(folder):
    """The files the README's commands name: A.npy, B.npy and a program P.json."""
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
    assert len(COMMANDS) >= 10
    assert _blocks("python")


@pytest.mark.parametrize("line", COMMANDS)
def test_command_is_valid(line, tmp_path):
    """Every README command parses with the real parser; the cheap ones run and succeed."""
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


def test_python_examples(tmp_path):
    """The README's Python runs as written (in a fresh interpreter, another directory): the
    GEMM example prints its report (PASS last); the number-format example returns float32."""
    main_example, formats_example = _blocks("python")
    env = dict(os.environ, TPUGEN_BUILD_DIR=str(build_root()))
    checks = {main_example: "",
              formats_example: "\nassert C.dtype == np.float32 and C.shape == (20, 9)"
                               "\nprint('PASS')"}
    for code, check in checks.items():
        out = subprocess.run([sys.executable, "-c", code + check], capture_output=True,
                             text=True, cwd=tmp_path, env=env, timeout=900)
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.strip().endswith("PASS"), out.stdout
