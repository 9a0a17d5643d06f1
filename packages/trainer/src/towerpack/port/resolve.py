"""Questions answered from the reference map: where does a reference module or name live in towerpack?

``resolve_name("tensorpack", "BatchData")`` follows the packages' re-exports the way the reference's
``__init__`` files did, and answers with the towerpack package that re-exports it in turn
(``towerpack.dataflow``), so package imports stay package imports.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .reference_map import REFERENCE, Ref

ROOT = "tensorpack"


class How(enum.Enum):
    """How a reference name was found in the map."""

    LISTED = "listed"  # the map names it: it lives in ``module``
    SUBMODULE = "submodule"  # it is a reference module; ``module`` is its home
    UNLISTED = "unlisted"  # the map does not know it: assumed to live in its module's home
    NO_HOME = "no home"  # nothing in towerpack; ``advice`` says what to do instead


@dataclass(frozen=True)
class Target:
    """Where a reference name goes: ``from module import name`` (for a submodule, ``module`` itself)."""

    how: How
    module: str | None
    advice: str = ""
    reference: str | None = None  # for a submodule: its reference path


@dataclass(frozen=True)
class PathTarget:
    """Where a dotted use such as ``tensorpack.tfutils.summary.add_moving_summary`` goes: ``path`` in
    towerpack, which needs ``import module``."""

    how: How
    module: str | None
    path: str
    advice: str = ""


def is_reference(path: str) -> bool:
    """Whether ``path`` is the reference package or one of its modules (by name, known or not)."""
    return path == ROOT or path.startswith(ROOT + ".")


def module_home(module: str) -> Target:
    """Where a reference module lives in towerpack."""
    ref = REFERENCE.get(module)
    if ref is None:
        return Target(How.UNLISTED, None, f"{module} is not a module of the reference (tensorpack 0.11)")
    if ref.home is None:
        return Target(How.NO_HOME, None, ref.why, reference=module)
    return Target(How.SUBMODULE, ref.home, reference=module)


def star_homes(module: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """What ``from module import *`` becomes: the towerpack modules to star-import, and the moved
    names of the module itself (name -> towerpack module) to import one by one."""
    ref = REFERENCE[module]
    assert ref.home is not None, module
    moved = {name: home for name, home in ref.moved.items() if name in ref.names}
    return (ref.home, *ref.also), moved


def resolve_name(module: str, name: str) -> Target:
    """Where ``from module import name`` finds ``name`` in towerpack (``module`` is in the map)."""
    ref = REFERENCE[module]
    if ref.home is None:
        return Target(How.NO_HOME, None, ref.why)
    found = _own(module, ref, name, exported_only=False) or _given(ref, name)
    if found is not None:
        return found
    if f"{module}.{name}" in REFERENCE:
        return module_home(f"{module}.{name}")
    return Target(How.UNLISTED, ref.home)


def _own(module: str, ref: Ref, name: str, exported_only: bool) -> Target | None:
    if name not in ref.names and name not in ref.older and (exported_only or name not in ref.extra):
        return None
    if name in ref.gone:
        return Target(How.NO_HOME, None, ref.gone[name])
    if name in ref.moved:
        return Target(How.LISTED, ref.moved[name])
    if f"{module}.{name}" in REFERENCE:
        return module_home(f"{module}.{name}")
    return Target(How.LISTED, ref.home)


def _given(package: Ref, name: str) -> Target | None:
    """``name`` as one of the modules a package re-exports has it, answered with the package's home
    (or its other homes) where that home holds the name's module."""
    for given in package.gives:
        ref = REFERENCE[given]
        found = _own(given, ref, name, exported_only=True) or _given(ref, name)
        if found is None:
            continue
        if found.how is How.LISTED and found.module is not None:
            return Target(How.LISTED, _package_home(package, found.module))
        return found
    return None


def _package_home(package: Ref, module: str) -> str:
    for home in (package.home, *package.also):
        if home is not None and (module == home or module.startswith(home + ".")):
            return home
    return module


def resolve_path(module: str, attributes: tuple[str, ...]) -> PathTarget:
    """Where ``module.a.b.c`` (``module`` a reference module in the map) goes: each attribute is first
    a name of the module (as Python finds a package attribute before a submodule of that name), then
    a submodule."""
    for i, attribute in enumerate(attributes):
        target = resolve_name(module, attribute)
        if target.how is How.NO_HOME:
            return PathTarget(How.NO_HOME, None, "", target.advice)
        if target.how is not How.SUBMODULE or target.reference is None:
            assert target.module is not None
            return PathTarget(target.how, target.module, ".".join((target.module, *attributes[i:])))
        module = target.reference
    home = module_home(module)
    if home.module is None:
        return PathTarget(How.NO_HOME, None, "", home.advice)
    return PathTarget(How.SUBMODULE, home.module, home.module)
