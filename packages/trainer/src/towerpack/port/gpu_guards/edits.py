"""The edits that make a GPU-only guard pass on a CPU, and their application to a module (libcst, so the
rest of the file keeps its formatting).

A fix names its target by where it starts (and, for an expression, ends) in the source it was found
in: 1-based lines, 0-based character columns, as libcst's positions count them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


class Edit(enum.Enum):
    OR_ONE = "or 1"  # the expression `x` becomes `x or 1`: a count of 0 becomes 1
    DROP = "drop"  # the statement goes
    DROP_ELSE = "drop else"  # the `else:` (or `elif`) part of an `if` goes
    KEEP_BODY = "keep body"  # an `if` becomes its body
    KEEP_ELSE = "keep else"  # an `if` becomes its `else:` block (an `elif` becomes an `if`)


@dataclass(frozen=True)
class Fix:
    edit: Edit
    line: int
    column: int
    end: tuple[int, int] | None = None  # OR_ONE: where the expression ends
    parens: bool = False  # OR_ONE: `(x or 1)` where the expression is part of a larger one
    text: str = ""  # the edit in words, for the report: "change `a` (line 3) to `a or 1`"
    short: str = ""  # ... without line numbers, once it is done: "change `a` to `a or 1`"


def apply(module: cst.Module, fixes: Iterable[Fix]) -> cst.Module:
    """``module`` with ``fixes`` applied (positions are those of ``module``'s code)."""
    fixes = set(fixes)
    if not fixes:
        return module
    return MetadataWrapper(module).visit(_Apply(fixes))


class _Apply(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, fixes: set[Fix]):
        super().__init__()
        self.statements = {(f.line, f.column): f for f in fixes if f.edit is not Edit.OR_ONE}
        self.expressions = {(f.line, f.column, *f.end): f for f in fixes if f.edit is Edit.OR_ONE}

    def _where(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        pos = self.get_metadata(PositionProvider, node)
        return pos.start.line, pos.start.column, pos.end.line, pos.end.column

    def _drop(self, original: cst.CSTNode, updated: cst.CSTNode):
        fix = self.statements.get(self._where(original)[:2])
        return cst.RemoveFromParent() if fix is not None and fix.edit is Edit.DROP else updated

    leave_Assert = leave_Raise = leave_Expr = _drop

    def leave_If(self, original: cst.If, updated: cst.If):
        fix = self.statements.get(self._where(original)[:2])
        if fix is None:
            return updated
        if fix.edit is Edit.DROP_ELSE:
            return updated.with_changes(orelse=None)
        if fix.edit is Edit.DROP:
            return cst.RemoveFromParent()
        kept = updated.body if fix.edit is Edit.KEEP_BODY else updated.orelse
        if isinstance(kept, cst.If):
            statements = [kept]
        else:
            block = kept.body if isinstance(kept, cst.Else) else kept
            statements = _statements(block)
        first, *rest = statements
        first = first.with_changes(leading_lines=[*updated.leading_lines, *first.leading_lines])
        return cst.FlattenSentinel([first, *rest])

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        updated = super().on_leave(original, updated)
        if not isinstance(original, cst.BaseExpression) or not self.expressions:
            return updated
        fix = self.expressions.get(self._where(original))
        if fix is None or not isinstance(updated, cst.BaseExpression):
            return updated
        self.expressions.pop(self._where(original))  # the outermost node at that place only
        left = updated
        if isinstance(left, cst.IfExp | cst.Lambda | cst.NamedExpr) and not left.lpar:
            left = left.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        wrapped = cst.BooleanOperation(left=left, operator=cst.Or(), right=cst.Integer("1"))
        if fix.parens:
            wrapped = wrapped.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return wrapped


def _statements(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    """The statements of a block; those of a one-line suite (``if x: a; b``) as one line."""
    if isinstance(block, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=block.body)]
    return list(block.body)
