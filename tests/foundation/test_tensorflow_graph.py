"""TensorFlow 2.21 runs define-and-run graphs through tf.compat.v1 sessions."""

import numpy as np


def test_session_trains_tiny_model_one_step():
    import tensorflow as tf

    tfv1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tfv1.placeholder(tf.float64, [None, 3], name="x")
        y = tfv1.placeholder(tf.float64, [None], name="y")
        w = tfv1.get_variable("w", initializer=np.zeros(3, dtype=np.float64))
        pred = tf.linalg.matvec(x, w)
        loss = tf.reduce_mean(tf.square(pred - y))
        lr = 0.125  # exactly representable: the optimizer holds it as float32
        train_op = tfv1.train.GradientDescentOptimizer(lr).minimize(loss)
        init = tfv1.global_variables_initializer()

    xs = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]])
    ys = np.array([1.0, 2.0])
    with tfv1.Session(graph=graph) as sess:
        sess.run(init)
        before = sess.run(loss, {x: xs, y: ys})
        sess.run(train_op, {x: xs, y: ys})
        after, w_val = sess.run([loss, w], {x: xs, y: ys})

    # One step of gradient descent from w=0: w = lr * 2/N * X^T y.
    expected_w = lr * 2.0 / len(xs) * xs.T @ ys
    np.testing.assert_allclose(w_val, expected_w, rtol=1e-12)
    assert after < before
