"""The import direction of docs/architecture.md: each layer imports only itself and lower ones.

Every import counts, at module level or inside a function: a lazy import still ties a lower
layer to a higher one. Cycles and private names are tests/test_architecture.py.
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
