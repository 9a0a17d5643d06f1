"""The arguments of the built-in layers: old names, positionals, data formats.

The reference's layers accept the names of older releases (``out_channel``, ``kernel_shape``,
``nl``, ``W_init`` ...) and both spellings of the data format; scripts written against any
release keep working. ``layer_args`` records, for one layer, which positional arguments it takes
and which old names map to which new ones; ``layer_register`` applies them in one place.
"""

from __future__ import annotations

import dataclasses

__all__ = ["LayerArgs", "data_format_is_nchw", "layer_args", "normalize_data_format"]

# Old names every layer with ``layer_args`` understands.
_COMMON_ALIASES = {"nl": "activation", "W_init": "kernel_initializer", "b_init": "bias_initializer"}

_DATA_FORMATS = {
    "NHWC": "channels_last",
    "channels_last": "channels_last",
    "NCHW": "channels_first",
    "channels_first": "channels_first",
}


def normalize_data_format(data_format: str) -> str:
    """``'channels_last'`` or ``'channels_first'`` for any of NHWC, NCHW and those two."""
    try:
        return _DATA_FORMATS[data_format]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown data_format {data_format!r}; use 'channels_last' (NHWC) or 'channels_first' (NCHW)"
        ) from None


def data_format_is_nchw(data_format: str) -> bool:
    return normalize_data_format(data_format) == "channels_first"


def _wrap_nl(f):
    # The old ``nl`` took a name argument; the layers call ``activation(x)``.
    return lambda x, name=None: f(x, name=name)


@dataclasses.dataclass(frozen=True)
class LayerArgs:
    """How a layer's call maps to its keyword arguments."""

    positional: tuple[str, ...]
    aliases: dict

    @staticmethod
    def of(func) -> LayerArgs | None:
        return getattr(func, "_layer_args", None)

    def translate(self, layer: str, kwargs: dict) -> dict:
        """Old argument names to new ones (both given: an error)."""
        out = {}
        for key, value in kwargs.items():
            new = self.aliases.get(key, key)
            if new != key:
                if new in kwargs:
                    raise TypeError(f"{layer}() got both {key!r} and its newer name {new!r}")
                if key == "nl":
                    value = _wrap_nl(value)
            out[new] = value
        return out

    def merge(self, layer: str, positionals: tuple, scope_kwargs: dict, kwargs: dict) -> dict:
        """argscope defaults < keyword arguments < positional arguments, all by their new names."""
        if len(positionals) > len(self.positional):
            allowed = ", ".join(self.positional) or "none"
            raise TypeError(
                f"{layer}() takes {len(self.positional)} positional argument(s) after the input "
                f"({allowed}); pass the others by keyword"
            )
        explicit = self.translate(layer, kwargs)
        merged = {**self.translate(layer, scope_kwargs), **explicit}
        for key, value in zip(self.positional, positionals, strict=False):
            if key in explicit:
                raise TypeError(f"{layer}() got multiple values for argument {key!r}")
            merged[key] = value
        return merged


def layer_args(positional=(), aliases=None):
    """Record a layer's positional arguments (after the input) and its old argument names."""

    def decorator(func):
        func._layer_args = LayerArgs(tuple(positional), {**_COMMON_ALIASES, **(aliases or {})})
        return func

    return decorator
