"""remap_input_source: let an input source provide only some of a model's inputs."""

from __future__ import annotations

from ..callback import Callback
from ..compat import tfv1
from .base import FeedfreeInput, InputSource
from .utils import spec_name

__all__ = ["remap_input_source"]


class RemappedInput(InputSource):
    def __init__(self, input: InputSource, names):
        self._input = input
        self._names = list(names)

    def _setup(self, input_signature) -> None:
        by_name = {spec_name(s, i): s for i, s in enumerate(input_signature)}
        missing = [n for n in self._names if n not in by_name]
        if missing:
            raise ValueError(f"remap_input_source: {missing} are not inputs of the model ({list(by_name)})")
        self._all_names = list(by_name)
        self._input.setup([by_name[n] for n in self._names])
        self._placeholders = {
            n: tfv1.placeholder(s.dtype, s.shape, name=n) for n, s in by_name.items() if n not in self._names
        }

    def _get_input_tensors(self) -> list:
        given = dict(zip(self._names, self._input.get_input_tensors(), strict=True))
        return [given[n] if n in given else self._placeholders[n] for n in self._all_names]

    def _get_callbacks(self) -> list[Callback]:
        return self._input.get_callbacks()

    def _size(self) -> int:
        return self._input.size()

    def _reset_state(self) -> None:
        self._input.reset_state()

    def _raise_if_failed(self) -> None:
        self._input.raise_if_failed()

    def _measure_wait(self) -> None:
        self._input.measure_wait()  # the wrapped input times its own tensors

    def _wait_clock(self):
        return self._input.wait_clock()


class RemappedFeedfreeInput(RemappedInput, FeedfreeInput):
    pass


def remap_input_source(input: InputSource, names) -> InputSource:
    """An input source whose ``input`` produces only the model inputs named in ``names`` (in that
    order); the other inputs become placeholders, to be fed by hand or left unused.

    Example: a DataFlow yields ``[image]`` while the model's inputs are ``[image, label]``:
    ``remap_input_source(FeedInput(df), ["image"])``.
    """
    cls = RemappedFeedfreeInput if isinstance(input, FeedfreeInput) else RemappedInput
    return cls(input, names)
