"""The package's import graph: one layering of the subpackages, no cycles.

Every ``tpugen`` module's imports (module level and any nested ones) are read with ``ast``, so
the test sees what the code says, not what happened to be imported first.

Layers (an arrow is "may import"): ``tpugen.hdl`` (the hardware) <- ``tpugen.sim`` (model,
compiler, Amaranth simulations, the simulator runner) <- ``tpugen.fpga`` (link gateware and its
host side, board tops, builds) <- ``tpugen.tb`` (cocotb benches of the array, the core and the
board top, and the host sides that run them: the cocotb backend, the simulated board) <- the
front door (``tpugen``, ``tpugen.cli``, ...).
"""

import ast
from pathlib import Path

import pytest

import tpugen

LAYERS = ["tpugen.hdl", "tpugen.sim", "tpugen.fpga", "tpugen.tb", "tpugen"]


def _modules() -> dict[str, Path]:
    """Every module of the installed package: dotted name -> file."""
    out = {}
    roots = {"tpugen": Path(tpugen.__file__).parent}
    for sub in LAYERS[:-1]:
        pkg = __import__(sub, fromlist=["_"])
        roots[sub] = Path(pkg.__file__).parent
    for init in sorted(roots["tpugen"].glob("*/__init__.py")):   # front-door subpackages
        roots[f"tpugen.{init.parent.name}"] = init.parent
    for name, root in roots.items():
        for f in sorted(root.glob("*.py")):
            mod = name if f.stem == "__init__" else f"{name}.{f.stem}"
            out[mod] = f
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
    for i, prefix in enumerate(LAYERS[:-1]):
        if module == prefix or module.startswith(prefix + "."):
            return i
    return len(LAYERS) - 1


def test_every_subpackage_is_found():
    for sub in LAYERS:
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
