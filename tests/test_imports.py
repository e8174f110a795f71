"""The package's import graph: one layering of the subpackages, no cycles.

Every ``tpugen`` module's imports (module level and any nested ones) are read with ``ast``, so
the test sees what the code says, not what happened to be imported first. The layers, lowest
first (a module may import its own layer and the layers below it; ``docs/architecture.md`` says
what each holds):

  ``tpugen.hdl``       the core's gateware, the ISA table, ``Config``
  ``tpugen.sim``       golden models written from the spec, the program format, simulator plumbing
  ``tpugen.compiler``  GEMMs and layer chains to programs
  ``tpugen.fpga``      the link's gateware, its host side, board builds
  ``tpugen.tb``        what runs designs in simulators: cocotb benches, the compiled harness, the
                       simulated board
  ``tpugen.backends``  one module per backend, loaded lazily
  ``tpugen``           the front door: Accelerator, chains, TFLite import, generation, reports
  ``tpugen.cli``       the command line
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import tpugen

LAYERS = ["tpugen.hdl", "tpugen.sim", "tpugen.compiler", "tpugen.fpga", "tpugen.tb",
          "tpugen.backends", "tpugen", "tpugen.cli"]
#: The front door (``tpugen`` and the subpackages not named in LAYERS).
FRONT_DOOR = LAYERS.index("tpugen")


def _modules() -> dict[str, Path]:
    """Every module of the installed package, subpackages included: dotted name -> file."""
    root = Path(tpugen.__file__).parent
    roots = {"tpugen": root}
    for sub in ("hdl", "sim", "tb", "fpga"):    # installed from the top-level folders
        roots[f"tpugen.{sub}"] = Path(__import__(f"tpugen.{sub}", fromlist=["_"]).__file__).parent
    for init in sorted(root.glob("*/__init__.py")):   # subpackages of tpugen/
        roots[f"tpugen.{init.parent.name}"] = init.parent
    out = {}
    for name, folder in roots.items():
        for f in sorted(folder.rglob("*.py")):
            rel = f.relative_to(folder).with_suffix("")
            if name == "tpugen" and rel.parts[0] in {n.split(".")[1] for n in roots if "." in n}:
                continue
            parts = list(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            out[".".join([name, *parts])] = f
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> list[tuple[str, int, bool]]:
    """``(imported module, line, nested)`` for every import of a tpugen module in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.stem == "__init__" else module.rsplit(".", 1)[0]
    top_level = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        nested = id(node) not in top_level
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = ".".join(base[:len(base) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module
            names = [target]
            # ``from tpugen.sim import cache`` imports the submodule tpugen.sim.cache.
            names += [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
        else:
            continue
        for name in names:
            if name == "tpugen" or name.startswith("tpugen."):
                while name not in MODULES and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name in MODULES and name != module:
                    found.append((name, node.lineno, nested))
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _layer(module: str) -> int:
    if module == "tpugen.__main__":    # ``python -m tpugen``: the command line
        return LAYERS.index("tpugen.cli")
    for i, prefix in enumerate(LAYERS):
        if prefix != "tpugen" and (module == prefix or module.startswith(prefix + ".")):
            return i
    return FRONT_DOOR


def test_every_subpackage_is_found():
    for sub in LAYERS:
        assert sub in MODULES, sub
    for sub in ("tpugen.fpga.gateware.bridge", "tpugen.fpga.host.board_link",
                "tpugen.fpga.flow.boards", "tpugen.tflite.tflite_model"):
        assert sub in MODULES, sub
    assert len(MODULES) > 60


@pytest.mark.parametrize("module", sorted(MODULES))
def test_layering(module):
    """A module imports only from its own layer and the layers below it."""
    mine = _layer(module)
    bad = [f"{t} (line {line})" for t, line, _ in GRAPH[module] if _layer(t) > mine]
    assert not bad, f"{module} ({LAYERS[mine]}) imports from a higher layer: {bad}"


def test_no_import_cycle():
    """No cycle among the modules (module-level imports, as Python runs them)."""
    edges = {m: sorted({t for t, _, nested in deps if not nested}) for m, deps in GRAPH.items()}
    state = {}
    stack = []

    def visit(m):
        state[m] = "active"
        stack.append(m)
        for t in edges[m]:
            if state.get(t) == "active":
                cycle = stack[stack.index(t):] + [t]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)


def test_imports_at_module_level():
    """tpugen modules are imported at the top of modules, not inside functions (the layering
    and the cycle check would not see the real order otherwise)."""
    nested = [f"{m}: {t} (line {line})" for m, deps in GRAPH.items() for t, line, n in deps
              if n]
    assert not nested, "imports inside functions:\n" + "\n".join(nested)


def test_the_checker_sees_a_cycle(tmp_path):
    """The walker finds relative and absolute imports (so the tests above can fail)."""
    f = tmp_path / "x.py"
    f.write_text("from .machine import Machine\nimport tpugen.hdl.isa\n"
                 "def g():\n    from tpugen.fpga import protocol\n")
    found = _imports("tpugen.sim.x", f)
    assert ("tpugen.sim.machine", 1, False) in found
    assert ("tpugen.hdl.isa", 2, False) in found
    assert ("tpugen.fpga.protocol", 4, True) in found


def test_import_tpugen_is_light():
    """``import tpugen`` loads neither cocotb nor pyserial nor the TFLite reader; they load
    when a backend or model needs them (``tpugen.load_tflite`` still works)."""
    code = ("import sys, tpugen\n"
            "heavy = ('cocotb', 'cocotb_tools', 'serial', 'tflite', 'tflite_micro')\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
            "tpugen.load_tflite\n"
            "print('tflite' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "[]", f"import tpugen loads {out[0]}"
    assert out[1] == "True"
