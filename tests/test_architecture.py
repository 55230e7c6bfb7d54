"""How worldsim's modules may import each other, checked on the source (AST), not by importing it.

* No import cycles among worldsim modules. Only what runs when a module is imported counts: its
  module-level imports (inside ``if``/``try`` too), not those under ``if TYPE_CHECKING:`` nor
  those inside functions. Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, so
  those count as well.
* No module imports the package root (``from worldsim import ...``): the root re-exports the
  public surface from every layer; the version is ``worldsim.domain.version``.
* Nothing imports a private (underscore) name from another module. A private *module* (such as
  ``worldsim.cli._app``) is private to its package: its siblings may import it, nobody else.

* Imports point down the layers of docs/architecture.md: a module imports its own layer and the
  layers below it. Here every import counts, inside functions too: a lazy import still ties a
  lower layer to a higher one. The package root re-exports from every layer and sits above them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT

PACKAGE = ROOT / "worldsim"


@dataclass(frozen=True, slots=True)
class Import:
    """One ``import``/``from ... import`` of a worldsim module: what it names, and where."""

    module: str  # the module imported from, absolute
    names: tuple[str, ...]  # for ``from m import a, b``: a, b; for ``import m``: ()
    line: int
    at_import_time: bool  # runs when the importing module is imported


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _at_import_time(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module body that run when the module is imported."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _at_import_time(node.body)
            yield from _at_import_time(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _at_import_time(block)
        elif isinstance(node, ast.With):
            yield from _at_import_time(node.body)


def imports(source: str, module: str, *, is_package: bool) -> list[Import]:
    """Every import in ``source`` (the text of ``module``), relative ones made absolute."""
    tree = ast.parse(source)
    eager = {id(node) for node in _at_import_time(tree.body)}
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(
                Import(alias.name, (), node.lineno, id(node) in eager) for alias in node.names
            )
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            names = tuple(alias.name for alias in node.names)
            found.append(Import(target, names, node.lineno, id(node) in eager))
    return found


def _sources(package: Path = PACKAGE) -> dict[str, tuple[Path, str]]:
    root = package.parent
    return {
        module_name(path, root): (path, path.read_text(encoding="utf-8"))
        for path in sorted(package.rglob("*.py"))
    }


def import_graph(sources: Mapping[str, tuple[Path, str]]) -> dict[str, set[str]]:
    """Module → the worldsim modules that importing it imports at once (parents included)."""
    graph: dict[str, set[str]] = {module: set() for module in sources}
    for module, (path, text) in sources.items():
        for imp in imports(text, module, is_package=path.name == "__init__.py"):
            if not imp.at_import_time:
                continue
            targets = [imp.module, *(f"{imp.module}.{name}" for name in imp.names)]
            for target in targets:
                parts = target.split(".")
                for end in range(1, len(parts) + 1):
                    step = ".".join(parts[:end])
                    # a package's own __init__ is already running when its modules import it
                    if step in sources and step != module and not module.startswith(step + "."):
                        graph[module].add(step)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(
    sources: Mapping[str, tuple[Path, str]],
    importers: Mapping[str, tuple[Path, str]] | None = None,
) -> list[str]:
    """Imports, by ``importers`` (default: ``sources``), of a private name of a worldsim module,
    or of a private module from outside its package."""
    bad: list[str] = []
    for module, (path, text) in (sources if importers is None else importers).items():
        is_package = path.name == "__init__.py"
        home = module if is_package else module.rpartition(".")[0]
        for imp in imports(text, module, is_package=is_package):
            if not imp.module.startswith("worldsim"):
                continue
            where = f"{module}:{imp.line}"
            for name in imp.names:
                if f"{imp.module}.{name}" in sources:
                    target = f"{imp.module}.{name}"  # a submodule, checked as a module below
                elif _is_private(name):
                    bad.append(f"{where} imports the private name {name} from {imp.module}")
                    continue
                else:
                    target = imp.module
                parts = target.split(".")
                for end, part in enumerate(parts[1:], start=2):
                    if _is_private(part) and home != ".".join(parts[: end - 1]):
                        bad.append(f"{where} imports the private module {target}")
                        break
            if not imp.names:
                parts = imp.module.split(".")
                for end, part in enumerate(parts[1:], start=2):
                    if _is_private(part) and home != ".".join(parts[: end - 1]):
                        bad.append(f"{where} imports the private module {imp.module}")
                        break
    return bad


def root_imports(sources: Mapping[str, tuple[Path, str]]) -> list[str]:
    """Imports of the package root (``worldsim`` itself) by a module inside it."""
    bad: list[str] = []
    for module, (path, text) in sources.items():
        if module == "worldsim":
            continue
        for imp in imports(text, module, is_package=path.name == "__init__.py"):
            if imp.module == "worldsim" and not all(
                f"worldsim.{name}" in sources for name in imp.names
            ):
                bad.append(f"{module}:{imp.line} imports the package root")
    return bad


def test_no_import_cycles() -> None:
    assert cycles(import_graph(_sources())) == []


def test_nothing_imports_a_private_name_from_another_module() -> None:
    importers = {**_sources(), **_sources(ROOT / "tests"), **_sources(ROOT / "benchmarks")}
    assert private_imports(_sources(), importers) == []


def test_no_module_imports_the_package_root() -> None:
    assert root_imports(_sources()) == []


# The checks themselves, on a small made-up package: each sees what it must refuse.


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
    ("view", "study", "interop", "build"),
    ("testing",),
    ("cli",),
)
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def layer(module: str) -> int | None:
    """The layer of a worldsim module; None for the package root and other packages."""
    parts = module.split(".")
    return RANK.get(parts[1]) if parts[0] == "worldsim" and len(parts) > 1 else None


def upward_imports(sources: Mapping[str, tuple[Path, str]]) -> list[str]:
    """Imports, at import time or later, of a higher layer than the importing module's."""
    bad: list[str] = []
    for module, (path, text) in sources.items():
        mine = layer(module)
        if mine is None:
            continue
        for imp in imports(text, module, is_package=path.name == "__init__.py"):
            theirs = layer(imp.module)
            if theirs is not None and theirs > mine:
                bad.append(f"{module}:{imp.line} imports {imp.module}")
    return bad


