#!/usr/bin/env python
# A script of the 0.9 era, built from slim layers.
import argparse

import numpy as np
import tensorflow as tf
from tensorpack import *
from tensorpack.dataflow import DataFlow, BatchData

slim = tf.contrib.slim


class Bands(DataFlow):
    def __init__(self, size):
        self._size = size

    def __len__(self):
        return self._size

    def __iter__(self):
        rng = np.random.RandomState(0)
        for _ in range(self._size):
            label = rng.randint(4)
            img = rng.uniform(0, 0.3, (8, 8, 1)).astype(np.float32)
            img[label * 2:label * 2 + 2] += 0.7
            yield [img, label]


class Model(ModelDesc):
    def inputs(self):
        return [tf.placeholder(tf.float32, (None, 8, 8, 1), 'input'),
                tf.placeholder(tf.int32, (None,), 'label')]

    def build_graph(self, image, label):
        with slim.arg_scope([slim.conv2d, slim.fully_connected],
                            weights_initializer=tf.contrib.layers.xavier_initializer(),
                            weights_regularizer=slim.l2_regularizer(1e-4)):
            net = slim.conv2d(image, 8, [3, 3], scope='conv1')
            net = slim.flatten(net)
            logits = slim.fully_connected(net, 4, activation_fn=None, scope='fc')
        scale = tf.get_variable('scale', [], initializer=tf.ones_initializer(), trainable=False)
        tf.contrib.framework.add_model_variable(scale)
        logits = tf.multiply(logits, scale, name='logits')
        cost = tf.losses.sparse_softmax_cross_entropy(label, logits)
        reg = tf.add_n(slim.losses.get_regularization_losses(), name='regularize_loss')
        total = tf.add(cost, reg, name='total_cost')
        add_moving_summary(cost, total)
        assert len(tf.contrib.framework.get_model_variables()) == 5
        return total

    def optimizer(self):
        return tf.train.AdamOptimizer(1e-2)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--logdir', required=True)
    args = parser.parse_args()
    logger.set_logger_dir(args.logdir, action='d')
    config = TrainConfig(
        model=Model(),
        data=QueueInput(BatchData(Bands(160), 16)),
        callbacks=[ModelSaver()],
        max_epoch=3,
    )
    launch_train_with_config(config, SimpleTrainer())
