"""Each distribution imports without the others' heavy dependencies and declares exactly what it imports."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from support.procs import run_python

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dataflow", "trainer", "launcher")

# Imports a sub-process refuses, so a module that needs them fails loudly instead of loading them.
BLOCKER = """
import importlib.abc, pkgutil, sys

class Block(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in self.names or any(name.startswith(n + '.') or name == n for n in self.names):
            raise ImportError(f'{name} must not be imported here')
        return None

sys.meta_path.insert(0, Block(sys.argv[2].split(',')))
pkg = importlib.import_module(sys.argv[1])
for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):
    if not mod.name.endswith('__main__'):
        importlib.import_module(mod.name)
print('ok')
"""


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("towerpack.dataflow", "tensorflow,horovod,towerpack.trainer,towerpack.launcher"),
        ("towerpack.launcher", "tensorflow,horovod.tensorflow,towerpack.trainer,towerpack.dataflow,zmq"),
        ("towerpack.trainer", "towerpack.launcher"),
    ],
)
def test_package_and_all_modules_import_without_forbidden_dependencies(package, forbidden):
    code = "import importlib\n" + BLOCKER
    out = run_python(code, package, forbidden, timeout=120)
    assert out.stdout.strip().endswith("ok")


def _imported_top_levels(src: Path) -> set[str]:
    names = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return names


def _distribution_of(module: str, dists: dict[str, list[str]]) -> str | None:
    parts = module.split(".")
    if parts[0] == "towerpack":
        return f"towerpack-{parts[1]}" if len(parts) > 1 else None
    if parts[0] in sys.stdlib_module_names or parts[0] == "__future__":
        return None
    found = dists.get(parts[0])
    assert found, f"cannot tell which distribution provides '{module}'"
    return _canonical(found[0])


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(reqs: list[str]) -> set[str]:
    return {_canonical(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in reqs}


@pytest.mark.parametrize("name", PACKAGES)
def test_distribution_declares_exactly_what_it_imports(name):
    pkg_dir = ROOT / "packages" / name
    pyproject = tomllib.loads((pkg_dir / "pyproject.toml").read_text())
    dists = packages_distributions()
    own = f"towerpack-{name}"
    imported = {_distribution_of(m, dists) for m in _imported_top_levels(pkg_dir / "src")} - {None, own}
    # TensorFlow is declared through the cpu/gpu extras under either distribution name.
    imported = {"tensorflow-cpu" if d in ("tensorflow", "tensorflow-cpu") else d for d in imported}
    required = _names(pyproject["project"].get("dependencies", []))
    extras = pyproject["project"].get("optional-dependencies", {})
    optional = _names([r for reqs in extras.values() for r in reqs]) - {"tensorflow"}
    assert imported - required - optional == set(), f"{own} imports undeclared distributions"
    assert required - imported == set(), f"{own} requires distributions it never imports"
