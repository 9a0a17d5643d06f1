import pytest
import tensorflow as tf

from towerpack.trainer.graph_builder.data_parallel import DataParallelBuilder

tfv1 = tf.compat.v1


def _tower():
    w = tfv1.get_variable("w", shape=[2], dtype=tf.float64, initializer=tfv1.zeros_initializer())
    return w, tf.identity(w, name="out")


def test_each_tower_gets_its_device_and_variable_scope():
    with tf.Graph().as_default():
        res = DataParallelBuilder.call_for_each_tower(
            [0, 1], _tower, devices=["/cpu:0", "/cpu:1"], use_vs=[True, True]
        )
        assert [w.op.name for w, _ in res] == ["tower0/w", "tower1/w"]
        assert [out.device.lower()[-5:] for _, out in res] == ["cpu:0", "cpu:1"]


def test_length_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="differ in length"):
        DataParallelBuilder.call_for_each_tower([0, 1], _tower, devices=["/cpu:0"])
