"""The TensorFlow names a (ported) module uses: every import of ``tensorflow...`` or ``tf_keras...``
and every dotted use of a module they bind (``tf.layers.conv2d`` after ``import tensorflow.compat.v1
as tf``), including towerpack's own aliases ``towerpack.trainer.compat.tf`` and ``tfv1``."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, ScopeProvider

from ..syntax import dotted, from_module, import_alias_name, uses

# towerpack.trainer.compat's names for TensorFlow's modules.
_TOWERPACK_ALIASES = {"tf": "tensorflow", "tfv1": "tensorflow.compat.v1"}
_COMPAT = "towerpack.trainer.compat"


@dataclass(frozen=True)
class TFName:
    """A name: ``module`` as imported, then ``attributes`` looked up on it (``from_import``: the first
    attribute may also be a submodule, as ``from module import attribute`` allows)."""

    module: str
    attributes: tuple[str, ...] = ()
    from_import: bool = False

    @property
    def dotted(self) -> str:
        return ".".join((self.module, *self.attributes))

    def api(self) -> tuple[str, str] | None:
        """("v1", "layers.conv2d") for a name of tf.compat.v1, ("v2", ...) for one of TensorFlow 2's
        API, None for TensorFlow's internals and tf_keras."""
        if self.module != "tensorflow" and not self.module.startswith("tensorflow."):
            return None
        api, parts = "v2", self.dotted.split(".")[1:]
        while parts[:1] == ["compat"] and len(parts) > 1 and parts[1] in ("v1", "v2"):
            api, parts = parts[1], parts[2:]
        return None if parts[:1] in (["python"], ["compat"]) else (api, ".".join(parts))


@dataclass(frozen=True)
class TFUse:
    line: int
    written: str
    name: TFName


def tf_uses(wrapper: MetadataWrapper) -> list[TFUse]:
    collector = _Collector()
    wrapper.visit(collector)
    return collector.found


_MISSING_NAME_ERRORS = frozenset(
    {"AttributeError", "ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
)


def _takes_missing(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
    names = {dotted(t.value if isinstance(t, cst.Element) else t) for t in types}
    return bool(names & _MISSING_NAME_ERRORS)


def _is_tf(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in ("tensorflow", "tf_keras"))


class _Collector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (ScopeProvider, ParentNodeProvider, PositionProvider)

    def __init__(self) -> None:
        super().__init__()
        self.found: list[TFUse] = []

    def _meta(self, provider, node):
        return self.get_metadata(provider, node, None)

    def _add(self, node: cst.CSTNode, written: str, name: TFName) -> None:
        if self._guarded(node):
            return
        self.found.append(TFUse(self.get_metadata(PositionProvider, node).start.line, written, name))

    def _guarded(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is in the body of a ``try`` whose handlers take a missing name's error
        (``except AttributeError:`` and its kin): code that already copes with the name's absence."""
        child, parent = node, self._meta(ParentNodeProvider, node)
        while parent is not None:
            if (
                isinstance(parent, cst.Try)
                and child is parent.body
                and any(map(_takes_missing, parent.handlers))
            ):
                return True
            child, parent = parent, self._meta(ParentNodeProvider, parent)
        return False

    def visit_Import(self, node: cst.Import) -> None:
        bound: dict[str, TFName] = {}
        for alias in node.names:
            name = import_alias_name(alias)
            if not _is_tf(name):
                continue
            self._add(node, name, TFName(name))
            local = dotted(alias.asname.name) if alias.asname else None
            bound[local or name] = TFName(name)
        self._uses(node, bound, roots=True)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = from_module(node)
        if module is None or isinstance(node.names, cst.ImportStar):
            if module is not None and _is_tf(module):
                self._add(node, module, TFName(module))
            return
        bound: dict[str, TFName] = {}
        for alias in node.names:
            local = dotted(alias.asname.name) if alias.asname else alias.name.value
            if module == _COMPAT and alias.name.value in _TOWERPACK_ALIASES:
                bound[local] = TFName(_TOWERPACK_ALIASES[alias.name.value])
            elif _is_tf(module):
                name = TFName(module, (alias.name.value,), from_import=True)
                self._add(node, f"{module}.{alias.name.value}", name)
                bound[local] = name
        self._uses(node, bound, roots=False)

    def _uses(self, node, bound: dict[str, TFName], roots: bool) -> None:
        for assignment, use in uses(self._meta, node):
            base = bound.get(assignment.name)
            if base is None and roots and _is_tf(assignment.name):
                base = TFName(assignment.name)
            if base is None or not use.attributes:
                continue
            name = TFName(base.module, base.attributes + use.attributes, base.from_import)
            self._add(use.node, dotted(use.node) or name.dotted, name)
