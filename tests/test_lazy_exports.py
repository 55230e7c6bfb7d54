"""Packages that re-export lazily (``lazy_exports``) stay cheap to import and say the truth.

Each such ``__init__`` lists its public names three times: the ``TYPE_CHECKING`` imports (for
type checkers and readers), the name → module map (for the import at first use) and
``__all__``. They must agree, every name must resolve, and importing the package alone must
load none of the heavy libraries.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

HEAVY = ("openai", "httpx", "numpy", "scipy", "aiosqlite")


def _lazy_packages() -> list[str]:
    found = []
    for init in sorted((ROOT / "worldsim").rglob("__init__.py")):
        if "lazy_exports(" in init.read_text(encoding="utf-8"):
            found.append(".".join(init.parent.relative_to(ROOT).parts))
    return found


PACKAGES = _lazy_packages()


def _declared(package: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The package's TYPE_CHECKING imports and its lazy map (name → module), and ``__all__``."""
    path = ROOT / Path(*package.split(".")) / "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    checked: dict[str, str] = {}
    lazy: dict[str, str] = {}
    exported: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    checked.update({alias.name: imp.module for alias in imp.names})
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if getattr(node.value.func, "id", None) == "lazy_exports":
                lazy = ast.literal_eval(node.value.args[1])
        elif isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__all__":
            exported = ast.literal_eval(node.value)
    return checked, lazy, exported


def test_the_packages_are_found() -> None:
    assert {"worldsim", "worldsim.models", "worldsim.gateway", "worldsim.scoring"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_type_checking_imports_lazy_map_and_all_agree(package: str) -> None:
    checked, lazy, exported = _declared(package)
    assert lazy, "no lazy map found"
    assert checked == lazy
    assert len(exported) == len(set(exported)) and set(exported) == set(lazy)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert value is getattr(importlib.import_module(_declared(package)[1][name]), name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_the_package_loads_nothing_heavy(package: str) -> None:
    code = (
        f"import sys, json, {package}\n"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(proc.stdout) == []
