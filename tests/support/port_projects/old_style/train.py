#!/usr/bin/env python
# A script of the 0.8 era: the model API before 0.11.
import argparse

import numpy as np
import tensorflow as tf
from tensorpack import *
from tensorpack.tfutils.symbolic_functions import *
from tensorpack.tfutils.summary import *

from data import Bands, Twice


class Model(ModelDesc):
    def _get_inputs(self):
        return [InputDesc(tf.float32, (None, 8, 8), 'input'),
                InputDesc(tf.int32, (None,), 'label')]

    def _build_graph(self, inputs):
        image, label = inputs
        image = tf.reshape(image, [-1, 64])
        init = tf.contrib.layers.variance_scaling_initializer()
        reg = tf.contrib.layers.l2_regularizer(1e-4)
        w = tf.get_variable('fc/W', [64, 4], initializer=init, regularizer=reg)
        b = tf.get_variable('fc/b', [4], initializer=tf.zeros_initializer())
        logits = tf.nn.bias_add(tf.matmul(image, w), b, name='logits')
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label),
                              name='cross_entropy_loss')
        wrong = prediction_incorrect(logits, label, name='incorrect')
        train_error = tf.reduce_mean(wrong, name='train_error')
        reg_cost = tf.add_n(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES), name='regularize_loss')
        self.cost = tf.add(cost, reg_cost, name='total_cost')
        add_moving_summary(cost, train_error, self.cost)

    def _get_optimizer(self):
        lr = get_scalar_var('learning_rate', 0.05, summary=True)
        return tf.train.GradientDescentOptimizer(lr)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--logdir', required=True)
    args = parser.parse_args()
    logger.set_logger_dir(args.logdir, action='d')
    config = TrainConfig(
        dataflow=BatchData(Twice(Bands(80, 1)), 16),
        model=Model(),
        callbacks=[ModelSaver(), ScheduledHyperParamSetter('learning_rate', [(2, 0.02)])],
        max_epoch=3,
    )
    QueueInputTrainer(config).train()
    mask = np.zeros(4, dtype=np.bool)
    print('done', mask.dtype)
