"""GradientPacker: a list of tensors as a few flat buffers of about a threshold size, and back.

Every transfer between processes (a collective all-reduce, a tensor sent to or from a parameter
server) has a fixed cost on top of its bytes, and models have many small variables: concatenating
the flattened tensors into a few buffers replaces hundreds of transfers by a handful. Packing only
moves values, so what is computed on the buffers (a sum, a mean) equals what it gives per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..compat import tf

__all__ = ["DEFAULT_PACK_BYTES", "GradientPacker"]

# Large enough that a model of a few hundred variables needs few buffers, small enough that the
# transfer of the first buffers overlaps the computation of the last gradients.
DEFAULT_PACK_BYTES = 4 << 20


@dataclass(frozen=True)
class _Buffer:
    """Tensors ``indices`` (of one dtype, in order) as one flat buffer; a lone tensor is not reshaped."""

    indices: tuple[int, ...]
    shapes: tuple[tf.TensorShape, ...]

    @property
    def sizes(self) -> list[int]:
        return [s.num_elements() for s in self.shapes]


class GradientPacker:
    """Packs tensors of the given dtypes and static shapes into buffers of at most ``threshold_bytes``
    (a tensor larger than that, or without a fully defined shape, is a buffer of its own; with
    ``threshold_bytes=0`` every tensor is, and packing changes nothing).

    A buffer holds tensors of one dtype only, in their order; ``dtypes`` and ``shapes`` describe the
    buffers (e.g. for the components of a queue).
    """

    def __init__(self, dtypes: list, shapes: list, threshold_bytes: int = DEFAULT_PACK_BYTES):
        if len(dtypes) != len(shapes):
            raise ValueError(f"GradientPacker: {len(dtypes)} dtypes but {len(shapes)} shapes")
        if not (isinstance(threshold_bytes, int) and threshold_bytes >= 0):
            raise ValueError(f"GradientPacker: threshold_bytes must be an int >= 0, got {threshold_bytes!r}")
        self.num_tensors = len(dtypes)
        dtypes = [tf.as_dtype(d).base_dtype for d in dtypes]
        shapes = [tf.TensorShape(s) for s in shapes]
        open_buffers: dict = {}  # dtype -> (indices, bytes) of the buffer being filled
        buffers: list[tuple[int, ...]] = []
        for i, (dtype, shape) in enumerate(zip(dtypes, shapes, strict=True)):
            nbytes = shape.num_elements() * dtype.size if shape.is_fully_defined() else None
            if nbytes is None or nbytes >= threshold_bytes:
                buffers.append((i,))
                continue
            indices, total = open_buffers.get(dtype, ((), 0))
            if indices and total + nbytes > threshold_bytes:
                buffers.append(indices)
                indices, total = (), 0
            open_buffers[dtype] = ((*indices, i), total + nbytes)
        buffers += [indices for indices, _ in open_buffers.values()]
        buffers.sort(key=lambda indices: indices[0])
        self._buffers = [_Buffer(ix, tuple(shapes[i] for i in ix)) for ix in buffers]
        self.dtypes = [dtypes[b.indices[0]] for b in self._buffers]
        self.shapes = [
            b.shapes[0] if len(b.indices) == 1 else tf.TensorShape([sum(b.sizes)]) for b in self._buffers
        ]

    @classmethod
    def of(cls, tensors: list, threshold_bytes: int = DEFAULT_PACK_BYTES) -> GradientPacker:
        """A packer for tensors like ``tensors``."""
        return cls([t.dtype for t in tensors], [t.shape for t in tensors], threshold_bytes)

    @property
    def num_buffers(self) -> int:
        return len(self._buffers)

    def pack(self, tensors: list) -> list:
        """The buffers of ``tensors`` (on the device of the caller's scope)."""
        if len(tensors) != self.num_tensors:
            raise ValueError(f"GradientPacker: built for {self.num_tensors} tensors, got {len(tensors)}")
        out = []
        with tf.name_scope("pack"):
            for b in self._buffers:
                if len(b.indices) == 1:
                    out.append(tensors[b.indices[0]])
                else:
                    out.append(tf.concat([tf.reshape(tensors[i], [-1]) for i in b.indices], axis=0))
        return out

    def unpack(self, buffers: list) -> list:
        """The tensors (in their order, with their shapes) of ``buffers`` made by :meth:`pack`."""
        if len(buffers) != self.num_buffers:
            raise ValueError(f"GradientPacker: made {self.num_buffers} buffers, got {len(buffers)}")
        out: list = [None] * self.num_tensors
        with tf.name_scope("unpack"):
            for b, buf in zip(self._buffers, buffers, strict=True):
                if len(b.indices) == 1:
                    out[b.indices[0]] = buf
                    continue
                for i, shape, part in zip(b.indices, b.shapes, tf.split(buf, b.sizes), strict=True):
                    out[i] = tf.reshape(part, shape)
        return out
