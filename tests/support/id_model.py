"""A model whose only input is item ids: it names them ``trained_ids`` (tests fetch what each step trained on)
and trains one weight, for the exact-position and resize tests."""

from __future__ import annotations

from towerpack.trainer import ModelDesc
from towerpack.trainer.compat import tf, tfv1

__all__ = ["IdModel"]


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
