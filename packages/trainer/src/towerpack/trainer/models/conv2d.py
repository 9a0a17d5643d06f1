"""Conv2D and Conv2DTranspose (also registered as Deconv2D), with the reference's variable names
``W`` and ``b``."""

from __future__ import annotations

from ..compat import tf, tfv1
from ._common import default_kernel_initializer, finish, int_pair, padding_name
from .cpu_layout import placed_on_cpu, run_in_layout
from .layer_args import data_format_is_nchw, layer_args
from .registry import layer_register, register_alias

__all__ = ["Conv2D", "Conv2DTranspose", "Deconv2D"]

_CONV_ALIASES = {"out_channel": "filters", "kernel_shape": "kernel_size", "stride": "strides"}


def _channels(x, nchw: bool, layer: str) -> int:
    if x.shape.rank != 4:
        raise ValueError(f"{layer} needs a 4-D input, got shape {x.shape}")
    c = x.shape[1 if nchw else 3]
    if c is None:
        raise ValueError(f"{layer} needs the number of input channels to be known, got shape {x.shape}")
    return int(c)


def _bias(x, filters, dtype, use_bias, initializer, regularizer, nchw):
    if not use_bias:
        return x, None
    b = tfv1.get_variable("b", [filters], dtype=dtype, initializer=initializer, regularizer=regularizer)
    return tf.nn.bias_add(x, b, data_format="NCHW" if nchw else "NHWC"), b


