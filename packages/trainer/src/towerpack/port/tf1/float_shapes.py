"""Finds shape dimensions and layer widths that Python 3 computes as floats: ``in_channel / split``
(true division), ``width * 0.5``, ``float(n)`` where a shape goes (``tf.placeholder(dtype, shape)``,
``tf.get_variable(name, shape)``, ``InputDesc``, ``tf.reshape``, ``Conv2D``'s channels and kernel, ...).

TensorFlow 1 took a whole float as a dimension (``Dimension(32.0)`` was 32); TensorFlow 2.21 raises
TypeError for it, as NumPy does for array shapes. Only a division of two integer literals that divide
exactly (``64 / 2``) is rewritten (to ``64 // 2``, the same number); every other place is reported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..findings import Finding, Kind
from ..syntax import dotted

_TF = frozenset({"tf", "tensorflow", "v1", "tfv1"})
_NP = frozenset({"np", "numpy"})


@dataclass(frozen=True)
class ShapeArgs:
    """Where a function takes shapes or widths: argument ``positions`` (0-based) and ``keywords``.
    ``receivers``: the module names it is called on (``tf`` in ``tf.zeros``; a bare call counts too);
    None: anything. ``named``: a tensorpack layer, whose positions count only after a name string."""

    positions: tuple[int, ...]
    keywords: tuple[str, ...]
    receivers: frozenset[str] | None = _TF
    named: bool = False


_SHAPE = ("shape",)
_CONV = ShapeArgs((2, 3), ("filters", "out_channel", "kernel_size", "kernel_shape"), None, named=True)

SHAPE_ARGS: dict[str, ShapeArgs] = {
    "get_variable": ShapeArgs((1,), _SHAPE),
    "placeholder": ShapeArgs((1,), _SHAPE),
    "placeholder_with_default": ShapeArgs((1,), _SHAPE),
    "TensorSpec": ShapeArgs((0,), _SHAPE),
    "InputDesc": ShapeArgs((1,), _SHAPE, None),
    "reshape": ShapeArgs((1,), ("shape", "newshape"), _TF | _NP),
    "zeros": ShapeArgs((0,), _SHAPE, _TF | _NP),
    "ones": ShapeArgs((0,), _SHAPE, _TF | _NP),
    "empty": ShapeArgs((0,), _SHAPE, _NP),
    "full": ShapeArgs((0,), _SHAPE, _NP),
    "fill": ShapeArgs((0,), ("dims",)),
    "truncated_normal": ShapeArgs((0,), _SHAPE),
    "random_normal": ShapeArgs((0,), _SHAPE),
    "random_uniform": ShapeArgs((0,), _SHAPE),
    "resize_images": ShapeArgs((1,), ("size",), frozenset({"image"})),
    "resize_bilinear": ShapeArgs((1,), ("size",), frozenset({"image"})),
    "resize_nearest_neighbor": ShapeArgs((1,), ("size",), frozenset({"image"})),
    "resize": ShapeArgs((1,), ("size", "dsize"), frozenset({"image", "cv2"})),
    "conv2d": ShapeArgs((1, 2), ("filters", "kernel_size"), frozenset({"layers"})),
    "conv2d_transpose": ShapeArgs((1, 2), ("filters", "kernel_size"), frozenset({"layers"})),
    "dense": ShapeArgs((1,), ("units",), frozenset({"layers"})),
    "Conv2D": _CONV,
    "Conv2DTranspose": _CONV,
    "Deconv2D": _CONV,
    "FullyConnected": ShapeArgs((2,), ("units", "out_dim"), None, named=True),
    "MaxPooling": ShapeArgs((2,), ("pool_size", "shape"), None, named=True),
    "AvgPooling": ShapeArgs((2,), ("pool_size", "shape"), None, named=True),
    "FixedUnPooling": ShapeArgs((2,), _SHAPE, None, named=True),
}


def _shape_args(call: cst.Call) -> tuple[str, list[cst.BaseExpression]]:
    """The callee as written and the arguments of ``call`` that hold shapes or widths."""
    written = dotted(call.func)
    if written is None:
        return "", []
    receiver, _, name = written.rpartition(".")
    spec = SHAPE_ARGS.get(name)
    if spec is None:
        return written, []
    if receiver and spec.receivers is not None and receiver.rpartition(".")[2] not in spec.receivers:
        return written, []
    positional = [a for a in call.args if a.keyword is None and not a.star]
    found = [a.value for a in call.args if a.keyword is not None and a.keyword.value in spec.keywords]
    if spec.named and not (positional and isinstance(positional[0].value, cst.BaseString)):
        return written, found
    found += [positional[i].value for i in spec.positions if i < len(positional)]
    return written, found


def _dimensions(shape: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(shape, cst.List | cst.Tuple):
        return [e.value for e in shape.elements]
    return [shape]


def _suspects(node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, str]]:
    """The parts of a dimension that make it a float: a true division, a float literal, ``float()``.
    Calls other than float() are not looked into (``int(w * 0.5)`` is fine)."""
    match node:
        case cst.BinaryOperation(left=left, operator=operator, right=right):
            if isinstance(operator, cst.Divide):
                yield node, "divides with `/`, which gives a float in Python 3"
            yield from _suspects(left)
            yield from _suspects(right)
        case cst.UnaryOperation(expression=operand):
            yield from _suspects(operand)
        case cst.IfExp(body=body, orelse=orelse):
            yield from _suspects(body)
            yield from _suspects(orelse)
        case cst.Float():
            yield node, "has a float literal"
        case cst.Call(func=cst.Name(value="float")):
            yield node, "calls float()"


def _exact_division(node: cst.CSTNode) -> bool:
    """``a / b`` of integer literals where b divides a: ``a // b`` is the same number."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide)):
        return False
    if not (isinstance(node.left, cst.Integer) and isinstance(node.right, cst.Integer)):
        return False
    a, b = ast.literal_eval(node.left.value), ast.literal_eval(node.right.value)
    return b != 0 and a % b == 0


