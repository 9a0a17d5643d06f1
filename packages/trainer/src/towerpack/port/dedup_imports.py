"""Drops what a port imports twice. After the rewrites, two imports of one block can bring the same
name: ``from tensorpack import *`` and ``from tensorpack.tfutils import *`` both become ``from
towerpack.trainer import *``, and ``from tensorpack import SimpleTrainer`` next to ``from
tensorpack.train import SimpleTrainer, TrainConfig`` gives ``SimpleTrainer`` twice.

The later copy goes (a whole statement, or one name of a ``from`` list); comments on a dropped line
move to the next statement. Imports the file already held twice before the port stay as they are,
and so does a name that carries a comment of its own. Blocks are compared apart: an import under
``if``/``try`` or in a function is left alone.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator, Sequence

import libcst as cst

from .syntax import dotted

# One imported binding: ("import", name, asname), ("from", level, module, name, asname), or with
# name "*" for a star import.
Key = tuple


def rewrite(module: cst.Module, original: bytes) -> cst.Module:
    """``module`` (a ported module) without the duplicate imports the port made; ``original`` is the
    file's source before the port."""
    if module.bytes == original:
        return module
    return module.visit(_Dedup(_original_keys(original)))


def _original_keys(original: bytes) -> Counter:
    try:
        tree = ast.parse(original)
    except (SyntaxError, ValueError):
        return Counter()
    keys: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            keys.update(("import", a.name, a.asname) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            keys.update(("from", node.level, node.module or "", a.name, a.asname) for a in node.names)
    return keys


def _keys(statement: cst.BaseSmallStatement) -> Iterator[tuple[Key, cst.ImportAlias | None]]:
    """The bindings of an import statement, each with its alias (None for a star)."""
    if isinstance(statement, cst.Import):
        for alias in statement.names:
            yield ("import", dotted(alias.name), _asname(alias)), alias
    elif isinstance(statement, cst.ImportFrom):
        module = dotted(statement.module) if statement.module is not None else ""
        level = len(statement.relative)
        if isinstance(statement.names, cst.ImportStar):
            yield ("from", level, module, "*", None), None
        else:
            for alias in statement.names:
                yield ("from", level, module, dotted(alias.name), _asname(alias)), alias


def _asname(alias: cst.ImportAlias) -> str | None:
    return dotted(alias.asname.name) if alias.asname is not None else None


def _has_comment(alias: cst.ImportAlias) -> bool:
    comma = alias.comma
    return (
        isinstance(comma, cst.Comma)
        and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
        and comma.whitespace_after.first_line.comment is not None
    )


class _Dedup(cst.CSTTransformer):
    def __init__(self, original: Counter) -> None:
        super().__init__()
        self.original = original

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body, footer = self._block(updated_node.body, updated_node.footer)
        return updated_node.with_changes(body=body, footer=footer)

    def leave_IndentedBlock(self, original_node, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        body, footer = self._block(updated_node.body, updated_node.footer)
        return updated_node.with_changes(body=body, footer=footer)

    def _block(self, body: Sequence[cst.BaseStatement], footer: Sequence[cst.EmptyLine]):
        seen: set[Key] = set()
        kept: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []  # the comments of dropped lines, for the next statement
        for statement in body:
            new = self._line(statement, seen) if isinstance(statement, cst.SimpleStatementLine) else statement
            if new is None:
                carried += _comments(statement)
                continue
            if carried:
                new = new.with_changes(leading_lines=[*carried, *new.leading_lines])
                carried = []
            kept.append(new)
        if not kept:  # never empty a block: keep its first statement
            return body, footer
        return kept, [*carried, *footer]

    def _line(self, line: cst.SimpleStatementLine, seen: set[Key]) -> cst.SimpleStatementLine | None:
        small = [new for new in (self._statement(s, seen) for s in line.body) if new is not None]
        if not small:
            return None
        if len(small) != len(line.body):
            small[-1] = small[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return line.with_changes(body=small)

    def _statement(self, statement: cst.BaseSmallStatement, seen: set[Key]):
        """The statement without the bindings ``seen`` already gives (None: nothing is left)."""
        keys = list(_keys(statement))
        if not keys:
            return statement
        dropped = []
        for key, alias in keys:
            twice_before = self.original[key] > 1
            if key in seen and not twice_before and not (alias is not None and _has_comment(alias)):
                dropped.append(alias)
            seen.add(key)
        if len(dropped) == len(keys):
            return None
        if not dropped:
            return statement
        names = [a for a in statement.names if not any(a is d for d in dropped)]
        if isinstance(statement, cst.Import) or statement.lpar is None:
            names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return statement.with_changes(names=names)


def _comments(line: cst.BaseStatement) -> list[cst.EmptyLine]:
    """The comment lines above ``line`` and its end-of-line comment, as lines of their own."""
    lines = [empty for empty in line.leading_lines if empty.comment is not None]
    trailing = getattr(line, "trailing_whitespace", None)
    if trailing is not None and trailing.comment is not None:
        lines.append(cst.EmptyLine(comment=trailing.comment))
    return lines
