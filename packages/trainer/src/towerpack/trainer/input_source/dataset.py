"""TFDatasetInput: read the inputs from a tf.data.Dataset (or a DataFlow turned into one)."""

from __future__ import annotations

from ..compat import tf, tfv1
from .base import FeedfreeInput, dataflow_size
from .utils import DatapointChecker, spec_name

__all__ = ["TFDatasetInput", "dataflow_to_dataset"]


def dataflow_to_dataset(df, types, input_signature=None) -> tf.data.Dataset:
    """A ``tf.data.Dataset`` yielding the datapoints of a DataFlow (one pass per iteration).

    ``types`` are the components' dtypes. The DataFlow must already be reset; datapoints are
    checked against ``input_signature`` when it is given. The Python generator runs inside the
    TF runtime, so this is as fast as FeedInput, not faster: prefer it for its composability.
    """
    types = tuple(tf.as_dtype(t) for t in types)

    check = DatapointChecker(input_signature, "dataflow_to_dataset") if input_signature is not None else list

    def gen():
        for dp in df:
            yield tuple(check(dp))

    if input_signature is not None:
        shapes = [s.shape for s in input_signature]
    else:
        shapes = [tf.TensorShape(None)] * len(types)
    signature = tuple(tf.TensorSpec(shape, dtype) for shape, dtype in zip(shapes, types, strict=True))
    return tf.data.Dataset.from_generator(gen, output_signature=signature)


class TFDatasetInput(FeedfreeInput):
    """Input from a ``tf.data.Dataset`` whose elements are tuples in input-signature order.

    A DataFlow is accepted too: it is wrapped with :func:`dataflow_to_dataset` and repeated
    forever. ``reset_state`` (re)initializes the iterator, so an inference pass starts from the
    beginning. Each ``get_input_tensors`` call makes a new ``get_next``, one batch per tower.
    """

    def __init__(self, dataset):
        if isinstance(dataset, tf.data.Dataset):
            self._dataset = dataset
            self._dataflow = None
        elif hasattr(dataset, "__iter__") and hasattr(dataset, "reset_state"):
            self._dataset = None
            self._dataflow = dataset
        else:
            raise TypeError(f"TFDatasetInput takes a tf.data.Dataset or DataFlow, not {dataset!r}")
        self._dataflow_was_reset = False

    def _size(self) -> int:
        what = "TFDatasetInput over a tf.data.Dataset (or over a DataFlow that)"
        return dataflow_size(self._dataflow, what)

    def _setup(self, input_signature) -> None:
        if self._dataflow is not None:
            types = [s.dtype for s in input_signature]
            self._dataset = dataflow_to_dataset(self._dataflow, types, input_signature).repeat()
        self._check_against(input_signature)
        self._iterator = tfv1.data.make_initializable_iterator(self._dataset)

    def _check_against(self, input_signature) -> None:
        spec = self._dataset.element_spec
        if not isinstance(spec, (tuple, list)):
            spec = (spec,)
        if len(spec) != len(input_signature):
            raise ValueError(
                f"TFDatasetInput: dataset elements have {len(spec)} component(s), "
                f"the input signature has {len(input_signature)}"
            )
        for i, (have, want) in enumerate(zip(spec, input_signature, strict=True)):
            name = spec_name(want, i)
            if have.dtype != want.dtype:
                raise ValueError(
                    f"TFDatasetInput: input '{name}' is {want.dtype.name}, the dataset has {have.dtype.name}"
                )
            if not have.shape.is_compatible_with(want.shape):
                raise ValueError(
                    f"TFDatasetInput: input '{name}' has shape {want.shape}, the dataset gives {have.shape}"
                )

    def _get_input_tensors(self) -> list:
        ret = self._iterator.get_next()
        if isinstance(ret, tf.Tensor):
            ret = [ret]
        ret = list(ret)
        for t, spec in zip(ret, self._input_signature, strict=True):
            t.set_shape(spec.shape)
        return ret

    def _reset_state(self) -> None:
        if self._dataflow is not None and not self._dataflow_was_reset:
            self._dataflow.reset_state()
            self._dataflow_was_reset = True
        sess = tfv1.get_default_session()
        if sess is None:
            raise RuntimeError("TFDatasetInput.reset_state() needs a default session)")
        sess.run(self._iterator.initializer)
