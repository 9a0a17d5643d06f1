"""Which assignments may reach each statement of a scope (reaching definitions, over if/else, loops,
try and with), so that a GPU count can be followed from ``n = get_num_gpu()`` to the ``assert`` or
the division that uses it, through other names and attributes (``cfg.NUM_GPUS = n``).

A variable is a name or a dotted attribute path (``_C.TRAIN.NUM_GPUS``). Assigning ``a`` also
replaces ``a.b``. What calls do to attributes is not followed, and a function sees its module's
names (those it never assigns) as the module leaves them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .queries import asks_for_gpus


@dataclass(frozen=True)
class Def:
    """One assignment to one variable. ``value`` is None where it is not followed (a loop target, an
    import, ``+=``, tuple unpacking)."""

    node: ast.AST
    key: str
    value: ast.expr | None = None


# The variables' possible definitions; a variable not in the state has none we know of.
State = dict[str, frozenset[Def]]

SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def key_of(node: ast.AST) -> str | None:
    """``n`` for a name, ``a.b.c`` for an attribute path of names, None otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = key_of(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


@dataclass
class Flow:
    """The definitions reaching the statements of one scope (not of the scopes inside it)."""

    before: dict[ast.AST, State] = field(default_factory=dict)
    gpu: set[Def] = field(default_factory=set)  # defs whose value comes from a GPU query
    roots: set[Def] = field(default_factory=set)  # ... by calling one itself

    def block(self, body: Iterable[ast.stmt], state: State) -> State:
        for stmt in body:
            state = self.statement(stmt, state)
        return state

    def statement(self, stmt: ast.stmt, state: State) -> State:
        # A loop's second pass overwrites the first: it sees the defs of its own body too.
        self.before[stmt] = state
        match stmt:
            case ast.If(body=body, orelse=orelse):
                return merge(self.block(body, state), self.block(orelse, state))
            case ast.For() | ast.AsyncFor():
                return self._loop(stmt, _opaque(state, stmt, [stmt.target]))
            case ast.While():
                return self._loop(stmt, state)
            case ast.Try() | ast.TryStar():
                return self._try(stmt, state)
            case ast.With() | ast.AsyncWith():
                targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
                return self.block(stmt.body, _opaque(state, stmt, targets))
            case ast.Match(cases=cases):
                return merge(state, *(self.block(case.body, state) for case in cases))
            case ast.Assign(targets=targets, value=value):
                return self._assign(stmt, state, targets, value)
            case ast.AnnAssign(target=target, value=value) if value is not None:
                return self._assign(stmt, state, [target], value)
            case ast.AugAssign(target=target):
                return _opaque(state, stmt, [target])
            case ast.Import() | ast.ImportFrom():
                names = [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]
                return _replace(state, [Def(stmt, name) for name in names])
            case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef():
                return _replace(state, [Def(stmt, stmt.name)])
        return state

    def _assign(self, stmt: ast.stmt, state: State, targets: list[ast.expr], value: ast.expr) -> State:
        simple = [t for t in targets if key_of(t) is not None]
        defs = [Def(stmt, key_of(t), value) for t in simple]
        if defs and self._from_gpus(value, state):
            self.gpu.update(defs)
            if asks_for_gpus(value):
                self.roots.update(defs)
        state = _opaque(state, stmt, [t for t in targets if key_of(t) is None])
        return _replace(state, defs)

    def _from_gpus(self, value: ast.expr, state: State) -> bool:
        if asks_for_gpus(value):
            return True
        keys = {key_of(n) for n in ast.walk(value) if isinstance(n, ast.Name | ast.Attribute)}
        return any(d in self.gpu for k in keys if k in state for d in state[k])

    def _loop(self, stmt: ast.For | ast.AsyncFor | ast.While, state: State) -> State:
        first = self.block(stmt.body, state)
        again = self.block(stmt.body, merge(state, first))
        return self.block(stmt.orelse, merge(state, again))

    def _try(self, stmt: ast.Try | ast.TryStar, state: State) -> State:
        body = self.block(stmt.body, state)
        caught = merge(state, body)
        ends = [self.block(stmt.orelse, body)]
        for handler in stmt.handlers:
            named = _replace(caught, [Def(handler, handler.name)]) if handler.name else caught
            ends.append(self.block(handler.body, named))
        return self.block(stmt.finalbody, merge(*ends, caught) if stmt.finalbody else merge(*ends))


def analyse(tree: ast.Module) -> Flow:
    """The flow of every scope in ``tree``: its module first, whose end state the functions start from
    for the names they never assign; a class body starts empty."""
    flow = Flow()
    module_end = flow.block(tree.body, {})
    for scope in ast.walk(tree):
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            local = _assigned_names(scope)
            flow.block(scope.body, {k: v for k, v in module_end.items() if "." not in k and k not in local})
        elif isinstance(scope, ast.ClassDef):
            flow.block(scope.body, {})
    return flow


def own_statements(scope: ast.AST) -> Iterator[ast.stmt]:
    """The statements of a scope, without those of the scopes defined inside it."""
    todo = list(reversed(scope.body))
    while todo:
        stmt = todo.pop()
        yield stmt
        if isinstance(stmt, SCOPES):
            continue
        for name in ("handlers", "cases"):
            for part in reversed(getattr(stmt, name, [])):
                todo.extend(reversed(part.body))
        for name in ("finalbody", "orelse", "body"):
            todo.extend(reversed(getattr(stmt, name, [])))


def merge(*states: State) -> State:
    keys = {k for s in states for k in s}
    return {k: frozenset().union(*(s.get(k, frozenset()) for s in states)) for k in keys}


def _replace(state: State, defs: list[Def]) -> State:
    """``state`` after ``defs``: each replaces its variable and the attributes under it."""
    if not defs:
        return state
    gone = {d.key for d in defs}
    out = {k: v for k, v in state.items() if not any(k == g or k.startswith(g + ".") for g in gone)}
    for d in defs:
        out[d.key] = out.get(d.key, frozenset()) | {d}
    return out


def _opaque(state: State, stmt: ast.AST, targets: list[ast.expr]) -> State:
    """``state`` after ``stmt`` assigned ``targets`` values that are not followed."""
    stored = [n for t in targets for n in ast.walk(t) if isinstance(getattr(n, "ctx", None), ast.Store)]
    keys = {key_of(n) for n in stored}
    return _replace(state, [Def(stmt, k) for k in sorted(k for k in keys if k is not None)])


def _assigned_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = function.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    for stmt in function.body:
        for node in walk_own(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.id)
            elif isinstance(node, SCOPES[1:]):
                names.add(node.name)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
    return names


def walk_own(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and what is inside it, without looking into the functions, classes and lambdas there."""
    yield node
    if not isinstance(node, (*SCOPES, ast.Lambda)):
        for child in ast.iter_child_nodes(node):
            yield from walk_own(child)
