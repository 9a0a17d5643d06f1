"""Finds what stops a run on a machine without GPUs, and the edit that lets it go on.

Four kinds (``Stop``): an ``assert`` that is false when the GPU queries answer "none"; an ``assert``,
``raise`` or ``sys.exit()`` in a branch that such an answer takes (``if not tf.test.is_gpu_available(): ...``,
the ``else`` of ``if get_num_gpu() > 0``); an ``assert`` capping a tower count at the GPU count
(``assert cfg.NUM_GPUS <= ngpu``); a division by a GPU count. Counts are followed from the query
through assignments within a module (flow.py); another module dividing by a config attribute set
from one is not seen, which is why a count is fixed where it is assigned:

- a guard that passes once its counts are at least 1 gets ``n = get_num_gpu()`` -> ``n =
  get_num_gpu() or 1`` (one tower on the CPU; towerpack runs more on logical CPU devices);
- any other guard is dropped, with the branch that held nothing else (and the imports only it used),
  or, where the GPU side of that branch sets names used after it, the branch becomes that side.

What the edits are and how they read is in fixes.py; edits.py applies them.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterator
from dataclasses import dataclass

from .edits import Fix
from .fixes import Planner
from .flow import Def
from .queries import query
from .source import Branch, Source, by_line, exits
from .values import Probe, Unknown, is_count

_WHY_DROP = (
    "towerpack's layers run channels_first on CPU and its multi-device trainers on logical CPU devices"
)
_WHY_ONE = "one tower on a CPU; towerpack runs more on logical CPU devices"
_WHY_CAP = (
    "towerpack runs any number of towers on logical CPU devices without GPUs, and with GPUs refuses more "
    "towers than it sees"
)
_DIVISIONS = (ast.Div, ast.FloorDiv, ast.Mod)
_INNER_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class Stop(enum.Enum):
    ASSERTION = "assertion"  # false without GPUs
    BRANCH = "branch"  # an assert or raise under a branch taken without GPUs
    TOWER_CAP = "tower cap"  # assert towers <= GPU count
    DIVISION = "division"  # by a GPU count


@dataclass(frozen=True)
class Guard:
    """One place that stops a run without GPUs, and the fixes that let it pass."""

    line: int
    stop: Stop
    message: str
    fixes: tuple[Fix, ...]


def find(source: str) -> list[Guard]:
    """The GPU guards of a module's source, by line."""
    return _Finder(source).guards()


