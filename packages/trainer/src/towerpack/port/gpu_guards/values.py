"""What a small expression is worth on a machine without GPUs: constants, GPU queries (answering
"none"), a few builtins, and the variables that hold what a query answered (followed through flow.py).
Anything else is unknown.

A ``Probe`` can also take some counts as fixed (``n = get_num_gpu() or 1``), to see whether that fix
lets a guard pass, and it records which assignments the value came from.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field

from .flow import Def, Flow, State, key_of
from .queries import ANSWERS, query

_BUILTINS = {"len": len, "min": min, "max": max, "int": int, "bool": bool, "abs": abs}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class Unknown(Exception):
    """The expression depends on more than what the GPU queries answer."""


@dataclass
class Probe:
    """One evaluation, with the counts ``fixed`` to read as ``count or 1``. Afterwards ``roots`` holds the
    assignments calling a GPU query that the value came from, ``queried`` whether a query was called in
    the expression itself."""

    flow: Flow
    fixed: frozenset[Def] = frozenset()
    roots: set[Def] = field(default_factory=set)
    queried: bool = False
    _active: set[Def] = field(default_factory=set)

    @property
    def asked_gpus(self) -> bool:
        return self.queried or bool(self.roots)

    def truth(self, node: ast.expr, state: State) -> bool:
        """Whether ``node`` is true; ``a and b`` is false when one side is, whatever the other."""
        match node:
            case ast.BoolOp(op=op, values=values):
                decisive = isinstance(op, ast.Or)
                unknown = False
                for value in values:
                    try:
                        if self.truth(value, state) is decisive:
                            return decisive
                    except Unknown:
                        unknown = True
                if unknown:
                    raise Unknown
                return not decisive
            case ast.UnaryOp(op=ast.Not(), operand=operand):
                return not self.truth(operand, state)
        return bool(self.value(node, state))

    def value(self, node: ast.expr, state: State) -> object:
        match node:
            case ast.Constant(value=value):
                return value
            case ast.Name() | ast.Attribute() if key_of(node) is not None:
                return self._variable(key_of(node), state)
            case ast.Call() if query(node) is not None:
                self.queried = True
                answer = ANSWERS[query(node)]
                return list(answer) if isinstance(answer, list) else answer
            case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _BUILTINS:
                try:
                    return _BUILTINS[name](*(self.value(a, state) for a in args))
                except (TypeError, ValueError) as e:
                    raise Unknown from e
            case ast.UnaryOp(op=ast.Not(), operand=operand):
                return not self.truth(operand, state)
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                return self._apply(operator.neg, self.value(operand, state))
            case ast.BoolOp(op=op, values=values):
                for value in values:
                    result = self.value(value, state)
                    if bool(result) is isinstance(op, ast.Or):
                        return result
                return result
            case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
                return self._apply(_BINARY[type(op)], self.value(left, state), self.value(right, state))
            case ast.Compare(left=left, ops=ops, comparators=comparators):
                values = [self.value(left, state), *(self.value(c, state) for c in comparators)]
                pairs = zip(ops, values, values[1:], strict=False)
                return all(self._apply(_COMPARE[type(op)], a, b) for op, a, b in pairs)
            case ast.IfExp(test=test, body=body, orelse=orelse):
                return self.value(body if self.truth(test, state) else orelse, state)
            case ast.Tuple(elts=elts):
                return tuple(self.value(e, state) for e in elts)
        raise Unknown

    def _variable(self, key: str, state: State) -> object:
        """A variable assigned from a GPU query on some path is taken to hold that value: without GPUs,
        that is the path a run takes. Paths that disagree make it unknown."""
        defs = [d for d in state.get(key, ()) if d in self.flow.gpu]
        if not defs:
            raise Unknown
        values = [self._definition(d) for d in defs]
        if any(v != values[0] for v in values[1:]):
            raise Unknown
        return values[0]

    def _definition(self, d: Def) -> object:
        if d in self._active:
            raise Unknown  # a loop assigning a variable from itself
        self._active.add(d)
        try:
            value = self.value(d.value, self.flow.before[d.node])
        finally:
            self._active.discard(d)
        if d in self.flow.roots:
            self.roots.add(d)
        return (value or 1) if d in self.fixed else value

    @staticmethod
    def _apply(op, *args):
        try:
            return op(*args)
        except (TypeError, ZeroDivisionError, ValueError) as e:
            raise Unknown from e


def is_count(d: Def, flow: Flow) -> bool:
    """Whether ``d`` assigns a GPU count that is 0 without GPUs (``n = get_num_gpu()``): ``or 1`` fixes it."""
    try:
        value = Probe(flow).value(d.value, flow.before[d.node])
    except Unknown:
        return False
    return type(value) is int and value == 0
