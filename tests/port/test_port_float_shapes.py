"""`towerpack port` on shape dimensions and layer widths that Python 3 computes as floats: reported at
their line where a shape or width goes, `64 / 2` of two literals rewritten to `64 // 2`, and the
premise checked on a real TensorFlow graph (TF 2.21 refuses the float, takes the fix)."""

from __future__ import annotations

import textwrap

import pytest
import tensorflow as tf

from towerpack.port.codemod import port_source, port_text
from towerpack.port.findings import Kind


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


MODEL = src(
    """
    import numpy as np
    import tensorflow as tf
    from tensorpack import Conv2D, FullyConnected, InputDesc, MaxPooling

    SIZE = 224


    def inputs():
        return [InputDesc(tf.float32, [None, SIZE / 2, 3], "image"), tf.placeholder(tf.int32, (None, 7 / 2))]


    def build(x, in_channel, split, w):
        v = tf.get_variable("w", shape=[3, 3, in_channel / split, int(in_channel * 0.5)])
        x = Conv2D("conv", x, in_channel / split, 3)
        x = Conv2D("conv2", x, filters=float(in_channel), kernel_size=3 * 1.0)
        x = MaxPooling("pool", x, 2.0)
        x = FullyConnected("fc", x, out_dim=in_channel // 2)
        x = tf.reshape(x, [-1, SIZE /
                           4])
        z = np.zeros((SIZE / 8, 3)) + x.reshape(SIZE / 4) + tf.nn.conv2d(x, w / 2.0, [1, 1, 1, 1], "SAME")
        return tf.TensorSpec([None, 2.5]), tf.zeros([64 / 2]), tf.layers.dense(x, units=in_channel / 2), v, z
    """
)


def test_float_dimensions_are_reported_at_their_line_and_others_are_not():
    ported = port_source(MODEL, "model.py")
    found = sorted(
        (f.line, f.message.partition(" in ")[0]) for f in ported.findings if f.kind is Kind.FLOAT_SHAPE
    )
    assert found == [
        (9, "`7 / 2`"),
        (9, "`SIZE / 2`"),
        (13, "`in_channel / split`"),  # get_variable; int(in_channel * 0.5) is fine
        (14, "`in_channel / split`"),  # Conv2D's channels
        (15, "`3 * 1.0`"),
        (15, "`float(in_channel)`"),
        (16, "`2.0`"),  # MaxPooling's window
        (18, "`SIZE / 4`"),  # the reported line is the division's
        (20, "`SIZE / 8`"),  # np.zeros; x.reshape (a method) and tf.nn.conv2d's filter tensor are not shapes
        (21, "`2.5`"),
        (21, "`in_channel / 2`"),
    ]
    message = next(f.message for f in ported.findings if f.line == 14)
    assert message == (
        "`in_channel / split` in Conv2D(...) divides with `/`, which gives a float in Python 3: TensorFlow 1 "
        "took a whole float as a dimension, TensorFlow 2.21 raises TypeError (NumPy too); use // or int(...)"
    )


def test_only_an_exact_division_of_literals_is_rewritten():
    ported = port_text(MODEL)
    assert "tf.zeros([64 // 2])" in ported
    assert ported.count("//") == MODEL.count("//") + 1  # 7 / 2 and SIZE / 2 stay (and are reported)
    assert port_text(ported) == ported  # a second port changes nothing


def test_keras_style_positional_widths_and_unrelated_calls_are_not_taken_for_shapes():
    code = src(
        """
        from tf_keras.layers import Conv2D, Dense
        a = Conv2D(64 / 2, 3), Dense(10 / 3)  # a Keras layer takes no name first
        b = ratio.zeros(3 / 2), reshape(x, [h / 2])  # a method of something else; a bare reshape is checked
        """
    )
    found = [(f.line, f.message.partition(" in ")[0]) for f in port_source(code).findings]
    assert found == [(3, "`h / 2`")]


# Shapes as a TF 1 script wrote them (tf is TensorFlow itself here: no import for the port to touch).
SHAPES = {
    "placeholder": "x = tf.compat.v1.placeholder(tf.float32, [None, 64 / 2])",
    "get_variable": "x = tf.compat.v1.get_variable('w', shape=[3, 64 / 2])",
    "TensorSpec": "x = tf.TensorSpec([None, 64 / 2])",
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_tensorflow_refuses_the_float_dimension_and_takes_the_ported_one(name):
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="Dimension value must be integer"):
            exec(SHAPES[name], {"tf": tf})
        namespace = {"tf": tf}
        exec(port_text(SHAPES[name]), namespace)
        assert namespace["x"].shape.as_list()[-1] == 32
