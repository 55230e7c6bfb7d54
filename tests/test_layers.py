"""Import hygiene of docs/architecture.md: each layer imports only itself and lower ones, no
module-level import cycle, and no module imports another module's private name.

For the layers every import counts, at module level or inside a function: a lazy import still
ties a lower layer to a higher one.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

#: Lowest first; a module may import its own layer and the ones before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("domain",),
    ("world",),
    ("gateway",),
    ("models", "offline"),
    ("trace",),
    ("roles",),
    ("sim",),
    ("scoring",),
    ("testing",),
    ("cli",),
)
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def _rank(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "worldsim" or len(parts) < 2:
        return None
    return RANK.get(parts[1])


def _imports(path: Path) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
    return found


def _violations() -> list[str]:
    package = ROOT / "worldsim"
    bad: list[str] = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        mine = _rank(module)
        if mine is None:
            continue  # the package root re-exports the public surface from every layer
        for target, line in _imports(path):
            theirs = _rank(target)
            if theirs is not None and theirs > mine:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    return bad


def test_every_package_is_in_a_layer() -> None:
    packages = {
        p.name for p in (ROOT / "worldsim").iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    assert packages == set(RANK)


def test_imports_point_down_the_layers() -> None:
    assert _violations() == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from worldsim.sim.engine import run_card\n", encoding="utf-8")
    assert _imports(probe) == [("worldsim.sim.engine", 2)]
    assert _rank("worldsim.sim.engine") > _rank("worldsim.world.state")  # type: ignore[operator]


def _modules() -> dict[str, Path]:
    package = ROOT / "worldsim"
    return {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in package.rglob("*.py")
    }


def _module_level_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """worldsim modules imported when ``path`` is imported (not under TYPE_CHECKING)."""
    deps: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                deps.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            deps.update(alias.name for alias in node.names)
    return {d for d in deps if d in modules}


def test_no_module_level_import_cycle() -> None:
    modules = _modules()
    graph = {m: _module_level_imports(p, modules) - {m} for m, p in modules.items()}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            cycle = (*path[path.index(module) :], module)
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_no_private_name_crosses_a_module() -> None:
    bad: list[str] = []
    for module, path in _modules().items():
        package = module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0):
                continue
            if not (node.module or "").startswith("worldsim"):
                continue
            assert node.module is not None
            for alias in node.names:
                name = alias.name
                if name.startswith("_") and not name.startswith("__") and node.module != module:
                    bad.append(f"{module} imports {node.module}.{name}")
            private = [part for part in node.module.split(".") if part.startswith("_")]
            if private and not node.module.startswith(package + "."):
                bad.append(f"{module} imports the private module {node.module}")
    assert bad == []
