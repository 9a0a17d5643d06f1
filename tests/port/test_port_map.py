"""The reference map against both sides: every towerpack module it names imports and holds the names
it sends there, and every public name of the reference (its 0.11 wheel, read as data with ``ast``,
never imported) is mapped or listed as having no home."""

from __future__ import annotations

import ast
import importlib
import warnings
import zipfile

from towerpack.port.reference_map import REFERENCE
from towerpack.port.resolve import How, resolve_name, star_homes


def _static_all(tree: ast.Module) -> list[str]:
    """A module's ``__all__`` as its source builds it: literal assignments (also under if/try), and
    ``__all__.append``/``extend`` of literals or of a loop over a literal list."""
    names: list[str] = []
    lists: dict[str, list] = {}

    def literal(node):
        try:
            return ast.literal_eval(node)
        except ValueError:
            return None

    def visit(body):
        for node in body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
                names.extend(literal(node.value) or [])
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                if isinstance(literal(node.value), list | tuple):
                    lists[node.targets[0].id] = list(literal(node.value))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                func = node.value.func
                if isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "__all__":
                    value = literal(node.value.args[0])
                    if isinstance(value, str):
                        names.append(value)
                    elif value is not None:
                        names.extend(value)
            elif isinstance(node, ast.For) and getattr(node.iter, "id", None) in lists:
                names.extend(lists[node.iter.id] if "__all__.append" in ast.unparse(node) else [])
            if isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return list(dict.fromkeys(names))


def reference_modules(wheel) -> dict[str, list[str]]:
    """Every public module of the reference wheel and its ``__all__`` (tests and private modules left out)."""
    modules = {}
    with zipfile.ZipFile(wheel) as archive:
        for path in archive.namelist():
            if not (path.startswith("tensorpack/") and path.endswith(".py")):
                continue
            parts = path[: -len(".py")].split("/")
            if parts[-1] == "__init__":
                parts.pop()
            if any(p.startswith("_") or p.endswith("_test") or p == "unit_tests" for p in parts):
                continue
            with warnings.catch_warnings():  # the reference's own source has invalid escapes
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                modules[".".join(parts)] = _static_all(ast.parse(archive.read(path)))
    return modules


def test_the_map_has_every_reference_module_and_no_other(reference_wheel):
    modules = reference_modules(reference_wheel)
    assert len(modules) > 100
    assert sorted(set(modules) - set(REFERENCE)) == []
    assert sorted(set(REFERENCE) - set(modules)) == []


def test_every_public_name_of_the_reference_is_mapped_or_has_no_home(reference_wheel):
    modules = reference_modules(reference_wheel)
    assert (
        "CaffeLMDB" in modules["tensorpack.dataflow.format"] and "warn" in modules["tensorpack.utils.logger"]
    )
    unmapped = [
        f"{m}.{n}" for m, names in modules.items() for n in names if resolve_name(m, n).how is How.UNLISTED
    ]
    assert unmapped == []


def test_the_map_is_consistent():
    for module, ref in REFERENCE.items():
        assert set(ref.moved) | set(ref.gone) <= set(ref.names) | set(ref.extra), module
        assert all(given in REFERENCE for given in ref.gives), module
        assert (ref.home is None) == bool(ref.why), module


def _exported(module: str) -> set[str]:
    """What ``from module import *`` gave in the reference (by the map): its names and those of the
    modules it re-exported."""
    ref = REFERENCE[module]
    names = set(ref.names)
    for given in ref.gives:
        names |= _exported(given)
    return names


def _sent() -> set[tuple[str, str, str | None]]:
    """(reference path, towerpack module, name in it or None for the module itself) for everything
    the map sends somewhere."""
    sent = set()
    for module, ref in REFERENCE.items():
        if ref.home is None:
            continue
        sent.add((module, ref.home, None))
        for name in set(ref.names) | set(ref.extra) | _exported(module):
            target = resolve_name(module, name)
            if target.how is How.LISTED:
                sent.add((f"{module}.{name}", target.module, name))
            elif target.how is How.SUBMODULE:
                sent.add((f"{module}.{name}", target.module, None))
    return sent


def test_every_towerpack_home_imports_and_has_the_names_the_map_sends_there():
    problems = []
    for reference, home, name in sorted(_sent(), key=str):
        try:
            module = importlib.import_module(home)
        except Exception as e:
            problems.append(f"{reference}: {home} does not import ({type(e).__name__}: {e})")
            continue
        if name is not None and not hasattr(module, name):
            problems.append(f"{reference}: {home} has no {name}")
    assert not problems, "\n".join(problems)


def _star(home: str) -> set[str]:
    module = importlib.import_module(home)
    return set(getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")]))


def test_star_imports_give_every_name_the_reference_star_gave_and_never_tf():
    problems = []
    for module, ref in REFERENCE.items():
        if ref.home is None:
            continue
        homes, moved = star_homes(module)
        given = set(moved).union(*(_star(home) for home in homes))
        lacking = _exported(module) - set(ref.gone) - given
        gone_below = {n for n in lacking if resolve_name(module, n).how is How.NO_HOME}
        if lacking - gone_below:
            problems.append(f"from {module} import * lacks {sorted(lacking - gone_below)}")
        # A ported script keeps `import tensorflow.compat.v1 as tf` above its star imports.
        if "tf" in given and module != "tensorpack.compat":
            problems.append(f"from {module} import * would rebind tf")
    assert not problems, "\n".join(problems)
