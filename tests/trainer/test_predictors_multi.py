"""Predictors beyond OfflinePredictor: several towers, an InputSource, threads, datasets and
worker processes; outputs checked against numpy."""

from __future__ import annotations

import logging
import os
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from support.procs import run_python
from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer import QueueInput
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.predict import (
    DataParallelOfflinePredictor,
    FeedfreePredictor,
    MultiProcessDatasetPredictor,
    MultiThreadAsyncPredictor,
    MultiTowerOfflinePredictor,
    OnlinePredictor,
    PredictConfig,
    SimpleDatasetPredictor,
)

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.RandomState(3)
WEIGHTS = {"W": RNG.normal(size=(8, 3)).astype(np.float32), "b": RNG.normal(size=3).astype(np.float32)}


def expected_prob(x):
    z = x @ WEIGHTS["W"] + WEIGHTS["b"]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def config(**kwargs):
    kwargs.setdefault("input_names", ["x", "label"])
    kwargs.setdefault("output_names", ["prob", "accuracy"])
    return PredictConfig(model=SoftmaxClassifier(), session_init=dict(WEIGHTS), **kwargs)


def test_multi_tower_predictor_one_predictor_per_tower_sharing_variables(caplog):
    x, label = blobs(20)
    pred = MultiTowerOfflinePredictor(config(), [0, 1])
    with pred.graph.as_default():
        assert sorted(v.op.name for v in tfv1.global_variables()) == ["W", "b"]
    towers = pred.get_predictors()
    assert [p.output_tensors[0].op.name for p in towers] == ["tower0/prob", "tower1/prob"]
    assert [p.output_tensors[0].device[-5:].lower() for p in towers] == ["cpu:0", "cpu:1"]
    assert towers[0].input_tensors == towers[1].input_tensors  # shared placeholders
    for p in (pred, *towers):
        prob, accuracy = p(x, label)
        np.testing.assert_allclose(prob, expected_prob(x), rtol=1e-5)
        assert accuracy == pytest.approx((prob.argmax(1) == label).mean())
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        assert pred.get_predictor(3) == [towers[0], towers[1], towers[0]]
    assert "round robin" in caplog.text
    pred.close()


def test_data_parallel_predictor_runs_every_tower_on_its_own_inputs():
    x, label = blobs(20)
    pred = DataParallelOfflinePredictor(config(), [0, 1])
    assert [t.op.name for t in pred.input_tensors] == ["tower0_x", "tower0_label", "tower1_x", "tower1_label"]
    prob0, acc0, prob1, acc1 = pred(x[:8], label[:8], x[8:], label[8:])
    np.testing.assert_allclose(prob0, expected_prob(x[:8]), rtol=1e-5)
    np.testing.assert_allclose(prob1, expected_prob(x[8:]), rtol=1e-5)
    assert (acc0, acc1) == pytest.approx(
        ((prob0.argmax(1) == label[:8]).mean(), (prob1.argmax(1) == label[8:]).mean())
    )
    pred.close()


def test_feedfree_predictor_reads_batches_from_a_queue_input():
    x, label = blobs(48)
    pred = FeedfreePredictor(config(), QueueInput(ArrayBatches(x, label, batch_size=16)))
    for k in range(3):  # one enqueue thread: the batches come in order
        prob, _ = pred()
        np.testing.assert_allclose(prob, expected_prob(x[16 * k : 16 * (k + 1)]), rtol=1e-5)
    pred.close()
    assert not [t for t in threading.enumerate() if "enqueue" in t.name and t.is_alive()]
    with pytest.raises(ValueError, match="return_input"):
        FeedfreePredictor(config(return_input=True), QueueInput(ArrayBatches(x, label, batch_size=16)))


class RecordingPredictor(OnlinePredictor):
    """Remembers the batch size of every call."""

    def __init__(self, other, sizes):
        super().__init__(other.input_tensors, other.output_tensors, sess=other.sess)
        self.sizes = sizes

    def _do_call(self, args):
        self.sizes.append(len(args[0]))
        return super()._do_call(args)


