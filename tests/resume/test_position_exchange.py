"""The position exchange of exact resume across real ranks (`launch`, Horovod and TensorFlow's collectives):
what a rank contributes per step is the same fixed-size row at 2 and at 4 ranks, and the gathered rows
tell every rank exactly what all ranks trained on in that step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.launcher_run import launch

pytestmark = [pytest.mark.multiprocess]

BATCH = 64  # items per rank and step: capacity max(64, 2 x 64) = 128, rows of 129
N_ITEMS = 4 * BATCH * 2  # two steps an epoch at 4 ranks
ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}

# Items in their stored order (position = id), read in each rank's consecutive part of the epoch; every
# step records what this rank trained on and the rows the exchange gathered (fetched with the step).
RANK_SCRIPT = """
import json, os, sys
from pathlib import Path
import numpy as np
from towerpack.dataflow import BatchData
from towerpack.dataflow.dataset.base import ArrayDataset
from towerpack.dataflow.resume.keys import split_keys
from towerpack.dataflow.resume.tags import unpack_keys
from towerpack.trainer import Callback, ModelDesc, TrainConfig, launch_train_with_config
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.default_trainer import default_trainer

out, n_items, batch = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
GATHERS = ("HorovodAllgather", "CollectiveGatherV2")

class Items(ArrayDataset):
    _columns = ("ids",)
    def __init__(self):
        self.ids = np.arange(n_items, dtype=np.int64)
        self._init_order(False, training=True)
    def _get(self, index):
        return [self.ids[index], np.int64(self._epoch)]

class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None], tf.int64, "ids"), tf.TensorSpec([None], tf.int64, "epochs")]
    def build_graph(self, ids, epochs):
        tf.identity(ids, name="trained_ids"); tf.identity(epochs, name="trained_epochs")
        w = tfv1.get_variable("w", [], initializer=tfv1.zeros_initializer())
        return tf.reduce_mean(tf.square(w * tf.cast(ids, tf.float32) - 1.0), name="cost")
    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(1e-6)

class Watch(Callback):
    _chief_only = False
    def _setup_graph(self):
        (op,) = [op for op in self.graph.get_operations() if op.type in GATHERS]
        self.shapes = {"input": op.inputs[0].shape.as_list(), "dtype": op.inputs[0].dtype.name}
        names = ("trained_ids:0", "trained_epochs:0")
        self._args = tfv1.train.SessionRunArgs([op.outputs[0], *map(self.graph.get_tensor_by_name, names)])
        self.steps = []
    def _before_run(self, ctx):
        return self._args
    def _after_run(self, ctx, values):
        rows, ids, epochs = values.results
        e, p = split_keys(unpack_keys(rows))
        self.steps.append({"rows": list(rows.shape), "dtype": rows.dtype.name, "entries": rows[:, 0].tolist(),
                           "gathered": sorted(zip(e.tolist(), p.tolist())),
                           "mine": sorted(zip(epochs.tolist(), ids.tolist()))})
    def _after_train(self):
        keeper = self.trainer.position_keeper
        record = {**self.shapes, "steps": self.steps, "position": keeper.ledger.position().to_json()}
        (out / f"rank{self.trainer.rank}.json").write_text(json.dumps(record))

trainer = default_trainer()
world = int(os.environ["WORLD_SIZE"])
config = TrainConfig(model=Model(), dataflow=BatchData(Items(), batch), callbacks=[Watch()], monitors=[],
                     steps_per_epoch=n_items // (batch * world), max_epoch=2, exact_resume=True)
launch_train_with_config(config, trainer)
"""


def run_ranks(tmp_path: Path, ranks: int, backend: str) -> list[dict]:
    """What every rank recorded in a job of ``ranks`` ranks."""
    out = tmp_path / f"{backend}-{ranks}"
    out.mkdir()
    script = tmp_path / "exchange_rank.py"
    script.write_text(RANK_SCRIPT)
    argv = ["--np", str(ranks), "--backend", backend, str(script)]
    proc = launch(*argv, str(out), str(N_ITEMS), str(BATCH), env=ENV, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(ranks)]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", ["horovod", "tf-collective"])
def test_a_rank_sends_the_same_row_at_2_and_4_ranks_and_every_rank_learns_every_step(
    tmp_path, backend, horovod_required
):
    inputs = {}
    for ranks in (2, 4):
        records = run_ranks(tmp_path, ranks, backend)
        inputs[ranks] = {(tuple(r["input"]), r["dtype"]) for r in records}
        steps = 2 * N_ITEMS // (BATCH * ranks)
        for record in records:
            assert len(record["steps"]) == steps
        for s in range(steps):
            trained = sorted(pair for record in records for pair in record["steps"][s]["mine"])
            assert len(trained) == ranks * BATCH
            for record in records:
                step = record["steps"][s]
                assert (step["rows"], step["dtype"]) == ([ranks, 129], "int64")
                # Every rank gets exactly what all ranks trained on in this step; a rank's batch of
                # consecutive positions takes one run: 2 entries of its row.
                assert step["gathered"] == trained
                assert step["entries"] == [2] * ranks
        # After two whole epochs every rank's ledger (the chief's records it) starts the third.
        for record in records:
            assert json.loads(record["position"]) == {"epoch": 3, "size": N_ITEMS, "consumed": []}
    assert inputs == {2: {((1, 129), "int64")}, 4: {((1, 129), "int64")}}
