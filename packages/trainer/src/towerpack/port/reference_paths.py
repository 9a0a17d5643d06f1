"""The reference's own files and the reference paths written in strings.

A file that lives in the reference's package tree (``.../tensorpack/models/models_test.py``, as the
unit tests its wheel bundles do) imports its neighbours relatively (``from .conv2d import ...``,
``from ..utils import logger``). Those relative imports name reference modules: made absolute
(``from tensorpack.models.conv2d import ...``), they are ported like any other. Strings that are
a dotted reference path (``mock.patch("tensorpack.utils.logger.warning")``) name the same things
and move with them.
"""

from __future__ import annotations

import re
from pathlib import PurePath

import libcst as cst

from .reference_map import REFERENCE
from .resolve import ROOT, How, resolve_path
from .syntax import expression

_PATH = re.compile(rf"{ROOT}(\.[A-Za-z_]\w*)+")


def reference_package(path: str) -> str | None:
    """The reference package a file at ``path`` belongs to (``tensorpack.models``), or None when it
    is not inside a directory named after the reference."""
    parts = PurePath(path).parts[:-1]
    if ROOT not in parts:
        return None
    start = len(parts) - 1 - parts[::-1].index(ROOT)
    return ".".join(parts[start:])


def absolutize(module: cst.Module, package: str) -> cst.Module:
    """``module`` (a file of the reference package ``package``) with its relative imports absolute."""
    return module.visit(_Absolutize(package))


class _Absolutize(cst.CSTTransformer):
    def __init__(self, package: str) -> None:
        super().__init__()
        self.package = package.split(".")

    def leave_ImportFrom(self, original_node, updated_node):
        dots = len(updated_node.relative)
        if not dots or dots > len(self.package):
            return updated_node
        base = self.package[: len(self.package) - dots + 1]
        if updated_node.module is not None:
            base.append(cst.Module([]).code_for_node(updated_node.module))
        return updated_node.with_changes(relative=(), module=expression(".".join(base)))


def rewrite_path_strings(module: cst.Module) -> cst.Module:
    """``module`` with every string that is exactly a dotted reference path pointing to its home."""
    return module.visit(_PathStrings())


def ported_path(text: str) -> str | None:
    """The towerpack path for a dotted reference path (a module, or a name in one), or None."""
    if not _PATH.fullmatch(text):
        return None
    parts = text.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in REFERENCE:
            target = resolve_path(module, tuple(parts[cut:]))
            return None if target.how is How.NO_HOME else target.path
    return None


class _PathStrings(cst.CSTTransformer):
    def leave_SimpleString(self, original_node, updated_node):
        quote = updated_node.quote
        if updated_node.prefix or len(quote) != 1:
            return updated_node
        new = ported_path(updated_node.raw_value)
        if new is None:
            return updated_node
        return updated_node.with_changes(value=f"{quote}{new}{quote}")
