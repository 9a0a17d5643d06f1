"""Conv2D on a CPU given an empty batch (a detector's mask head when nothing was detected): the
output has the layer's shape with zero rows, in both data formats, forward and backward.

TensorFlow 2.21's oneDNN convolution returns a tensor shaped like its input for an empty batch,
which the bias then rejects; `make test` runs this file with oneDNN on and off."""

from __future__ import annotations

import numpy as np
import pytest

from towerpack.trainer import Conv2D, Conv2DTranspose, argscope
from towerpack.trainer.compat import tf, tfv1

pytestmark = [pytest.mark.data_format, pytest.mark.usefixtures("graph")]

# (conv keyword arguments, NHWC output shape of one 9x9x16 image)
CASES = {
    "1x1": ({"filters": 8, "kernel_size": 1}, (9, 9, 8)),
    "3x3_strided": ({"filters": 8, "kernel_size": 3, "strides": 2}, (5, 5, 8)),
    "valid_dilated": ({"filters": 6, "kernel_size": 3, "padding": "valid", "dilation_rate": 2}, (5, 5, 6)),
    "grouped": ({"filters": 8, "kernel_size": 3, "split": 2, "activation": tf.nn.relu}, (9, 9, 8)),
}


@pytest.mark.parametrize("known_size", [False, True], ids=["any_size", "known_size"])
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv2d_on_cpu_keeps_its_shape_for_an_empty_batch(case, data_format, known_size):
    kwargs, (h, w, c) = CASES[case]
    nchw = data_format == "channels_first"
    size = 9 if known_size else None
    x = tfv1.placeholder(tf.float32, [None, 16, size, size] if nchw else [None, size, size, 16])
    with tf.device("/cpu:0"), argscope([Conv2D, Conv2DTranspose], data_format=data_format):
        # a mask head's last layers: with a known image size, Grappler sees static shapes
        y = Conv2D("conv", x, **kwargs)
        up = Conv2DTranspose("up", y, 4, 2, strides=2)
        out = Conv2D("out", up, 3, 1)
        # (not through Conv2DTranspose's input gradient: a oneDNN convolution too, not guarded)
        grads = tf.gradients(tf.reduce_sum(y), [y.variables.W]) + tf.gradients(
            tf.reduce_sum(out), [out.variables.W]
        )
    want = (c, h, w) if nchw else (h, w, c)
    want_out = (3, 2 * h, 2 * w) if nchw else (2 * h, 2 * w, 3)
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        for n in (2, 0):
            images = np.ones((n, 16, 9, 9) if nchw else (n, 9, 9, 16), np.float32)
            got, got_out, g = sess.run([y, out, grads], {x: images})
            assert got.shape == (n, *want)
            assert got_out.shape == (n, *want_out)
            assert [a.shape for a in g] == [tuple(y.variables.W.shape), tuple(out.variables.W.shape)]
            assert all(a.any() for a in g) == (n > 0)  # no image, no gradient
