"""VariableHolder: the variables of a layer, attached to its output as ``output.variables``."""

from __future__ import annotations

__all__ = ["VariableHolder"]


class VariableHolder:
    """Variables by short name: ``conv.variables.W``; ``all()`` lists them."""

    def __init__(self, **variables):
        self._vars = {}
        for name, v in variables.items():
            self._add(name, v)

    def _add(self, name: str, v) -> None:
        if name in self._vars:
            raise ValueError(f"VariableHolder has a variable named {name!r} already")
        self._vars[name] = v
        setattr(self, name, v)

    def all(self) -> list:
        return list(self._vars.values())
