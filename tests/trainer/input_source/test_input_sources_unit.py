"""Input sources driven by hand in a real graph and session: values, order, ends, errors, cleanup."""

from __future__ import annotations

import numpy as np
import pytest

from support.input_driver import InputDriver
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.input_source import (
    DummyConstantInput,
    FeedfreeInput,
    FeedInput,
    PlaceholderInput,
    QueueInput,
    StagingInput,
    TensorInput,
    TFDatasetInput,
    remap_input_source,
)

SIG = [tf.TensorSpec([None, 2], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]


class ListFlow:
    """A minimal DataFlow: datapoint k is ([[k, -k]], [k]) for k in range(n)."""

    def __init__(self, n, fail_at=None):
        self.n = n
        self.fail_at = fail_at
        self.resets = 0

    def __len__(self):
        return self.n

    def reset_state(self):
        self.resets += 1

    def __iter__(self):
        for k in range(self.n):
            if k == self.fail_at:
                raise ValueError(f"bad datapoint {k}")
            yield [np.array([[k, -k]], np.float32), np.array([k], np.int32)]


def read_ys(driver, outs, steps):
    return [int(driver.hooked.run(outs)[0]) for _ in range(steps)]


def identity_y(x, y):
    return y


def test_placeholder_input_returns_the_same_placeholders():
    src = PlaceholderInput()
    d = InputDriver(src, SIG, towers=2)
    assert d.tensors[0] == d.tensors[1]
    assert [t.op.type for t in d.tensors[0]] == ["Placeholder", "Placeholder"]
    assert d.tensors[0][0].shape.as_list() == [None, 2]


def test_feed_input_feeds_in_order_and_repeats():
    ds = ListFlow(3)
    d = InputDriver(FeedInput(ds), SIG)
    (out,), init = d.build(identity_y)
    with d:
        d.sess.run(init)
        d.before_train()
        assert read_ys(d, out, 7) == [0, 1, 2, 0, 1, 2, 0]
    assert ds.resets == 1


def test_feed_input_finite_raises_out_of_range_and_restarts_on_reset():
    src = FeedInput(ListFlow(2), infinite=False)
    d = InputDriver(src, SIG)
    (out,), _init = d.build(identity_y)
    with d:
        d.before_train()
        assert read_ys(d, out, 2) == [0, 1]
        with pytest.raises(tf.errors.OutOfRangeError):
            d.hooked.run(out)
        src.reset_state()
        assert read_ys(d, out, 1) == [0]
    assert src.ds.resets == 1  # the DataFlow itself is reset only once
    assert src.size() == 2


def test_feed_input_accepts_dict_datapoints_and_names_bad_ones():
    class DictFlow(ListFlow):
        def __iter__(self):
            yield {"y": np.array([5], np.int32), "x": np.zeros((1, 2), np.float32)}
            yield {"x": np.zeros((1, 2), np.float32)}

    d = InputDriver(FeedInput(DictFlow(2)), SIG)
    (out,), _ = d.build(identity_y)
    with d:
        d.before_train()
        assert d.hooked.run(out).tolist() == [5]
        with pytest.raises(ValueError, match=r"lacks input\(s\) \['y'\]"):
            d.hooked.run(out)


def test_feed_input_wrong_shape_names_the_input():
    class BadFlow(ListFlow):
        def __iter__(self):
            yield [np.zeros((1, 3), np.float32), np.zeros(1, np.int32)]

    d = InputDriver(FeedInput(BadFlow(1)), SIG)
    (out,), _ = d.build(identity_y)
    with d:
        d.before_train()
        with pytest.raises(
            ValueError, match=r"input 'x' expects shape \[None, 2\], got an array of \[1, 3\]"
        ):
            d.hooked.run(out)


def test_feed_input_rejects_non_dataflow():
    with pytest.raises(TypeError, match="DataFlow"):
        FeedInput([1, 2, 3])


def test_queue_input_delivers_everything_in_order_to_two_towers_and_stops():
    ds = ListFlow(5)
    src = QueueInput(ds)
    d = InputDriver(src, SIG, towers=2)
    outs, _init = d.build(identity_y)
    assert d.tensors[0][0] is not d.tensors[1][0]  # each tower dequeues its own batch
    assert d.tensors[0][0].shape.as_list() == [None, 2]
    with d:
        d.before_train()
        pairs = [tuple(sorted(int(v[0]) for v in d.hooked.run(outs))) for _ in range(5)]
        # The two towers dequeue concurrently, so within a run their order is free.
        assert pairs == [(0, 1), (2, 3), (0, 4), (1, 2), (3, 4)]
        thread = src.thread
        assert thread.is_alive()
    # after_train closed the queue and the thread ended (it was blocked on a full queue).
    thread.join(5)
    assert not thread.is_alive()
    assert ds.resets == 1


def test_queue_input_reports_queue_size_to_monitors():
    src = QueueInput(ListFlow(4))
    d = InputDriver(src, SIG)
    (out,), _ = d.build(identity_y)
    with d:
        d.before_train()
        for _ in range(2 * src._callback.SIZE_EVERY):
            d.hooked.run(out)
        d.trigger_epoch()
    (size,) = d.trainer.monitors.scalars["QueueInput/queue_size"]
    assert 0 <= size <= 50


def test_queue_input_failing_dataflow_raises_a_clear_error():
    src = QueueInput(ListFlow(10, fail_at=3))
    d = InputDriver(src, SIG)
    (out,), _ = d.build(identity_y)
    with d:
        d.before_train()
        src.thread.join(5)
        assert isinstance(src.thread.error, ValueError)
        # Datapoints enqueued before the failure are still delivered, then the error surfaces.
        with pytest.raises(RuntimeError, match=r"input thread failed: ValueError.*bad datapoint 3"):
            for _ in range(4):
                d.hooked.run(out)


def test_staging_input_keeps_order_and_leaves_unrelated_runs_alone():
    inner = QueueInput(ListFlow(6))
    src = StagingInput(inner, nr_stage=2)
    d = InputDriver(src, SIG)
    with d.graph.as_default():
        other = tf.constant(7)
    (out,), _ = d.build(identity_y)
    assert any(t.op.type == "Unstage" for t in d.tensors[0])
    with d:
        d.before_train()
        assert d.hooked.run(other) == 7  # neither stages nor consumes
        assert read_ys(d, out, 8) == [0, 1, 2, 3, 4, 5, 0, 1]
    assert src.size() == 6


def test_staging_input_rejects_feed_input_and_nesting():
    with pytest.raises(TypeError, match="feed-free"):
        StagingInput(FeedInput(ListFlow(1)))
    with pytest.raises(TypeError, match="another StagingInput"):
        StagingInput(StagingInput(QueueInput(ListFlow(1))))


def test_tf_dataset_input_from_dataset_and_reset():
    xs = np.arange(8, dtype=np.float32).reshape(4, 1, 2)
    ys = np.arange(4, dtype=np.int32).reshape(4, 1)
    graph = tf.Graph()
    with graph.as_default():
        src = TFDatasetInput(tf.data.Dataset.from_tensor_slices((xs, ys)))
    d = InputDriver(src, SIG, graph=graph)
    (out,), _ = d.build(identity_y)
    with d:
        d.before_train()
        assert read_ys(d, out, 4) == [0, 1, 2, 3]
        with pytest.raises(tf.errors.OutOfRangeError):
            d.hooked.run(out)
        src.reset_state()
        assert read_ys(d, out, 1) == [0]


def test_tf_dataset_input_from_dataflow_repeats():
    ds = ListFlow(3)
    src = TFDatasetInput(ds)
    d = InputDriver(src, SIG)
    (out,), _ = d.build(identity_y)
    with d:
        d.before_train()
        assert read_ys(d, out, 5) == [0, 1, 2, 0, 1]
    assert ds.resets == 1
    assert src.size() == 3


def test_tf_dataset_input_checks_dtypes_against_signature():
    with (
        tf.Graph().as_default(),
        pytest.raises(ValueError, match="input 'x' is float32, the dataset has float64"),
    ):
        ds = tf.data.Dataset.from_tensor_slices((np.zeros((2, 1, 2), np.float64), np.zeros((2, 1), np.int32)))
        TFDatasetInput(ds).setup(SIG)


def test_dummy_constant_input_zeros_per_tower():
    src = DummyConstantInput([[3, 2], [3]])
    d = InputDriver(src, SIG, towers=2)
    outs, _ = d.build(lambda x, y: x)
    assert d.tensors[0][0] is not d.tensors[1][0]
    assert "dummy-x-0" in d.tensors[0][0].name and "dummy-x-1" in d.tensors[1][0].name
    with d:
        a, b = d.hooked.run(outs)
    assert a.shape == (3, 2) and not a.any() and b.shape == (3, 2)


def test_tensor_input_checks_count():
    with tf.Graph().as_default():
        src = TensorInput(lambda: [tf.zeros([1, 2])], size=4)
        src.setup(SIG)
        assert src.size() == 4
        with pytest.raises(ValueError, match="returned 1 tensor"):
            src.get_input_tensors()


def test_input_callbacks_are_not_chief_only_and_reset_first():
    src = QueueInput(ListFlow(2))
    with tf.Graph().as_default():
        cbs = src.setup(SIG)
    assert len(cbs) == 2 and all(not cb.chief_only for cb in cbs)
    assert src.get_callbacks() is cbs
    with tfv1.Session(graph=tf.Graph()):
        cbs[0].before_train()
    assert src.ds.resets == 1


def test_remap_input_source_provides_some_inputs_and_placeholders_for_the_rest():
    class XOnly(ListFlow):
        def __iter__(self):
            for k in range(self.n):
                yield [np.full((1, 2), k, np.float32)]

    src = remap_input_source(QueueInput(XOnly(3)), ["x"])
    assert isinstance(src, FeedfreeInput)
    d = InputDriver(src, SIG)
    _x, y = d.tensors[0]
    assert y.op.type == "Placeholder" and y.dtype == tf.int32
    (out,), _ = d.build(lambda x, y: x[:, 0] + tf.cast(y, tf.float32))
    with d:
        d.before_train()
        assert [float(d.hooked.run(out, {y: [10]})[0]) for _ in range(3)] == [10.0, 11.0, 12.0]
    with tf.Graph().as_default(), pytest.raises(ValueError, match=r"\['z'\] are not inputs"):
        remap_input_source(FeedInput(XOnly(1)), ["z"]).setup(SIG)
