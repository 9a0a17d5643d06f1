"""A module's source as the guard finder reads it: its syntax tree, where each statement sits (the
``if`` branches above it, its block, the statement around it, its scope), how a node reads on one
line, and where it starts and ends in libcst's terms (1-based lines, columns in characters)."""

from __future__ import annotations

import ast
import re

from . import flow as flows
from .flow import Def

_LONG = 80  # characters of code a message quotes in full

# An `if` a statement sits under, and whether in its body (else: in its `else`).
Branch = tuple[ast.If, bool]


class Source:
    """One module's text, parsed once, with its statements indexed and its flow analysed."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.tree = ast.parse(text)
        self.flow = flows.analyse(self.tree)
        self.paths: dict[ast.stmt, tuple[Branch, ...]] = {}
        self.parents: dict[ast.stmt, tuple[ast.AST, list[ast.stmt]]] = {}  # the owner and block
        self.enclosing: dict[ast.stmt, ast.stmt | None] = {}
        self.scopes: dict[ast.stmt, ast.AST] = {}
        for scope in ast.walk(self.tree):
            if isinstance(scope, flows.SCOPES):
                self._index(scope, scope.body, (), None)
                self.scopes.update((stmt, scope) for stmt in flows.own_statements(scope))

    def _index(self, owner: ast.AST, body: list[ast.stmt], path: tuple[Branch, ...], up) -> None:
        for stmt in body:
            self.paths[stmt] = path
            self.parents[stmt] = (owner, body)
            self.enclosing[stmt] = up
            if isinstance(stmt, flows.SCOPES):
                continue
            if isinstance(stmt, ast.If):
                self._index(stmt, stmt.body, (*path, (stmt, True)), stmt)
                self._index(stmt, stmt.orelse, (*path, (stmt, False)), stmt)
                continue
            for part in [stmt, *getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
                for name in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(part, name, None), list):
                        self._index(part, getattr(part, name), path, stmt)

    def header(self, node: ast.If) -> str:
        """``if test:`` (or ``elif test:``) as written."""
        return f"{'elif' if self.is_elif(node) else 'if'} {self.code(node.test)}:"

    def is_elif(self, node: ast.If) -> bool:
        return self.lines[node.lineno - 1][self.start(node)[1] :].startswith("elif")

    def code(self, node: ast.AST) -> str:
        """The source of ``node`` on one line; a long assertion without its message."""
        code = ast.get_source_segment(self.text, node) or ast.unparse(node)
        code = re.sub(r"\s*\\?\n\s*", " ", code).strip()
        if isinstance(node, ast.Assert) and node.msg is not None and len(code) > _LONG:
            return f"assert {self.code(node.test)}, ..."
        return code

    def start(self, node: ast.AST) -> tuple[int, int]:
        """Where ``node`` starts, as libcst's positions say it."""
        return node.lineno, self._column(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> tuple[int, int]:
        return node.end_lineno, self._column(node.end_lineno, node.end_col_offset)

    def _column(self, line: int, byte_offset: int) -> int:
        """ast counts columns in UTF-8 bytes, libcst in characters."""
        return len(self.lines[line - 1].encode("utf-8")[:byte_offset].decode("utf-8"))


def exits(stmt: ast.stmt) -> bool:
    """``sys.exit(...)``, ``exit()``, ``quit()``, ``os._exit(...)`` as a statement."""
    match stmt:
        case ast.Expr(value=ast.Call(func=ast.Attribute(value=ast.Name(id="sys" | "os"), attr=attr))):
            return attr in ("exit", "_exit")
        case ast.Expr(value=ast.Call(func=ast.Name(id="exit" | "quit"))):
            return True
    return False


def span(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first}-{last}"


def by_line(defs) -> list[Def]:
    return sorted(defs, key=lambda d: (d.node.lineno, d.node.col_offset, d.key))
