"""Which edit lets a GPU guard pass, in the words the report gives it (see guards.py for when each
is chosen): ``n = get_num_gpu() or 1`` at a count's assignment, ``(x or 1)`` for a divisor, or
dropping the guard with the blocks it leaves empty."""

from __future__ import annotations

import ast
import re

from . import flow as flows
from .edits import Edit, Fix
from .flow import Def
from .queries import query
from .source import Source, span


class Planner:
    """The fixes for the guards of one module."""

    def __init__(self, src: Source):
        self.src = src

    def or_one(self, root: Def) -> Fix:
        """``n = get_num_gpu()`` -> ``n = get_num_gpu() or 1``."""
        stmt, value = root.node, root.value
        code = self.src.code(stmt)
        if isinstance(value, ast.IfExp | ast.Lambda | ast.NamedExpr):
            after = code[: len(code) - len(self.src.code(value))] + f"({self.src.code(value)}) or 1"
        else:
            after = f"{code} or 1"
        text = f"change line {stmt.lineno} to `{after}`"
        short = f"change `{code}` to `{after}`"
        return Fix(Edit.OR_ONE, *self.src.start(value), end=self.src.end(value), text=text, short=short)

    def or_one_here(self, divisor: ast.expr) -> Fix:
        code = self.src.code(divisor)
        text = f"change `{code}` (line {divisor.lineno}) to `({code} or 1)`"
        short = f"change `{code}` to `({code} or 1)`"
        where = {"end": self.src.end(divisor), "parens": True, "text": text, "short": short}
        return Fix(Edit.OR_ONE, *self.src.start(divisor), **where)

    def drop(self, stmt: ast.stmt, branch: ast.If | None) -> Fix:
        """Drop ``stmt``; an ``else:`` left with nothing else but ``pass`` and imports only it used goes too,
        and so do such ``if`` blocks within the GPU ``branch`` (the branch included)."""
        within = {id(n) for n in ast.walk(branch)} if branch else set()
        target: ast.stmt = stmt
        while True:
            owner, block = self.src.parents[target]
            if not isinstance(owner, ast.If):
                break
            if not all(self._inert(s, block) for s in block if s is not target):
                break
            # Where the GPU path sets names used later, a CPU run takes it too (towerpack runs the GPU
            # settings, channels_first included, on CPU); otherwise it skips it.
            other = owner.body if block is owner.orelse else owner.orelse
            if owner is branch and other and self._pure(owner.test) and self._sets_used_names(owner, other):
                return self._keep(owner, Edit.KEEP_BODY if other is owner.body else Edit.KEEP_ELSE)
            if block is owner.orelse:
                return self._drop_else(owner)
            if id(owner) not in within or owner.orelse or not self._pure(owner.test):
                break
            target = owner
        if target is stmt:
            return Fix(
                Edit.DROP, *self.src.start(stmt), text="drop it", short=f"drop `{self.src.code(stmt)}`"
            )
        what = f"the `{self.src.header(target)}` block"
        text = f"drop {what} ({span(target.lineno, target.end_lineno)})"
        return Fix(Edit.DROP, *self.src.start(target), text=text, short=f"drop {what}")

    def _keep(self, owner: ast.If, edit: Edit) -> Fix:
        part = "body" if edit is Edit.KEEP_BODY else "`else:` block"
        if edit is Edit.KEEP_ELSE and self.src.is_elif(owner.orelse[0]):
            part = "`elif` (as an `if`)"
        what = f"the `{self.src.header(owner)}` statement"
        text = f"replace {what} ({span(owner.lineno, owner.end_lineno)}) by its {part}"
        return Fix(edit, *self.src.start(owner), text=text, short=f"replace {what} by its {part}")

    def _sets_used_names(self, owner: ast.If, block: list[ast.stmt]) -> bool:
        """Whether ``block`` (part of ``owner``) binds a name that its scope reads outside ``owner``."""
        bound = set()
        for node in (n for stmt in block for n in flows.walk_own(stmt)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, flows.SCOPES[1:]):
                bound.add(node.name)
        inside = {id(n) for n in ast.walk(owner)}
        scope = self.src.scopes[owner]
        reads = (n for stmt in scope.body for n in flows.walk_own(stmt) if id(n) not in inside)
        return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in bound for n in reads)

    def _drop_else(self, owner: ast.If) -> Fix:
        first = owner.orelse[0]
        if self.src.is_elif(first):
            what = f"`{self.src.header(first)}` block"
            start = first.lineno
        else:
            lines = range(first.lineno, owner.lineno, -1)
            start = next((n for n in lines if _is_else(self.src.lines[n - 1])), first.lineno)
            what = f"`else:` block of `{self.src.header(owner)}`"
        text = f"drop the {what} ({span(start, owner.end_lineno)})"
        return Fix(Edit.DROP_ELSE, *self.src.start(owner), text=text, short=f"drop the {what}")

    def _inert(self, stmt: ast.stmt, block: list[ast.stmt]) -> bool:
        """``pass``, a constant, or an import whose names nothing outside ``block`` reads."""
        if isinstance(stmt, ast.Pass) or isinstance(getattr(stmt, "value", None), ast.Constant):
            return isinstance(stmt, ast.Pass | ast.Expr)
        if not isinstance(stmt, ast.Import | ast.ImportFrom):
            return False
        inside = {id(n) for s in block for n in ast.walk(s)}
        names = {(a.asname or a.name).split(".")[0] for a in stmt.names}
        return not any(
            isinstance(n, ast.Name) and n.id in names and id(n) not in inside for n in ast.walk(self.src.tree)
        )

    @staticmethod
    def _pure(test: ast.expr) -> bool:
        """Whether dropping ``test`` unevaluated changes nothing: it calls nothing but GPU queries."""
        impure = (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)
        return not any(isinstance(n, impure) and query(n) is None for n in ast.walk(test))


def _is_else(line: str) -> bool:
    return re.match(r"\s*else\s*:", line) is not None
