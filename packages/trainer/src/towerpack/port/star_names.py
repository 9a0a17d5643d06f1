"""Names a ported file uses that nothing gives it any more, in files that star-imported the reference.

``from tensorpack.X import *`` hides where a name came from: a name that X's star import gave in an
older tensorpack (``prediction_incorrect`` from ``tfutils.symbolic_functions``, ``tf`` from modules
without ``__all__``) fails only when the ported script runs. Per file, :func:`star_use` (libcst's
scope analysis, no imports) lists the names used but bound nowhere in the file: not assigned or
imported in any scope, not builtins. At report time, :func:`findings` imports the towerpack modules
the file star-imports and reports the names they do not give either, with the reference map's
advice where it knows the name (``older``).

A file is left alone when something else could bind its names unseen: a star import of a module
that is not towerpack's, or ``exec``/``globals()``/``__builtins__``.
"""

from __future__ import annotations

import ast
import functools
import importlib
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, ScopeProvider

from .findings import Finding, Kind
from .reference_map import REFERENCE
from .resolve import is_reference
from .syntax import dotted
from .tf1 import api as tf_api

SHOWN_LINES = 8  # later uses of a name listed in its finding
# Names through which code binds names no scope analysis sees.
_DYNAMIC = frozenset({"exec", "eval", "globals", "locals", "vars", "__builtins__", "__import__"})
_TOWERPACK = "towerpack."


@dataclass(frozen=True)
class StarUse:
    """A ported file's star imports and the names it uses that nothing in it binds.

    ``references``: the reference modules the original star-imported; ``homes``: the towerpack
    modules the ported file star-imports; ``free``: each unbound name with the lines that use it.
    """

    references: tuple[str, ...]
    homes: tuple[str, ...]
    free: tuple[tuple[str, tuple[int, ...]], ...]


def star_use(wrapper: MetadataWrapper, original: bytes) -> StarUse | None:
    """What :func:`findings` needs of a ported module (``wrapper``); None when the original
    star-imports no reference module, or when unbound names cannot be told apart."""
    references = _reference_stars(original)
    if not references:
        return None
    homes: list[str] = []
    for node in _star_imports(wrapper.module):
        module = dotted(node.module) if node.module is not None and not node.relative else None
        if module is None or not module.startswith(_TOWERPACK):
            return None  # another module's star import could give any name
        homes.append(module)
    scopes = [s for s in set(wrapper.resolve(ScopeProvider).values()) if s is not None]
    bound = {a.name for scope in scopes for a in scope.assignments} | _match_captures(wrapper.module)
    positions = wrapper.resolve(PositionProvider)
    lines: dict[str, set[int]] = {}
    for scope in scopes:
        for access in scope.accesses:
            node = access.node
            if not isinstance(node, cst.Name):
                continue  # string annotations
            if node.value in _DYNAMIC:
                return None
            if access.referents or node.value in bound or _dunder(node.value):
                continue
            lines.setdefault(node.value, set()).add(positions[node].start.line)
    free = tuple(sorted((name, tuple(sorted(at))) for name, at in lines.items()))
    return StarUse(tuple(references), tuple(dict.fromkeys(homes)), free)


def _dunder(name: str) -> bool:
    """Module attributes such as ``__file__`` and ``__spec__`` exist without an assignment."""
    return name.startswith("__") and name.endswith("__")


def _reference_stars(original: bytes) -> list[str]:
    if b"*" not in original or b"tensorpack" not in original:
        return []
    try:
        tree = ast.parse(original)
    except (SyntaxError, ValueError):
        return []
    return [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.level == 0
        and node.module is not None
        and is_reference(node.module)
        and [a.name for a in node.names] == ["*"]
    ]


def _match_captures(module: cst.Module) -> set[str]:
    """The names ``case`` patterns bind (libcst's scope analysis does not record them)."""
    found: set[str] = set()

    class _Captures(cst.CSTVisitor):
        def visit_MatchAs(self, node: cst.MatchAs) -> None:
            if node.name is not None:
                found.add(node.name.value)

        def visit_MatchStar(self, node: cst.MatchStar) -> None:
            if node.name is not None:
                found.add(node.name.value)

        def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
            if node.rest is not None:
                found.add(node.rest.value)

    if "match" in module.code:
        module.visit(_Captures())
    return found


def _star_imports(module: cst.Module) -> list[cst.ImportFrom]:
    found: list[cst.ImportFrom] = []

    class _Stars(cst.CSTVisitor):
        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            if isinstance(node.names, cst.ImportStar):
                found.append(node)

    module.visit(_Stars())
    return found


@functools.cache
def star_names(home: str) -> frozenset[str] | None:
    """The names ``from home import *`` gives (None: ``home`` does not import here)."""
    try:
        if home.startswith("towerpack.trainer") and tf_api.tensorflow() is None:
            return None  # imported quietly first: TensorFlow's start-up lines stay out of the report
        module = importlib.import_module(home)
    except Exception:  # ImportError, or TensorFlow failing to load: nothing can be said
        return None
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return frozenset(names)


def findings(path: str, use: StarUse | None) -> list[Finding]:
    """One finding per name ``use.free`` holds that the file's towerpack star imports do not give."""
    if use is None or not use.free:
        return []
    given: set[str] = set()
    for home in use.homes:
        names = star_names(home)
        if names is None:
            return []
        given |= names
    out = []
    for name, lines in use.free:
        if name in given:
            continue
        older = _older(use.references, name)
        if older is not None:
            reference, advice = older
            kind = Kind.NO_HOME
            message = (
                f"name `{name}` is not defined: `from {reference} import *` gave it in tensorpack <0.11; "
                f"use {advice}"
            )
        else:
            kind = Kind.UNDEFINED
            message = (
                f"name `{name}` is not defined: neither this file nor its star imports "
                f"({', '.join(use.homes)}) bind it; if a tensorpack star import gave it, import it from "
                "where it lives now"
            )
        out.append(Finding(path, lines[0], kind, message + _also(lines[1:])))
    return out


def _older(references: tuple[str, ...], name: str) -> tuple[str, str] | None:
    """(the star-imported reference module, advice) when an older tensorpack's star import of it
    gave ``name``, by the map's ``older`` names of it and of the modules it re-exported."""
    for reference in references:
        advice = _older_in(reference, name)
        if advice is not None:
            return reference, advice
    return None


def _older_in(module: str, name: str) -> str | None:
    ref = REFERENCE.get(module)
    if ref is None:
        return None
    if name in ref.older:
        return ref.older[name]
    for given in ref.gives:
        advice = _older_in(given, name)
        if advice is not None:
            return advice
    return None


def _also(lines: tuple[int, ...]) -> str:
    if not lines:
        return ""
    shown = ", ".join(map(str, lines[:SHOWN_LINES]))
    rest = f" and {len(lines) - SHOWN_LINES} more" if len(lines) > SHOWN_LINES else ""
    return f" (also line{'s' if len(lines) > 1 else ''} {shown}{rest})"
