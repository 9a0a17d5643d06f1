"""Every towerpack path `towerpack port` can write from the reference map exists.

For each entry of the map: the module a ported import names imports, and each name a ported script
then uses (``from home import name``, a dotted ``home.name``, a path in a string, a star import's
home and the names it imports one by one) is an attribute of it, as Python finds it after the import.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass

import pytest

from towerpack.port.reference_map import REFERENCE
from towerpack.port.resolve import How, resolve_path, star_homes

# Paths the map writes that do not work yet, each with what is wrong. The test fails when one of
# them starts to work, so the list only shrinks.
KNOWN_MISSING: dict[str, str] = {}


@dataclass(frozen=True)
class Written:
    """One thing a port writes: ``import module``, then ``path`` used in the ported script."""

    reference: str  # what the tensorpack script named
    module: str
    path: str


def _given(module: str) -> set[str]:
    """The names a package had from the modules it re-exported (their ``__all__``, recursively)."""
    names: set[str] = set()
    for given in REFERENCE[module].gives:
        names |= {*REFERENCE[given].names, *_given(given)}
    return names


def written(module: str) -> list[Written]:
    """What the map makes a port write for the reference module ``module`` and each of its names."""
    ref = REFERENCE[module]
    if ref.home is None:
        return []
    out = []
    for name in (None, *sorted({*ref.names, *ref.extra, *ref.older, *ref.moved, *_given(module)})):
        attributes = () if name is None else (name,)
        target = resolve_path(module, attributes)
        if target.how is not How.NO_HOME:
            out.append(Written(".".join((module, *attributes)), target.module, target.path))
    homes, moved = star_homes(module)
    out += [Written(f"{module}.*", home, home) for home in homes]
    out += [Written(f"{module}.*", home, f"{home}.{name}") for name, home in moved.items()]
    return out


def problem(item: Written) -> str | None:
    """Why ``item`` does not work after ``import item.module`` (None: it does)."""
    try:
        found = importlib.import_module(item.module)
    except Exception as e:
        return f"import {item.module} fails ({type(e).__name__}: {e})"
    rest = item.path[len(item.module) + 1 :].split(".") if item.path != item.module else []
    for attribute in rest:
        try:
            with warnings.catch_warnings():  # older names warn when used
                warnings.simplefilter("ignore")
                found = getattr(found, attribute)
        except Exception as e:
            return f"{item.path}: no {attribute} ({type(e).__name__}: {e})"
    return None


@pytest.mark.parametrize("module", sorted(REFERENCE))
def test_every_path_the_map_writes_exists(module):
    problems, fixed = [], []
    for item in written(module):
        wrong = problem(item)
        if item.path in KNOWN_MISSING:
            if wrong is None:
                fixed.append(f"{item.path} works now: remove it from KNOWN_MISSING")
        elif wrong is not None:
            problems.append(f"{item.reference} -> {wrong}")
    assert not problems, f"{module}: the port writes paths that do not exist:\n" + "\n".join(problems)
    assert not fixed, "\n".join(fixed)


def test_the_paths_checked_cover_every_package_and_the_known_missing():
    paths = {item.path for module in REFERENCE for item in written(module)}
    assert len(paths) > 600
    for path in (
        "towerpack.dataflow.PrefetchData",
        "towerpack.dataflow.imgaug.deform.GaussianDeform",
        "towerpack.dataflow.dataset.ilsvrc.ILSVRC12",
        "towerpack.trainer.graph_builder.allreduce_grads",
        "towerpack.utils.logger.set_logger_dir",
        *KNOWN_MISSING,
    ):
        assert path in paths, path
