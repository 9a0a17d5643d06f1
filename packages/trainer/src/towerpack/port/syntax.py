"""libcst helpers the rewriters and the checks share: dotted names and the uses of an import."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.metadata import ParentNodeProvider, ScopeProvider
from libcst.metadata.scope_provider import ImportAssignment


def dotted(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a chain of names and attributes, None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


def expression(path: str) -> cst.Attribute | cst.Name:
    """The expression node for a dotted path."""
    node = cst.parse_expression(path)
    assert isinstance(node, cst.Attribute | cst.Name), path
    return node


@dataclass(frozen=True)
class Use:
    """A use of an imported name: the longest dotted chain ``node`` starting with it, and the
    attributes that follow the imported name (``("summary", "add_moving_summary")``)."""

    node: cst.Attribute | cst.Name
    attributes: tuple[str, ...]


def uses(wrapper_metadata, statement: cst.Import | cst.ImportFrom) -> Iterator[tuple[ImportAssignment, Use]]:
    """Every use of every name ``statement`` binds, with the binding it uses.

    ``wrapper_metadata(provider, node)`` reads ScopeProvider and ParentNodeProvider metadata.
    """
    scope = wrapper_metadata(ScopeProvider, statement)
    if scope is None:
        return
    for assignment in scope.assignments:
        if not isinstance(assignment, ImportAssignment) or assignment.node is not statement:
            continue
        for access in assignment.references:
            node = access.node
            if not isinstance(node, cst.Name | cst.Attribute) or dotted(node) != assignment.name:
                continue
            attributes: list[str] = []
            parent = wrapper_metadata(ParentNodeProvider, node)
            while isinstance(parent, cst.Attribute) and parent.value is node:
                attributes.append(parent.attr.value)
                node = parent
                parent = wrapper_metadata(ParentNodeProvider, node)
            yield assignment, Use(node, tuple(attributes))


def alias_comment(alias: cst.ImportAlias) -> str | None:
    """The comment after ``name,`` in a parenthesized import list."""
    comma = alias.comma
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        comment = comma.whitespace_after.first_line.comment
        return comment.value if comment else None
    return None


def import_alias_name(alias: cst.ImportAlias) -> str:
    name = dotted(alias.name)
    assert name is not None
    return name


def from_module(statement: cst.ImportFrom) -> str | None:
    """The absolute module of ``from module import ...``; None for a relative import."""
    if statement.relative or statement.module is None:
        return None
    return dotted(statement.module)


def from_imports(
    items: list[tuple[str, str, str | None, str | None]], multiline: bool
) -> list[cst.ImportFrom]:
    """``from module import name as asname`` statements for (module, name, asname, comment) items, one
    per module in order of first appearance; in parentheses, one name a line with its comment, when
    the statement they come from was written so."""
    statements = []
    for module in dict.fromkeys(item[0] for item in items):
        names = [(n, a, c) for m, n, a, c in items if m == module]
        parts = [n + (f" as {a}" if a else "") for n, a, _ in names]
        if multiline:
            body = "".join(
                f"    {p},{'  ' + c if c else ''}\n" for p, (_, _, c) in zip(parts, names, strict=True)
            )
            code = f"from {module} import (\n{body})\n"
        else:
            code = f"from {module} import {', '.join(parts)}\n"
        line = cst.parse_statement(code)
        assert isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.ImportFrom)
        statements.append(line.body[0])
    return statements


def one_statement_a_line(original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
    """A line that held one statement and now holds several (an import a rewriter split) becomes one
    line per statement; the first keeps the comments above, and a ``# noqa``/``# type:`` comment at
    the end is repeated on each."""
    if len(original.body) != 1 or len(updated.body) == 1:
        return updated
    comment = updated.trailing_whitespace
    repeat = comment.comment is not None and comment.comment.value.startswith(("# noqa", "# type:"))
    return cst.FlattenSentinel(
        [
            cst.SimpleStatementLine(
                body=[small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)],
                leading_lines=updated.leading_lines if i == 0 else (),
                trailing_whitespace=comment if i == 0 or repeat else cst.TrailingWhitespace(),
            )
            for i, small in enumerate(updated.body)
        ]
    )


class ReplacesUses:
    """For a rewriter (a ``cst.CSTTransformer``) whose ``plan.uses`` maps nodes to the dotted path that
    replaces them: replaces each, keeping its parentheses."""

    plan: Any

    def _use(self, original, updated):
        new = self.plan.uses.get(original)
        if new is None:
            return updated
        return expression(new).with_changes(lpar=updated.lpar, rpar=updated.rpar)

    def leave_Name(self, original_node, updated_node):
        return self._use(original_node, updated_node)

    def leave_Attribute(self, original_node, updated_node):
        return self._use(original_node, updated_node)
