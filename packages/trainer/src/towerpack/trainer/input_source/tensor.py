"""TensorInput and DummyConstantInput: inputs produced by a function that builds tensors."""

from __future__ import annotations

from collections.abc import Callable

from ..compat import tf
from .base import FeedfreeInput
from .utils import spec_name

__all__ = ["DummyConstantInput", "TensorInput"]


class TensorInput(FeedfreeInput):
    """Input from ``get_tensor_fn()``, called once per tower; it must return new tensors each call.

    ``size`` is the number of steps in an epoch, when known.
    """

    def __init__(self, get_tensor_fn: Callable[[], list], size: int | None = None):
        if not callable(get_tensor_fn):
            raise TypeError(f"TensorInput takes a function returning tensors, not {get_tensor_fn!r}")
        if size is not None and int(size) <= 0:
            raise ValueError(f"size must be positive, got {size}")
        self.get_tensor_fn = get_tensor_fn
        self._fixed_size = None if size is None else int(size)

    def _size(self) -> int:
        if self._fixed_size is None:
            raise NotImplementedError("TensorInput was created without a size")
        return self._fixed_size

    def _get_input_tensors(self) -> list:
        with self.cached_name_scope():
            ret = self.get_tensor_fn()
        if isinstance(ret, tf.Tensor):
            ret = [ret]
        ret = list(ret)
        if len(ret) != len(self._input_signature):
            raise ValueError(
                f"TensorInput: the function returned {len(ret)} tensor(s), the input signature has "
                f"{len(self._input_signature)}"
            )
        return ret


class DummyConstantInput(TensorInput):
    """Zeros of fixed shapes, with no data loading at all: for measuring the model's own speed.

    ``shapes`` gives one fully defined shape per input; tensors are named ``dummy-<input>-<k>``
    for the k-th tower.
    """

    def __init__(self, shapes):
        self.shapes = [list(s) for s in shapes]
        self._calls = 0
        super().__init__(self._make)

    def _make(self) -> list:
        if len(self.shapes) != len(self._input_signature):
            raise ValueError(
                f"DummyConstantInput has {len(self.shapes)} shape(s) "
                f"for {len(self._input_signature)} input(s)"
            )
        out = []
        for i, (shape, spec) in enumerate(zip(self.shapes, self._input_signature, strict=True)):
            if not spec.shape.is_compatible_with(shape):
                name = spec_name(spec, i)
                raise ValueError(f"DummyConstantInput: shape {shape} does not fit input {name} {spec.shape}")
            out.append(tf.zeros(shape, dtype=spec.dtype, name=f"dummy-{spec_name(spec, i)}-{self._calls}"))
        self._calls += 1
        return out