class _Collector(cst.CSTVisitor):
    """Every (callee, dimension, suspect part, why) in a module."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, cst.BaseExpression, cst.CSTNode, str]] = []

    def visit_Call(self, node: cst.Call) -> None:
        callee, shapes = _shape_args(node)
        for shape in shapes:
            for dimension in _dimensions(shape):
                self.found += [(callee, dimension, part, why) for part, why in _suspects(dimension)]


def rewrite(module: cst.Module) -> cst.Module:
    """``module`` with each exact division of integer literals in a dimension written with ``//``."""
    if re.search(r"\d\s*/\s*\d", module.code) is None:  # no division of literals: nothing to rewrite
        return module
    collector = _Collector()
    module.visit(collector)
    exact = {id(part) for _, _, part, _ in collector.found if _exact_division(part)}
    if not exact:
        return module
    return module.visit(_FloorDivision(exact))


class _FloorDivision(cst.CSTTransformer):
    def __init__(self, nodes: set[int]) -> None:
        super().__init__()
        self.nodes = nodes

    def leave_BinaryOperation(self, original_node, updated_node):
        if id(original_node) not in self.nodes:
            return updated_node
        op = updated_node.operator
        floor = cst.FloorDivide(whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after)
        return updated_node.with_changes(operator=floor)


def float_shapes(wrapper: MetadataWrapper, path: str) -> list[Finding]:
    """Each dimension of ``wrapper.module`` (a ported module) that is computed as a float."""
    collector = _Collector()
    wrapper.visit(collector)
    if not collector.found:
        return []
    positions = wrapper.resolve(PositionProvider)
    code = wrapper.module.code_for_node
    findings: dict[tuple[int, str], Finding] = {}
    for callee, dimension, part, why in collector.found:
        line = positions[part].start.line
        text = " ".join(code(dimension).split())
        message = (
            f"`{text}` in {callee}(...) {why}: TensorFlow 1 took a whole float as a dimension, "
            "TensorFlow 2.21 raises TypeError (NumPy too); use // or int(...)"
        )
        findings.setdefault((line, text), Finding(path, line, Kind.FLOAT_SHAPE, message))
    return list(findings.values())
