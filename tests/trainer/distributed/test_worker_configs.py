"""Which GPU a one-device-per-process trainer pins, and the configs of a TF-server worker."""

from __future__ import annotations

import json

import pytest

from towerpack.trainer import DistributedTrainerReplicated
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.devices import local_gpu_index, with_visible_gpu
from towerpack.trainer.tf_server_trainer import worker_configs

SPEC = {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:3"]}


@pytest.mark.parametrize(
    ("gpus", "local_rank", "expected"),
    [(0, 1, None), (1, None, 0), (1, 3, 0), (4, None, None), (4, 2, 2), (2, 3, 1)],
)
def test_local_gpu_index(gpus, local_rank, expected):
    assert local_gpu_index(gpus, local_rank) == expected


def test_with_visible_gpu_copies_and_keeps_a_list_the_user_set():
    config = tfv1.ConfigProto(allow_soft_placement=True)
    pinned = with_visible_gpu(config, 2)
    assert pinned.gpu_options.visible_device_list == "2" and pinned.allow_soft_placement
    assert config == tfv1.ConfigProto(allow_soft_placement=True)
    config.gpu_options.visible_device_list = "1"
    assert with_visible_gpu(config, 2).gpu_options.visible_device_list == "1"
    assert with_visible_gpu(None, None).gpu_options.allow_growth  # the default session config


@pytest.fixture
def worker1(monkeypatch):
    """Environment of worker 1 of a TF-server job; ``gpus(n)`` makes n GPUs look visible."""
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": SPEC, "task": {"type": "worker", "index": 1}}))
    monkeypatch.setenv("GRPC_FAIL_FAST", "true")  # the trainer sets it in its process
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK"):
        monkeypatch.delenv(var, raising=False)
    real = tf.config.list_physical_devices

    def gpus(n):
        fake = [tf.config.PhysicalDevice(f"/physical_device:GPU:{k}", "GPU") for k in range(n)]
        monkeypatch.setattr(
            tf.config, "list_physical_devices", lambda kind=None: fake if kind == "GPU" else real(kind)
        )

    return gpus


def launched(monkeypatch, local_rank: str) -> None:
    """What ``launch`` sets beside TF_CONFIG for worker 1 of two on one node."""
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": local_rank, "LOCAL_WORLD_SIZE": "2"}
    for var, value in env.items():
        monkeypatch.setenv(var, value)


@pytest.mark.parametrize(
    ("num_gpus", "local_rank", "pinned"), [(4, "1", "1"), (4, "0", "0"), (2, "1", "1"), (1, "1", "0")]
)
def test_tf_server_worker_pins_the_gpu_of_its_local_rank(worker1, monkeypatch, num_gpus, local_rank, pinned):
    worker1(num_gpus)
    launched(monkeypatch, local_rank)
    trainer = DistributedTrainerReplicated(1)
    assert trainer.device == "/job:worker/task:1/device:GPU:0"  # the pinned GPU is the process's GPU:0
    user = tfv1.ConfigProto(allow_soft_placement=True)
    session, server = worker_configs(trainer.task, user, trainer.gpu_index)
    # The server's config creates the devices; the session's says the same.
    assert server.gpu_options.visible_device_list == session.gpu_options.visible_device_list == pinned
    assert list(session.device_filters) == ["/job:ps", "/job:worker/task:1"]
    assert session.allow_soft_placement
    assert user == tfv1.ConfigProto(allow_soft_placement=True)


def test_tf_server_worker_pins_nothing_without_gpus(worker1, monkeypatch):
    worker1(0)
    launched(monkeypatch, "1")
    trainer = DistributedTrainerReplicated(1)
    assert trainer.gpu_index is None
    session, server = worker_configs(trainer.task, None, trainer.gpu_index)
    assert session.gpu_options.visible_device_list == server.gpu_options.visible_device_list == ""
    assert session.gpu_options.allow_growth and server.gpu_options.allow_growth


def test_tf_server_worker_with_tf_config_alone_is_local_rank_0(worker1):
    """TF_CONFIG without the launcher's rank variables: one worker on its node, GPU 0 pinned."""
    worker1(4)
    trainer = DistributedTrainerReplicated(1)
    assert trainer.gpu_index == 0 and not trainer.is_chief


def test_bad_worker_timeout_and_local_rank_are_named(worker1, monkeypatch):
    worker1(0)
    with pytest.raises(ValueError, match="worker_timeout must be positive"):
        DistributedTrainerReplicated(1, worker_timeout=0)
    launched(monkeypatch, "first")
    worker1(2)
    with pytest.raises(ValueError, match="LOCAL_RANK='first' is not an integer"):
        DistributedTrainerReplicated(1)
