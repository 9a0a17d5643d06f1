"""ImageNet data and the ImageNet model base, in the reference's style (its ``imagenet_utils.py``).

Three sources of training data, all ending in batches of ``[uint8 BGR (B, S, S, 3), int32 (B,)]``:

- an ILSVRC12 directory (``train/<wnid>/*.JPEG`` plus the caffe meta files): each dataflow worker
  reads its shard of the file list, decodes and augments (the reference's ``get_imagenet_dataflow``);
- an LMDB made by ``dataflow pack-images DIR train.lmdb``: one sequential read per worker instead of
  a random read per file (the reference's "efficient dataflow" recipe);
- ``--fake``: random images, to measure the model alone.

Validation reads the ``val`` split in order, every image once, decoded by threads of one process.
"""

from __future__ import annotations

import multiprocessing

import cv2

from towerpack.dataflow import (
    AugmentImageComponent,
    BatchData,
    FakeData,
    MultiProcessRunnerZMQ,
    MultiThreadMapData,
    dataset,
    imgaug,
)
from towerpack.dataflow.image.decode import read_image
from towerpack.dataflow.image.fbresnet import fbresnet_augmentor
from towerpack.dataflow.image.lmdb_recipe import image_lmdb_dataflow
from towerpack.trainer import ModelDesc, add_moving_summary, regularize_cost
from towerpack.trainer.compat import tf, tfv1


def augmentors(is_train: bool, image_size: int = 224) -> list:
    """fb.resnet.torch's augmentation at 224 px (the reference's); scaled to ``image_size`` otherwise."""
    if image_size == 224:
        return fbresnet_augmentor(is_train)
    if not is_train:
        return [
            imgaug.ResizeShortestEdge(image_size * 8 // 7, cv2.INTER_CUBIC),
            imgaug.CenterCrop((image_size, image_size)),
        ]
    augs = fbresnet_augmentor(True)
    augs[0] = imgaug.GoogleNetRandomCropAndResize(target_shape=image_size, interp=cv2.INTER_CUBIC)
    return augs


def default_parallel() -> int:
    return max(1, min(40, multiprocessing.cpu_count() // 2))


def get_imagenet_dataflow(datadir, name, batch_size, augs, parallel=None, meta_dir=None):
    """Batches of split ``name`` of an ILSVRC12 directory, decoded and augmented in workers.

    Training: every worker process reads its shard of this rank's shard of the shuffled file
    list (each image once per epoch across ranks and workers). Validation: the split in order.
    """
    parallel = parallel or default_parallel()
    if name == "train":
        ds = dataset.ILSVRC12(datadir, name, meta_dir=meta_dir, shuffle=True)
        ds = AugmentImageComponent(ds, augs, copy=False)
        ds = MultiProcessRunnerZMQ(ds, parallel)
        return BatchData(ds, batch_size, remainder=False)
    ds = dataset.ILSVRC12Files(datadir, name, meta_dir=meta_dir, shuffle=False)
    aug = imgaug.AugmentorList(augs)

    def mapf(dp):
        fname, cls = dp
        return aug.augment(read_image(fname)), cls  # BGR, as cv2.imread; a bad file is named

    ds = MultiThreadMapData(ds, parallel, mapf, buffer_size=2000, strict=True)
    ds = BatchData(ds, batch_size, remainder=True)
    return MultiProcessRunnerZMQ(ds, 1)


def get_lmdb_dataflow(path, batch_size, augs, parallel=None):
    """Training batches from an image LMDB (``dataflow pack-images``), decoded in ``parallel`` workers."""
    return image_lmdb_dataflow(path, augs, batch_size, parallel or default_parallel())


def get_fake_dataflow(batch_size, image_size, num_batches=100):
    """Random uint8 batches: the model's speed without any input cost."""
    shapes = [[batch_size, image_size, image_size, 3], [batch_size]]
    return FakeData(shapes, num_batches, random=False, dtype=["uint8", "int32"], domain=(0, 10))


class ImageNetModel(ModelDesc):
    """uint8 BGR images in, ``cost`` out; subclasses give ``get_logits``. As the reference's base."""

    image_shape = 224
    image_dtype = tf.uint8
    data_format = "NHWC"
    image_bgr = True
    weight_decay = 1e-4
    weight_decay_pattern = ".*/W"
    num_classes = 1000
    base_lr = 0.1

    def inputs(self):
        return [
            tf.TensorSpec([None, self.image_shape, self.image_shape, 3], self.image_dtype, "input"),
            tf.TensorSpec([None], tf.int32, "label"),
        ]

    def build_graph(self, image, label):
        image = self.image_preprocess(image)
        if self.data_format == "NCHW":
            image = tf.transpose(image, [0, 3, 1, 2])
        logits = self.get_logits(image)
        loss = compute_loss_and_error(logits, label)
        wd_loss = regularize_cost(self.weight_decay_pattern, tf.nn.l2_loss, name="l2_regularize_loss")
        wd_loss = tf.multiply(self.weight_decay, wd_loss, name="wd_cost")
        add_moving_summary(loss, wd_loss)
        return tf.add_n([loss, wd_loss], name="cost")

    def get_logits(self, image):
        raise NotImplementedError

    def optimizer(self):
        lr = tfv1.get_variable("learning_rate", initializer=self.base_lr, trainable=False)
        tfv1.summary.scalar("learning_rate-summary", lr)
        return tfv1.train.MomentumOptimizer(lr, 0.9, use_nesterov=True)

    def image_preprocess(self, image):
        with tf.name_scope("image_preprocess"):
            image = tf.cast(image, tf.float32)
            mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]  # RGB
            if self.image_bgr:
                mean, std = mean[::-1], std[::-1]
            return (image - tf.constant(mean) * 255.0) / (tf.constant(std) * 255.0)


def compute_loss_and_error(logits, label):
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label), name="xentropy-loss"
    )
    for k in (1, 5):
        k = min(k, int(logits.shape[-1]))
        wrong = tf.cast(tf.logical_not(tfv1.nn.in_top_k(logits, label, k)), tf.float32, name=f"wrong-top{k}")
        add_moving_summary(tf.reduce_mean(wrong, name=f"train-error-top{k}"))
    return loss


def num_classes_of(datadir, meta_dir=None) -> int:
    """The number of classes of an ILSVRC12 directory's meta files (1000 for ImageNet)."""
    return len(dataset.ILSVRCMeta(meta_dir).get_synset_1000()) if datadir else 1000
