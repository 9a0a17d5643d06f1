"""Drive an InputSource and its callbacks by hand, with a real tf.compat.v1 graph and session.

This is what a trainer does around an InputSource, in a few lines, so that input sources can
be tested without the training loop: ``setup`` -> tensors -> callbacks' ``setup_graph`` ->
session -> ``before_train`` -> hooked runs -> ``after_train``.
"""

from __future__ import annotations

import types

from towerpack.trainer.compat import tf, tfv1


class _Hook(tfv1.train.SessionRunHook):
    def __init__(self, cb):
        self.cb = cb

    def before_run(self, run_context):
        return self.cb.before_run(run_context)

    def after_run(self, run_context, run_values):
        self.cb.after_run(run_context, run_values)


class _Reuse(tfv1.train.SessionCreator):
    def __init__(self, sess):
        self.sess = sess

    def create_session(self):
        return self.sess


class _Monitors:
    def __init__(self):
        self.scalars: dict[str, list[float]] = {}

    def put_scalar(self, name, value):
        self.scalars.setdefault(name, []).append(float(value))

    def get_latest(self, name):
        return self.scalars[name][-1]


class InputDriver:
    """Owns a graph; ``build(fn)`` calls ``fn(*input_tensors)`` once per tower and returns the outputs."""

    def __init__(self, source, signature, towers: int = 1, graph=None):
        self.graph = graph or tf.Graph()
        self.source = source
        self.trainer = types.SimpleNamespace(monitors=_Monitors(), sess=None, epoch_num=0, global_step=0)
        with self.graph.as_default():
            self.callbacks = source.setup(signature)
            self.tensors = [source.get_input_tensors() for _ in range(towers)]

    def build(self, fn):
        with self.graph.as_default():
            outs = [fn(*ts) for ts in self.tensors]
            for cb in self.callbacks:
                cb.setup_graph(self.trainer)
            init = tfv1.global_variables_initializer()
        return outs, init

    def __enter__(self):
        self.sess = tfv1.Session(graph=self.graph)
        self.trainer.sess = self.sess
        self._default = self.sess.as_default()
        self._default.__enter__()
        self.hooked = tfv1.train.MonitoredSession(
            session_creator=_Reuse(self.sess), hooks=[_Hook(cb) for cb in self.callbacks]
        )
        return self

    def before_train(self):
        for cb in self.callbacks:
            cb.before_train()

    def trigger_epoch(self):
        for cb in self.callbacks:
            cb.trigger_epoch()

    def __exit__(self, *exc):
        try:
            for cb in self.callbacks:
                cb.after_train()
        finally:
            self._default.__exit__(None, None, None)
            self.sess.close()
        return False
