"""DistributedInferenceRunner: every Horovod rank validates its shard; the chief reports the total."""

from __future__ import annotations

import json

import numpy as np

from .. import logger
from ..compat import tf, tfv1
from .inference_runner import InferenceRunner

__all__ = ["DistributedInferenceRunner"]


class DistributedInferenceRunner(InferenceRunner):
    """An InferenceRunner for ``HorovodTrainer`` that runs on every rank.

    Give each rank its own part of the validation data (e.g. ``ShardData`` of the dataflow
    package). Each rank evaluates its part; the inferencers' results are then combined across
    ranks, weighted by how many batches each rank evaluated (a rank with none counts for
    nothing), with one Horovod all-gather of the metric names, sums and counts. That is exact
    for ``ScalarStats`` (a mean over all batches) and for per-sample metrics such as
    ``ClassificationError`` when the batches have equal sizes. Only the chief's monitors write
    the result; every rank gets it in ``last_results``.
    """

    _chief_only = False

    def _setup_graph(self) -> None:
        hvd = self.trainer.hvd
        if hvd is None:
            raise TypeError(
                f"DistributedInferenceRunner needs a HorovodTrainer, not {type(self.trainer).__name__}"
            )
        super()._setup_graph()
        # Per rank: the lengths of the next two, its metric names (JSON) and [batches, sums...].
        self._local = [
            tfv1.placeholder(tf.int64, [1, 2], name="local_lengths"),
            tfv1.placeholder(tf.uint8, [None], name="local_names"),
            tfv1.placeholder(tf.float64, [None], name="local_sums"),
        ]
        self._gathered = [hvd.allgather(t, name=f"gather_{i}_inference") for i, t in enumerate(self._local)]
        self.last_results: dict = {}

    def _trigger(self) -> None:
        results, batches = self._run_inference()
        names = sorted(results) if batches else []
        encoded = np.frombuffer(json.dumps(names).encode(), np.uint8)
        sums = np.array([batches, *(results[k] * batches for k in names)], np.float64)
        lengths = np.array([[len(encoded), len(sums)]], np.int64)
        feed = dict(zip(self._local, (lengths, encoded, sums), strict=True))
        self.last_results = _combine(*self.trainer.sess.run(self._gathered, feed_dict=feed))
        if not self.last_results:
            logger.warning(
                "DistributedInferenceRunner: no rank evaluated any batch (the validation input is "
                "empty); no validation results this time"
            )
        for name, value in self.last_results.items():
            self.trainer.monitors.put_scalar(name, value)

    def __str__(self) -> str:
        return f"DistributedInferenceRunner({self._tower_name})"


def _combine(lengths: np.ndarray, names: np.ndarray, sums: np.ndarray) -> dict:
    """The batch-weighted means over the ranks that evaluated batches, from the gathered parts."""
    total_batches, total, metrics = 0.0, None, None
    name_start = sum_start = 0
    for n_names, n_sums in lengths:
        rank_names = json.loads(names[name_start : name_start + n_names].tobytes())
        rank_sums = sums[sum_start : sum_start + n_sums]
        name_start, sum_start = name_start + n_names, sum_start + n_sums
        if rank_sums[0] == 0:
            continue
        if metrics is None:
            metrics, total = rank_names, np.zeros(len(rank_names))
        elif rank_names != metrics:
            raise RuntimeError(
                f"ranks reported different validation metrics ({metrics} and {rank_names}); run the "
                "same inferencers everywhere"
            )
        total_batches += rank_sums[0]
        total += rank_sums[1:]
    if metrics is None:
        return {}
    return {k: float(v / total_batches) for k, v in zip(metrics, total, strict=True)}
