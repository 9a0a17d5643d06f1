"""A model whose only input is item ids: it names them ``trained_ids`` and trains one weight; and the
callback that fetches what each step trained on. For the exact-position and resize tests."""

from __future__ import annotations

from towerpack.trainer import Callback, ModelDesc
from towerpack.trainer.compat import tf, tfv1

__all__ = ["IdModel", "TrainedIds"]


class IdModel(ModelDesc):
    """Ids 0..n_items-1 in; one weight learns from them."""

    def __init__(self, n_items: int):
        self.n_items = n_items

    def inputs(self):
        return [tf.TensorSpec([None], tf.int64, "ids")]

    def build_graph(self, ids):
        tf.identity(ids, name="trained_ids")
        w = tfv1.get_variable("w", [], initializer=tfv1.zeros_initializer())
        return tf.reduce_mean(tf.square(w * tf.cast(ids, tf.float32) / self.n_items - 1.0), name="cost")

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.01)


class TrainedIds(Callback):
    """Fetches ``trained_ids`` with every step; ``_ids`` holds the last step's, for ``_trigger_step``."""

    _chief_only = False
    _ids: list[int] | None = None

    def _setup_graph(self):
        self._args = tfv1.train.SessionRunArgs(fetches=self.graph.get_tensor_by_name("trained_ids:0"))

    def _before_run(self, ctx):
        return self._args

    def _after_run(self, run_context, run_values):
        self._ids = run_values.results.tolist()