def test_every_package_is_in_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(RANK)


def test_imports_point_down_the_layers() -> None:
    assert upward_imports(_sources()) == []


def _fake_package(tmp_path: Path, files: Mapping[str, str]) -> dict[str, tuple[Path, str]]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return _sources(tmp_path / "worldsim")


def test_the_cycle_check_sees_a_cycle_through_a_package_init(tmp_path: Path) -> None:
    sources = _fake_package(
        tmp_path,
        {
            "worldsim/__init__.py": "",
            "worldsim/a/__init__.py": "from worldsim.a.x import X\n",
            "worldsim/a/x.py": "from worldsim.b.y import Y\nX = 1\n",
            "worldsim/b/__init__.py": "",
            "worldsim/b/y.py": "from worldsim.a import helpers\nY = 2\n",
            "worldsim/a/helpers.py": "",
        },
    )
    assert cycles(import_graph(sources)) == [["worldsim.a", "worldsim.a.x", "worldsim.b.y"]]


def test_the_cycle_check_ignores_type_checking_and_function_imports(tmp_path: Path) -> None:
    sources = _fake_package(
        tmp_path,
        {
            "worldsim/__init__.py": "",
            "worldsim/p.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from worldsim.q import Q\n",
            "worldsim/q.py": "from worldsim.p import P\ndef f():\n    from worldsim import p\n",
        },
    )
    assert cycles(import_graph(sources)) == []


def test_the_privacy_check_sees_names_and_modules(tmp_path: Path) -> None:
    sources = _fake_package(
        tmp_path,
        {
            "worldsim/__init__.py": "",
            "worldsim/cli/__init__.py": "from worldsim.cli import run as _run\n",
            "worldsim/cli/_app.py": "",
            "worldsim/cli/run.py": "from worldsim.cli._app import app\nfrom . import _app\n",
            "worldsim/sim/__init__.py": "",
            "worldsim/sim/engine.py": "def _rev(): ...\n",
            "worldsim/sim/direct.py": "def f():\n    from worldsim.sim.engine import _rev\n",
            "worldsim/scoring.py": "from worldsim.cli._app import app\nimport worldsim.cli._app\n",
        },
    )
    assert private_imports(sources) == [
        "worldsim.scoring:1 imports the private module worldsim.cli._app",
        "worldsim.scoring:2 imports the private module worldsim.cli._app",
        "worldsim.sim.direct:2 imports the private name _rev from worldsim.sim.engine",
    ]


def test_the_root_check_sees_a_version_import(tmp_path: Path) -> None:
    sources = _fake_package(
        tmp_path,
        {
            "worldsim/__init__.py": "__version__ = '1'\n",
            "worldsim/cli.py": "from worldsim import __version__\n",
            "worldsim/sub/__init__.py": "from worldsim import cli\n",
        },
    )
    assert root_imports(sources) == ["worldsim.cli:1 imports the package root"]


def test_the_layer_check_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    sources = _fake_package(
        tmp_path,
        {
            "worldsim/__init__.py": "",
            "worldsim/world/__init__.py": "",
            "worldsim/world/state.py": "def f():\n    from worldsim.sim.engine import run\n",
            "worldsim/sim/__init__.py": "",
            "worldsim/sim/engine.py": "from worldsim.world.state import f\n",
        },
    )
    assert upward_imports(sources) == ["worldsim.world.state:2 imports worldsim.sim.engine"]