class _Finder:
    def __init__(self, source: str):
        self.src = Source(source)
        self.flow = self.src.flow
        self.plan = Planner(self.src)

    def guards(self) -> list[Guard]:
        found = []
        for stmt, path in self.src.paths.items():
            if isinstance(stmt, ast.Assert | ast.Raise) or exits(stmt):
                guard = self._guard(stmt, path)
                if guard is not None:
                    found.append(guard)
            found += self._divisions(stmt, path)
        return sorted(found, key=lambda g: (g.line, g.message))

    def _reached(self, stmt: ast.stmt) -> bool:
        """Whether a run without GPUs may get to ``stmt``: no branch on the way goes elsewhere, and
        nothing before it in its blocks always returns, raises, breaks or continues."""
        for node, in_body in self.src.paths[stmt]:
            try:
                if Probe(self.flow).truth(node.test, self.flow.before[node]) is not in_body:
                    return False
            except Unknown:
                continue
        target: ast.stmt | None = stmt
        while target is not None:
            block = self.src.parents[target][1]
            if any(self._leaves(s) for s in block[: block.index(target)]):
                return False
            target = self.src.enclosing[target]
        return True

    def _leaves(self, stmt: ast.stmt) -> bool:
        """Whether ``stmt`` always leaves its block without GPUs (return, raise, break, continue, exit)."""
        if isinstance(stmt, ast.Return | ast.Raise | ast.Break | ast.Continue) or exits(stmt):
            return True
        if isinstance(stmt, ast.With | ast.AsyncWith):
            return any(self._leaves(s) for s in stmt.body)
        if not isinstance(stmt, ast.If):
            return False
        try:
            taken = Probe(self.flow).truth(stmt.test, self.flow.before[stmt])
        except Unknown:
            return all(any(self._leaves(s) for s in b) for b in (stmt.body, stmt.orelse))
        return any(self._leaves(s) for s in (stmt.body if taken else stmt.orelse))

    def _guard(self, stmt: ast.stmt, path: tuple[Branch, ...]) -> Guard | None:
        stop = self._stop(stmt, path, frozenset()) if self._reached(stmt) else None
        if stop is None:
            return None
        kind, roots, branch, certain = stop
        counts = frozenset(r for r in roots if is_count(r, self.flow))
        code = self.src.code(stmt)
        if kind is Stop.TOWER_CAP:
            message = (
                f"`{code}` fails on a machine without GPUs when more towers are asked for than "
                f"{self._counted(roots, stmt)} counts: "
            )
            fix = self.plan.drop(stmt, None)
            return Guard(stmt.lineno, kind, message + f"{fix.text} ({_WHY_CAP})", (fix,))
        if kind is Stop.ASSERTION:
            message = f"`{code}` fails on a machine without GPUs"
        else:
            node, in_body = branch
            taken = f"`{self.src.header(node)}`" if in_body else f"the `else:` of `{self.src.header(node)}`"
            stops = "stops" if certain else "can stop"
            message = (
                f"`{code}` {stops} a run on a machine without GPUs, which takes {taken} (line {node.lineno})"
            )
        if counts and self._stop(stmt, path, counts) is None:
            fixes = tuple(self.plan.or_one(r) for r in by_line(counts))
            message += f"{self._where_zero(counts)}: {_texts(fixes)} ({_WHY_ONE})"
            return Guard(stmt.lineno, kind, message, fixes)
        fix = self.plan.drop(stmt, branch[0] if branch else None)
        return Guard(stmt.lineno, kind, f"{message}: {fix.text} ({_WHY_DROP})", (fix,))

    def _stop(self, stmt, path, fixed) -> tuple[Stop, set[Def], Branch | None, bool] | None:
        """Whether ``stmt`` stops a run without GPUs (with the counts ``fixed`` at ``or 1``): how, the
        counts it depends on, the innermost branch on a GPU query that leads to it, and whether it stops
        for sure (else: it may, the assertion depending on more than the GPUs)."""
        roots: set[Def] = set()
        branch: Branch | None = None
        sure = True
        for node, in_body in path:
            probe = Probe(self.flow, fixed)
            try:
                taken = probe.truth(node.test, self.flow.before[node]) is in_body
            except Unknown:
                sure = False
                continue
            if not taken:
                return None
            if probe.asked_gpus:
                branch = (node, in_body)
                roots |= probe.roots
        if branch and not self._only_ifs_between(branch[0], stmt):
            branch = None  # a check in a loop or a try there is about something else
        if not isinstance(stmt, ast.Assert):
            return (Stop.BRANCH, roots, branch, sure) if branch else None
        probe = Probe(self.flow, fixed)
        try:
            holds = probe.truth(stmt.test, self.flow.before[stmt])
        except Unknown:
            holds = None
        if holds is False and probe.asked_gpus:
            return Stop.ASSERTION, roots | probe.roots, branch, True
        if holds is not True and branch:
            return Stop.BRANCH, roots | probe.roots, branch, sure and holds is False
        if holds is None and not fixed:
            cap = self._cap(stmt.test, self.flow.before[stmt])
            if cap is not None:
                return Stop.TOWER_CAP, cap, None, False
        return None

    def _only_ifs_between(self, branch: ast.If, stmt: ast.stmt) -> bool:
        up = self.src.enclosing[stmt]
        while up is not branch:
            if not isinstance(up, ast.If):
                return False
            up = self.src.enclosing[up]
        return True

    def _cap(self, test: ast.expr, state) -> set[Def] | None:
        """For ``towers <= count`` (or ``count >= towers``) with towers unknown: the count's roots."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(op, ast.GtE | ast.Gt):
            left, right = right, left
        elif not isinstance(op, ast.LtE | ast.Lt):
            return None
        count = Probe(self.flow)
        try:
            value = count.value(right, state)
        except Unknown:
            return None
        if type(value) is not int or not count.asked_gpus:
            return None
        try:
            Probe(self.flow).value(left, state)
        except Unknown:
            return count.roots
        return None

    def _divisions(self, stmt: ast.stmt, path: tuple[Branch, ...]) -> list[Guard]:
        found: list[Guard] = []
        if not self._reached(stmt):
            return found
        state = self.flow.before[stmt]
        for node, divisor in self._reachable_divisors(stmt):
            probe = Probe(self.flow)
            try:
                if probe.value(divisor, state) != 0 or not probe.asked_gpus:
                    continue
            except Unknown:
                continue
            message = f"`{self.src.code(node)}` divides by zero on a machine without GPUs"
            counts = frozenset(r for r in probe.roots if is_count(r, self.flow))
            if counts and self._nonzero(divisor, state, counts):
                fixes = tuple(self.plan.or_one(r) for r in by_line(counts))
                message += self._where_zero(counts)
            else:
                fixes = (self.plan.or_one_here(divisor),)
            found.append(Guard(node.lineno, Stop.DIVISION, f"{message}: {_texts(fixes)}", fixes))
        return found

    def _nonzero(self, divisor: ast.expr, state, fixed: frozenset[Def]) -> bool:
        try:
            return Probe(self.flow, fixed).value(divisor, state) != 0
        except Unknown:
            return False

    def _reachable_divisors(self, stmt: ast.stmt) -> Iterator[tuple[ast.AST, ast.expr]]:
        """(the division, its divisor) in ``stmt``'s own expressions, skipping what ``and``/``or``/``if``
        expressions leave unevaluated without GPUs."""
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, _DIVISIONS):
            yield stmt, stmt.value
        state = self.flow.before[stmt]
        todo = list(_own_expressions(stmt))
        while todo:
            node = todo.pop()
            if isinstance(node, _INNER_SCOPES):
                continue
            if isinstance(node, ast.BinOp) and isinstance(node.op, _DIVISIONS):
                yield node, node.right
            if isinstance(node, ast.BoolOp):
                todo.extend(self._evaluated_operands(node, state))
            elif isinstance(node, ast.IfExp):
                todo.append(node.test)
                try:
                    todo.append(node.body if Probe(self.flow).truth(node.test, state) else node.orelse)
                except Unknown:
                    todo.extend((node.body, node.orelse))
            else:
                todo.extend(ast.iter_child_nodes(node))

    def _evaluated_operands(self, node: ast.BoolOp, state) -> list[ast.expr]:
        decisive = isinstance(node.op, ast.Or)
        for i, value in enumerate(node.values):
            try:
                if Probe(self.flow).truth(value, state) is decisive:
                    return node.values[: i + 1]
            except Unknown:
                pass
        return node.values

    def _where_zero(self, counts: frozenset[Def]) -> str:
        places = ", ".join(f"`{self.src.code(r.node)}` (line {r.node.lineno})" for r in by_line(counts))
        return f", where {places} is 0"

    def _counted(self, roots: set[Def], stmt: ast.Assert) -> str:
        if roots:
            lines = ", ".join(str(r.node.lineno) for r in by_line(roots))
            codes = sorted({self.src.code(r.node) for r in roots})
            return " or ".join(f"`{c}`" for c in codes) + f" (line{'s' if len(roots) > 1 else ''} {lines})"
        calls = [n for n in ast.walk(stmt.test) if query(n) is not None]
        return f"`{self.src.code(calls[0])}`"


def _own_expressions(stmt: ast.stmt) -> list[ast.AST]:
    """What ``stmt`` evaluates itself: all of a simple statement, the header of a compound one."""
    match stmt:
        case ast.If(test=test) | ast.While(test=test):
            return [test]
        case ast.For(iter=it) | ast.AsyncFor(iter=it):
            return [it]
        case ast.With(items=items) | ast.AsyncWith(items=items):
            return [i.context_expr for i in items]
        case ast.Match(subject=subject):
            return [subject]
        case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef() | ast.Try() | ast.TryStar():
            return []
    return list(ast.iter_child_nodes(stmt))


def _texts(fixes: tuple[Fix, ...]) -> str:
    return "; ".join(f.text for f in fixes)