def test_multi_thread_async_predictor_batches_answers_and_survives_errors():
    x, label = blobs(20)
    offline = MultiTowerOfflinePredictor(config(output_names=["prob"]), [0, 1])
    sizes = []
    pool = MultiThreadAsyncPredictor([RecordingPredictor(offline, sizes)], batch_size=4)
    done = []
    futures = [pool.put_task([x[i], label[i]], callback=done.append) for i in range(10)]
    pool.start()  # all 10 queued before the thread starts: batches of 4, 4 and 2
    rows = np.stack([f.result(timeout=30)[0] for f in futures])
    np.testing.assert_allclose(rows, expected_prob(x[:10]), rtol=1e-5)
    assert sizes == [4, 4, 2] and len(done) == 10
    # A direct call waits for its answer (the reference's call failed).
    (prob,) = pool(x[11], label[11])
    np.testing.assert_allclose(prob, expected_prob(x[11:12])[0], rtol=1e-5)
    # A request the model cannot take fails its own future; the thread goes on.
    bad = pool.put_task([np.zeros(5, np.float32), label[0]])
    with pytest.raises(ValueError, match="Cannot feed value of shape"):
        bad.result(timeout=30)
    assert pool.put_task([x[12], label[12]]).result(timeout=30)[0].shape == (3,)
    pool.stop()
    assert not any(t.is_alive() for t in pool.threads)
    with pytest.raises(RuntimeError, match="stopped"):
        pool.put_task([x[0], label[0]])
    with pytest.raises(ValueError, match="return_input=False"):
        MultiThreadAsyncPredictor([OnlinePredictor([], [], return_input=True)])
    offline.close()


def test_simple_dataset_predictor():
    x, label = blobs(48)
    results = SimpleDatasetPredictor(config(), ArrayBatches(x, label, batch_size=16)).get_all_result()
    assert len(results) == 3
    np.testing.assert_allclose(np.concatenate([r[0] for r in results]), expected_prob(x), rtol=1e-5)


# Worker processes are spawned, and spawning starts multiprocessing's resource tracker, which
# lives as long as the process that spawned: the scenario runs in a fresh interpreter.
MULTIPROCESS_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from towerpack.trainer.predict import MultiProcessDatasetPredictor
    from test_predictors_multi import Batches, config

    if __name__ == "__main__":
        # Batches of 20000 rows: tasks and results larger than a pipe's buffer.
        data = Batches(n=5, rows=20000)
        results = MultiProcessDatasetPredictor(config(), data, nr_proc=2, use_gpu=False).get_all_result()
        np.savez(sys.argv[1], prob=np.concatenate([r[0] for r in results]), x=data.x, count=len(results))
        failing = MultiProcessDatasetPredictor(config(), Batches(bad=True), nr_proc=1, use_gpu=False)
        try:
            failing.get_all_result()
        except RuntimeError as e:
            print("FAILED:", e)
    """
)


class Batches:
    """A DataFlow of ``[x, label]`` batches; batch 2 lacks its labels when ``bad``."""

    def __init__(self, n=7, bad=False, rows=8):
        self.x, self.label = blobs(rows * n)
        self.n, self.bad, self.rows = n, bad, rows

    def reset_state(self):
        pass

    def __len__(self):
        return self.n

    def __iter__(self):
        for k in range(self.n):
            sl = slice(self.rows * k, self.rows * (k + 1))
            yield [self.x[sl]] if self.bad and k == 2 else [self.x[sl], self.label[sl]]


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
def test_multi_process_dataset_predictor_in_order_and_a_failing_worker(tmp_path):
    tests = Path(__file__).resolve().parents[1]
    env = {
        "PYTHONPATH": os.pathsep.join([str(tests), str(tests / "trainer"), os.environ.get("PYTHONPATH", "")])
    }
    out = run_python(MULTIPROCESS_SCRIPT, str(tmp_path / "out.npz"), timeout=200, env=env).stdout
    with np.load(tmp_path / "out.npz") as f:
        assert f["count"] == 5
        np.testing.assert_allclose(f["prob"], expected_prob(f["x"]), rtol=1e-5)
    assert "FAILED: a MultiProcessDatasetPredictor worker failed: MultiProcessPredictWorker-0:" in out
    assert "predictor takes 2 inputs" in out


def test_multi_process_dataset_predictor_checks_its_arguments(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match="needs 2 GPUs, 0 visible"):
        MultiProcessDatasetPredictor(config(), Batches(), nr_proc=2)
    with pytest.raises(TypeError, match="picklable"):
        MultiProcessDatasetPredictor(
            PredictConfig(
                tower_func=lambda x: tf.identity(x, name="y"),
                input_signature=[tf.TensorSpec([None], tf.float32, "x")],
                output_names=["y"],
            ),
            Batches(),
            nr_proc=1,
            use_gpu=False,
        )
