"""The distribution: one import package, ``tpugen``, with everything it needs inside it."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tpugen
from tpugen.cli import main


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel that ``pip install .`` would install (built without its dependencies)."""
    out = tmp_path_factory.mktemp("wheel")
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(root)], check=True, capture_output=True, text=True)
    (path,) = out.glob("tpugen-*.whl")
    with zipfile.ZipFile(path) as z:
        return z.namelist()


def test_wheel_installs_only_tpugen(wheel):
    outside = [n for n in wheel if not n.startswith(("tpugen/", "tpugen-"))]
    assert not outside, f"files outside tpugen/: {outside}"
    for sub in ("hdl", "sim", "tb", "fpga", "tflite"):
        assert f"tpugen/{sub}/__init__.py" in wheel
    assert "tpugen/__main__.py" in wheel
    entry = [n for n in wheel if n.endswith("entry_points.txt")]
    assert entry, "no console script"


def test_wheel_holds_package_data(wheel):
    """Data files the code reads at run time are in the wheel."""
    assert "tpugen/fpga/flow/measured.json" in wheel
    assert "tpugen/tb/harness/core_harness.cpp" in wheel


def test_wheel_holds_every_module(wheel):
    """Every module of the source folders is installed (the package list in pyproject.toml
    names each subpackage), and nothing that only the tests use."""
    root = Path(__file__).resolve().parent.parent
    folders = {"hdl": "tpugen/hdl", "sim": "tpugen/sim", "tb": "tpugen/tb", "fpga": "tpugen/fpga",
               "tpugen": "tpugen"}
    for src, dst in folders.items():
        for f in (root / src).rglob("*.py"):
            name = f"{dst}/{f.relative_to(root / src).as_posix()}"
            assert name in wheel, f"{f.relative_to(root)} is not in the wheel"
    assert not [n for n in wheel if "/support/" in n or n.split("/")[-1].startswith("conftest")]


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"tpugen {tpugen.__version__}"
    assert tpugen.__version__ != "0+unknown"


def test_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "tpugen", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == f"tpugen {tpugen.__version__}"


def test_front_door_and_no_top_level_subpackages(tmp_path):
    """From another directory: the README's import works, the folders are not packages."""
    code = ("from tpugen import Config, Accelerator\n"
            "import importlib.util\n"
            "print([n for n in ('hdl', 'sim', 'tb', 'fpga') if importlib.util.find_spec(n)])")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"