@layer_register(log_shape=True)
@layer_args(positional=("filters", "kernel_size"), aliases=_CONV_ALIASES)
def Conv2D(
    inputs,
    filters,
    kernel_size,
    strides=(1, 1),
    padding="same",
    data_format="channels_last",
    dilation_rate=(1, 1),
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=tfv1.zeros_initializer(),
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    split=1,
):
    """A 2-D convolution: ``W`` [kh, kw, C_in/split, filters] and ``b`` [filters].

    ``split > 1`` is a grouped convolution (C_in and filters divisible by split). Output
    ``output``; ``output.variables`` holds W and b.
    """
    nchw = data_format_is_nchw(data_format)
    in_channel = _channels(inputs, nchw, "Conv2D")
    filters, split = int(filters), int(split)
    if split < 1 or in_channel % split or filters % split:
        raise ValueError(
            f"Conv2D split={split} must divide both the input channels ({in_channel}) and filters ({filters})"
        )
    kh, kw = int_pair(kernel_size, "kernel_size")
    dtype = inputs.dtype.base_dtype
    W = tfv1.get_variable(
        "W",
        [kh, kw, in_channel // split, filters],
        dtype=dtype,
        initializer=kernel_initializer or default_kernel_initializer(),
        regularizer=kernel_regularizer,
    )
    strides, dilations = int_pair(strides, "strides"), int_pair(dilation_rate, "dilation_rate")
    pad = padding_name(padding)
    # TensorFlow's own CPU kernels have no filter gradient for dilated or grouped convolutions;
    # on a CPU (where the layout is NHWC) they are built from plain ones.
    on_cpu = placed_on_cpu("Conv2D")
    cpu_workaround = (dilations != [1, 1] or split > 1) and on_cpu

    def build(t, layout):
        if cpu_workaround:
            return _cpu_conv2d(t, W, strides, pad, dilations, split)
        if on_cpu:
            return _nhwc_conv_on_cpu(t, W, strides, pad, dilations)
        return tf.nn.conv2d(
            t, W, strides=strides, padding=pad, data_format=layout.op_format, dilations=dilations
        )

    x = run_in_layout(inputs, nchw, "Conv2D", build)
    x, b = _bias(x, filters, dtype, use_bias, bias_initializer, bias_regularizer, nchw)
    return finish(x, activation, activity_regularizer, W=W, b=b)


def _nhwc_conv_on_cpu(x, w, strides, padding, dilations=(1, 1)):
    """``tf.nn.conv2d`` (NHWC) on a CPU, with the shape it must have also for an empty batch.

    Given an empty batch (a detector's mask head when nothing was detected), TensorFlow's oneDNN
    convolution returns a tensor shaped like its input, which the bias or the next layer rejects.
    A plain reshape to the right shape does not survive: Grappler removes it, as by the op's shape
    function it changes nothing. So the target is chosen at run time (the result's own shape unless
    the batch is empty), which Grappler cannot see through. Nothing is added where the batch size
    is known to be positive; elsewhere the cost is not measurable (a reshape copies nothing).
    """
    strides, dilations = int_pair(strides, "strides"), int_pair(dilations, "dilations")
    y = tf.nn.conv2d(x, w, strides=strides, padding=padding, dilations=dilations)
    if x.shape[0] is not None and x.shape[0] > 0:
        return y
    size = tf.shape(x)
    dims = [size[0]]
    for axis in (1, 2):
        length = size[axis] if x.shape[axis] is None else int(x.shape[axis])
        span = (int(w.shape[axis - 1]) - 1) * dilations[axis - 1] + 1
        room = length if padding == "SAME" else length - span + 1
        dims.append((room + strides[axis - 1] - 1) // strides[axis - 1])
    dims.append(int(w.shape[3]))
    out = tf.reshape(y, tf.where(size[0] > 0, tf.shape(y), tf.stack(dims)))
    out.set_shape(y.shape)
    return out


def _cpu_conv2d(x, W, strides, padding, dilations, split):
    """An NHWC convolution from ops whose CPU kernels all have gradients: groups as separate
    convolutions, dilation through space-to-batch (atrous convolution)."""
    kernel = W.shape.as_list()[:2]

    def conv(t, w, pad):
        if dilations == [1, 1]:
            return _nhwc_conv_on_cpu(t, w, strides, pad)
        if strides != [1, 1]:
            raise ValueError(f"Conv2D cannot combine strides {strides} with dilation_rate {dilations}")
        return tf.nn.with_space_to_batch(
            t, dilations, pad, lambda u, _, p: _nhwc_conv_on_cpu(u, w, 1, p), filter_shape=kernel
        )

    if split == 1:
        return conv(x, W, padding)
    groups = zip(tf.split(x, split, axis=3), tf.split(W, split, axis=3), strict=True)
    return tf.concat([conv(t, w, padding) for t, w in groups], axis=3)


def _transposed_size(size, kernel: int, stride: int, same: bool):
    if same:
        return size * stride
    return size * stride + max(kernel - stride, 0)


@layer_register(log_shape=True)
@layer_args(positional=("filters", "kernel_size", "strides"), aliases=_CONV_ALIASES)
def Conv2DTranspose(
    inputs,
    filters,
    kernel_size,
    strides=(1, 1),
    padding="same",
    data_format="channels_last",
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=tfv1.zeros_initializer(),
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
):
    """A transposed 2-D convolution: ``W`` [kh, kw, filters, C_in] and ``b`` [filters]; the output
    is ``in * stride`` (same) or ``in * stride + max(k - stride, 0)`` (valid) large."""
    nchw = data_format_is_nchw(data_format)
    in_channel = _channels(inputs, nchw, "Conv2DTranspose")
    filters = int(filters)
    kh, kw = int_pair(kernel_size, "kernel_size")
    sh, sw = int_pair(strides, "strides")
    pad = padding_name(padding)
    dtype = inputs.dtype.base_dtype
    W = tfv1.get_variable(
        "W",
        [kh, kw, filters, in_channel],
        dtype=dtype,
        initializer=kernel_initializer or default_kernel_initializer(),
        regularizer=kernel_regularizer,
    )
    same = pad == "SAME"

    def build(t, layout):
        nchw_op = layout.op_format == "NCHW"
        h_axis, w_axis = (2, 3) if nchw_op else (1, 2)
        static, dynamic = t.shape.as_list(), tf.shape(t)
        out_h = _transposed_size(static[h_axis], kh, sh, same) if static[h_axis] else None
        out_w = _transposed_size(static[w_axis], kw, sw, same) if static[w_axis] else None
        dims = [
            dynamic[0],
            out_h if out_h is not None else _transposed_size(dynamic[h_axis], kh, sh, same),
            out_w if out_w is not None else _transposed_size(dynamic[w_axis], kw, sw, same),
        ]
        shape = [dims[0], filters, dims[1], dims[2]] if nchw_op else [dims[0], dims[1], dims[2], filters]
        y = tf.nn.conv2d_transpose(
            t, W, tf.stack(shape), strides=[sh, sw], padding=pad, data_format=layout.op_format
        )
        y.set_shape([static[0], filters, out_h, out_w] if nchw_op else [static[0], out_h, out_w, filters])
        return y

    x = run_in_layout(inputs, nchw, "Conv2DBackpropInput", build)
    x, b = _bias(x, filters, dtype, use_bias, bias_initializer, bias_regularizer, nchw)
    return finish(x, activation, activity_regularizer, W=W, b=b)


Deconv2D = Conv2DTranspose
register_alias("Deconv2D", Conv2DTranspose)
