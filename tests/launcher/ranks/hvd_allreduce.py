"""Horovod over Gloo through the launcher: a graph-mode allreduce; prints 'RESULT rank size value'."""

import os

import horovod.tensorflow as hvd
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
hvd.init()
assert hvd.rank() == int(os.environ["RANK"]) and hvd.size() == int(os.environ["WORLD_SIZE"])
assert hvd.local_rank() == int(os.environ["LOCAL_RANK"])
total = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum)
with tf.compat.v1.Session() as sess:
    print("RESULT", hvd.rank(), hvd.size(), hvd.cross_size(), sess.run(total)[0], flush=True)
