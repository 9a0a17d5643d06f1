"""Finds assertions that fail on a machine without GPUs (``assert tf.test.is_gpu_available()``,
``assert get_num_gpu() > 0``, or ``n = get_num_gpu()`` then ``assert n > 0``).

The reference's examples refused to run on CPU; towerpack's layers run channels_first on CPU and its
multi-device trainers run on logical CPU devices, so such an assertion only stands in the way. An
assertion is reported when it evaluates to false with every GPU query answering "none" (0 GPUs,
False); one that does not depend on the count alone (``assert n == cfg.NUM_GPUS``) is left alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .findings import Finding, Kind

# The last attribute of a call that asks for GPUs, and its answer on a machine without any.
_QUERIES = {
    "is_gpu_available": False,
    "is_built_with_cuda": False,
    "is_built_with_gpu_support": False,
    "get_num_gpu": 0,
    "get_nr_gpu": 0,
    "list_physical_devices": [],
    "list_logical_devices": [],
}
_BUILTINS = {"len": len, "min": min, "max": max, "int": int, "bool": bool}


class _Unknown(Exception):
    """The expression depends on more than the GPU count."""


def gpu_asserts(source: str, path: str) -> list[Finding]:
    tree = ast.parse(source)
    findings = []
    for scope in _scopes(tree):
        counts = _gpu_names(scope)
        for node in _own_nodes(scope):
            if isinstance(node, ast.Assert) and _mentions_gpus(node.test, counts):
                try:
                    holds = bool(_evaluate(node.test, counts))
                except _Unknown:
                    continue
                if not holds:
                    code = ast.get_source_segment(source, node) or "assert ..."
                    findings.append(Finding(path, node.lineno, Kind.GPU_ONLY, _message(code)))
    return findings


def _message(code: str) -> str:
    return (
        f"`{code}` fails on a machine without GPUs; towerpack's layers run channels_first on CPU and its "
        "multi-device trainers on logical CPU devices: drop the assertion or make it a warning"
    )


def _scopes(tree: ast.Module) -> Iterator[ast.AST]:
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a module or function body, without those of the functions inside it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


def _gpu_names(scope: ast.AST) -> dict[str, object]:
    """Names assigned a GPU query in this scope (``n = get_num_gpu()``), with their value without GPUs."""
    found: dict[str, object] = {}
    for node in _own_nodes(scope):
        one_name = (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        )
        if one_name and _mentions_gpus(node.value, {}):
            try:
                found[node.targets[0].id] = _evaluate(node.value, {})
            except _Unknown:
                continue
    return found


def _mentions_gpus(node: ast.AST, names: dict[str, object]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and _query(sub) is not None:
            return True
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
    return False


def _query(call: ast.Call) -> str | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in _QUERIES:
        return None
    if name.startswith("list_") and not any(
        isinstance(a, ast.Constant) and a.value == "GPU" for a in call.args
    ):
        return None
    return name


def _evaluate(node: ast.AST, names: dict[str, object]) -> object:
    """The value of a small expression of constants, GPU queries and the names holding them."""
    match node:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name) if name in names:
            return names[name]
        case ast.Call() if _query(node) is not None:
            return _QUERIES[_query(node)]
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _BUILTINS:
            return _BUILTINS[name](*(_evaluate(a, names) for a in args))
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _evaluate(operand, names)
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_evaluate(operand, names)
        case ast.BoolOp(op=op, values=values):
            results = [_evaluate(v, names) for v in values]
            return all(results) if isinstance(op, ast.And) else any(results)
        case ast.BinOp(left=left, op=op, right=right):
            return _binary(op, _evaluate(left, names), _evaluate(right, names))
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            values = [_evaluate(left, names), *(_evaluate(c, names) for c in comparators)]
            return all(_compare(op, a, b) for op, a, b in zip(ops, values, values[1:], strict=False))
    raise _Unknown


def _binary(op: ast.operator, a, b):
    try:
        match op:
            case ast.Add():
                return a + b
            case ast.Sub():
                return a - b
            case ast.Mult():
                return a * b
            case ast.Mod():
                return a % b
            case ast.FloorDiv():
                return a // b
            case ast.Div():
                return a / b
    except (TypeError, ZeroDivisionError):
        pass
    raise _Unknown


def _compare(op: ast.cmpop, a, b) -> bool:
    try:
        match op:
            case ast.Gt():
                return a > b
            case ast.GtE():
                return a >= b
            case ast.Lt():
                return a < b
            case ast.LtE():
                return a <= b
            case ast.Eq():
                return a == b
            case ast.NotEq():
                return a != b
    except TypeError:
        pass
    raise _Unknown
