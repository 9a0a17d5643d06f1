"""Where a module names something it imported, as full dotted paths: ``np.float_`` after ``import
numpy as np`` is ``numpy.float_``, ``misc.imread`` after ``from scipy import misc`` is
``scipy.misc.imread``.

Found by libcst's scope analysis, so a parameter or variable that happens to be called ``np`` is not
taken for NumPy, and a name also bound to something else in its scope (``np = ...``) is left out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, ScopeProvider
from libcst.metadata.scope_provider import ImportAssignment, Scope

from ..syntax import dotted, from_module, import_alias_name


@dataclass(frozen=True)
class Binding:
    """A name an import binds: ``local`` as the code writes it (``np``, ``PIL.Image``), the ``path`` it
    stands for (``numpy``, ``numpy.float_`` for ``from numpy import float_``), and the statement and
    alias that bind it. ``plain``: ``import a.b`` without ``as``, whose local name is the path."""

    statement: cst.Import | cst.ImportFrom
    alias: cst.ImportAlias
    local: str
    path: str

    @property
    def plain(self) -> bool:
        return isinstance(self.statement, cst.Import) and self.alias.asname is None


@dataclass(frozen=True)
class PathUse:
    """A use of a binding: ``node``, the longest chain of attributes on it (``np.float_.__name__``),
    in ``scope``."""

    node: cst.Name | cst.Attribute
    binding: Binding
    scope: Scope

    def prefixes(self) -> Iterator[tuple[cst.Name | cst.Attribute, str]]:
        """(expression, full path) for the chain and each shorter chain that still has an attribute
        on the binding, longest first: (``np.float_.__name__``, ``numpy.float_.__name__``), then
        (``np.float_``, ``numpy.float_``)."""
        node: cst.BaseExpression = self.node
        suffix = (dotted(node) or "")[len(self.binding.local) :]
        while suffix and isinstance(node, cst.Attribute):
            yield node, self.binding.path + suffix
            suffix = suffix.rpartition(".")[0]
            node = node.value


def _under(path: str, roots: Collection[str]) -> bool:
    return path.partition(".")[0] in roots


def _binding(assignment, roots: Collection[str]) -> Binding | None:
    """The binding an import assignment makes, if the import is of a module under ``roots``.
    (``import a.b.c`` binds ``a``, which the scope analysis also lists as ``a.b`` and ``a.b.c``.)"""
    if not isinstance(assignment, ImportAssignment):
        return None
    statement, local = assignment.node, assignment.name
    if isinstance(statement, cst.Import):
        for alias in statement.names:
            name = import_alias_name(alias)
            if alias.asname is not None and dotted(alias.asname.name) == local:
                return Binding(statement, alias, local, name) if _under(name, roots) else None
            if alias.asname is None and (name + ".").startswith(local + "."):
                return Binding(statement, alias, local, local) if _under(name, roots) else None
        return None
    module = from_module(statement)
    if module is None or not _under(module, roots) or isinstance(statement.names, cst.ImportStar):
        return None
    for alias in statement.names:
        if (dotted(alias.asname.name) if alias.asname else alias.name.value) == local:
            return Binding(statement, alias, local, f"{module}.{alias.name.value}")
    return None


def path_uses(wrapper: MetadataWrapper, roots: Collection[str]) -> tuple[dict[int, Binding], list[PathUse]]:
    """The bindings of ``wrapper.module``'s imports under ``roots`` (by id of their scope assignment)
    and their uses (each use whose every possible binding is an import of the same path)."""
    scopes = dict.fromkeys(s for s in wrapper.resolve(ScopeProvider).values() if s is not None)
    found = {
        id(assignment): binding
        for scope in scopes
        for assignment in scope.assignments
        if (binding := _binding(assignment, roots)) is not None
    }
    if not found:
        return {}, []
    parents = wrapper.resolve(ParentNodeProvider)
    uses: dict[int, PathUse] = {}
    for scope in scopes:
        for assignment in scope.assignments:
            binding = found.get(id(assignment))
            if binding is None:
                continue
            for access in assignment.references:
                node = access.node
                if not isinstance(node, cst.Name | cst.Attribute) or dotted(node) != binding.local:
                    continue
                others = [found.get(id(r)) for r in access.referents]
                if any(b is None or b.path != binding.path for b in others):
                    continue
                parent = parents.get(node)
                while isinstance(parent, cst.Attribute) and parent.value is node:
                    node, parent = parent, parents.get(parent)
                uses.setdefault(id(node), PathUse(node, binding, access.scope))
    return found, list(uses.values())
