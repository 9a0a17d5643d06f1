"""The hooked session's fast path gives hooks what a MonitoredSession gives them, run after run."""

from __future__ import annotations

import numpy as np
import pytest

from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.hooked_session import HookedRuns, HookedSession, make_session_callable

pytestmark = pytest.mark.usefixtures("graph")


class Recorder(tfv1.train.SessionRunHook):
    """Returns ``self.fetches`` (changeable between runs) and records what came back."""

    def __init__(self, fetches=None, feed_dict=None, options=None):
        self.fetches, self.feed_dict, self.options = fetches, feed_dict, options
        self.results = []
        self.run_options = []

    def before_run(self, run_context):
        return tfv1.train.SessionRunArgs(self.fetches, feed_dict=self.feed_dict, options=self.options)

    def after_run(self, run_context, run_values):
        self.results.append(run_values.results)
        self.run_options.append(run_values.options)


def counter_graph():
    x = tfv1.placeholder(tf.float32, [], name="x")
    v = tfv1.get_variable("v", [], initializer=tfv1.zeros_initializer())
    return x, tfv1.assign_add(v, 1.0, name="incr")


def test_results_follow_a_fetch_list_changed_in_place():
    x, incr = counter_graph()
    doubled, tripled = tf.multiply(x, 2.0), tf.multiply(x, 3.0)
    fetches = [doubled]
    hook = Recorder(fetches=fetches, feed_dict={x: 3.0})
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        runs = HookedRuns(sess, [hook])
        assert runs.run(incr) == 1.0
        fetches.append(tripled)  # the same list object, now with two tensors
        assert runs.run(incr) == 2.0
    assert hook.results == [[6.0], [6.0, 9.0]]


def test_a_hook_with_run_options_takes_the_general_path():
    x, incr = counter_graph()
    hook = Recorder(fetches=tf.multiply(x, 2.0), feed_dict={x: 1.0})
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        runs = HookedRuns(sess, [hook])
        runs.run(incr)  # compiled and cached for these fetches
        hook.options = tfv1.RunOptions(timeout_in_ms=60_000)
        runs.run(incr)
    assert hook.run_options[0] is None  # the fast path has no run options
    assert hook.run_options[1].timeout_in_ms == 60_000
    assert hook.results == [2.0, 2.0]


def test_after_run_is_skipped_only_for_hooks_that_say_so():
    x, incr = counter_graph()
    quiet, loud = Recorder(feed_dict={x: 0.0}), Recorder()
    quiet.needs_after_run = False
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        runs = HookedRuns(sess, [quiet, loud])
        for _ in range(3):
            runs.run(incr)
    assert quiet.results == [] and loud.results == [None, None, None]


def test_a_tensor_fed_twice_is_an_error_and_a_stop_request_ends_runs():
    x, incr = counter_graph()

    class Stopper(tfv1.train.SessionRunHook):
        def after_run(self, run_context, run_values):
            run_context.request_stop()

    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        twice = HookedRuns(sess, [Recorder(feed_dict={x: 1.0}), Recorder(feed_dict={"x:0": 2.0})])
        with pytest.raises(RuntimeError, match="fed by more than one"):
            twice.run(incr, feed_dict={x: 0.0})
        hooked = HookedSession(sess, [Stopper()])
        assert not hooked.should_stop()
        hooked.run(incr)
        assert hooked.should_stop()
        with pytest.raises(RuntimeError, match="should_stop"):
            hooked.run(incr)


def test_make_session_callable_feeds_positionally():
    a = tfv1.placeholder(tf.float32, [None], name="a")
    b = tfv1.placeholder(tf.int32, [], name="b")
    out = tf.reduce_sum(a) * tf.cast(b, tf.float32)
    with tfv1.Session() as sess:
        fn = make_session_callable(sess, feeds=[a, "b:0"], fetches=[out])
        (value,) = fn(np.array([1.0, 2.0], np.float32), np.array(3, np.int32))
    assert value == 9.0
