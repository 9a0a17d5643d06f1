"""Image pipeline benchmark: ImageNet-style training input, towerpack.dataflow against tf.data at its best.

The work: JPEGs of ImageNet size (about 500x375, generated, in the ILSVRC12 directory layout) ->
decode -> fb.resnet.torch training augmentation (random area/aspect crop resized bicubically to
224x224, brightness, contrast, saturation, PCA lighting, horizontal flip) -> batches of 64 uint8
images with their labels. Every contender does all of it, on the same files.

- ours: the "efficient dataflow" recipe: the directory packed once into an LMDB of JPEG bytes
  (``dataflow pack-images``), read by ``image_lmdb_dataflow`` with 1 and 2 worker processes;
- tf.data, three ways, ``num_parallel_calls=AUTOTUNE``, ``deterministic=False``, batch,
  ``prefetch(AUTOTUNE)``: ``decode_jpeg`` then the crop (the simple form); ``decode_and_crop_jpeg``
  (partial decoding, as TensorFlow's official ResNet input) from the files; and the same from one
  TFRecord file holding them (written once, untimed).

Images per second after a warm-up, best of the trials (contenders alternate). Goal: 2 workers >=
1.3x the best tf.data pipeline on a 2-core machine.

Where the time goes: one image at a time in this process, the stages of our worker path (read
and unpack a record, draw the transform, decode the window, resize, colour, flip), and from the
2-worker run the CPU time per image of the workers and of the consumer (receiving and batching),
which bound what 2 cores can deliver. Goal: the augmentation (draw, geometry, colour, flip)
<= 0.7 ms per image. Also shown: the same augmentation with the colour path EXACT (every colour
augmentor in turn, the reference's way).

Also, lean workers: in a process that imported ``towerpack.trainer`` and ran a session, the seconds
to the first datapoint of ``MultiProcessRunnerZMQ(df, 2)`` and each worker's private memory (USS,
after a full garbage collection in the worker), forked (ours) against spawned workers that import
TensorFlow again (goals: <= 0.5 s and <= 30 MB per worker).

    python benchmarks/image_pipeline.py [--quick] [--trials N] [--images N]

Always exits 0 after printing its tables and RESULT lines.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.image_datasets import write_ilsvrc12  # noqa: E402
from towerpack.dataflow.image.crop_decode import decode_planned, partial_decoding, plan_decode  # noqa: E402
from towerpack.dataflow.image.decode import jpeg_header  # noqa: E402
from towerpack.dataflow.image.fbresnet import fbresnet_augmentor  # noqa: E402
from towerpack.dataflow.image.lmdb_recipe import image_lmdb_dataflow, pack_imagenet  # noqa: E402
from towerpack.dataflow.imgaug.base import AugmentorList  # noqa: E402
from towerpack.dataflow.imgaug.colour_matrix import ColourPath, apply_in_order, set_colour_path  # noqa: E402
from towerpack.dataflow.wire.codec import unpack  # noqa: E402

BATCH = 64
GOAL_THROUGHPUT = 1.3
GOAL_AUGMENT_S = 0.7e-3
STAGE_LABELS = {
    "read": "read + unpack the record",
    "draw": "draw the transform, plan the decode",
    "decode": "decode the window",
    "geometry": "resize (bicubic)",
    "colour": "colour jitter (one pass)",
    "flip": "flip",
}
TF_MODES = ("decode_jpeg then crop", "decode_and_crop_jpeg", "decode_and_crop_jpeg, TFRecord")

TFDATA = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    import tensorflow as tf

    mode, files, labels, record_file, batch, warmup, count = json.loads(sys.argv[1])
    EIGVAL = np.array([0.2175, 0.0188, 0.0045], np.float32) * 255.0
    EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                       [-0.5836, -0.6948, 0.4203]], np.float32)

    def window(data):
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(data), bounding_boxes=tf.zeros([0, 0, 4]),
            min_object_covered=0, aspect_ratio_range=[0.75, 1.33], area_range=[0.08, 1.0],
            max_attempts=10, use_image_if_no_bounding_boxes=True)
        return begin, size

    def decode_then_crop(data):
        begin, size = window(data)
        return tf.slice(tf.image.decode_jpeg(data, channels=3), begin, size)

    def decode_and_crop(data):
        begin, size = window(data)
        crop = tf.stack([begin[0], begin[1], size[0], size[1]])
        return tf.image.decode_and_crop_jpeg(data, crop, channels=3)

    def augment(image):
        image = tf.image.resize(image, [224, 224], method="bicubic")
        image = image * tf.random.uniform([], 0.6, 1.4)
        image = tf.image.random_contrast(image, 0.6, 1.4)
        grey = tf.image.rgb_to_grayscale(image)
        alpha = tf.random.uniform([], 0.6, 1.4)
        image = image * alpha + grey * (1 - alpha)
        image = image + tf.linalg.matvec(EIGVEC, tf.random.normal([3], stddev=0.1) * EIGVAL)
        image = tf.image.random_flip_left_right(image)
        return tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8)

    decode = decode_then_crop if mode == "decode_jpeg then crop" else decode_and_crop
    if mode.endswith("TFRecord"):
        if not os.path.exists(record_file):
            with tf.io.TFRecordWriter(record_file) as writer:
                for path, label in zip(files, labels):
                    image = tf.train.BytesList(value=[open(path, "rb").read()])
                    feature = {
                        "image": tf.train.Feature(bytes_list=image),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                    }
                    writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

        def train_map(record):
            example = tf.io.parse_single_example(record, spec)
            return augment(decode(example["image"])), example["label"]

        ds = tf.data.TFRecordDataset(record_file).cache().shuffle(len(files)).repeat()
    else:

        def train_map(path, label):
            return augment(decode(tf.io.read_file(path))), label

        ds = tf.data.Dataset.from_tensor_slices((files, labels)).shuffle(len(files)).repeat()
    ds = ds.map(train_map, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    ds = ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    it = iter(ds)
    for _ in range(warmup):
        next(it)
    start = time.perf_counter()
    for _ in range(count):
        images, _ = next(it)
    print(json.dumps(count * batch / (time.perf_counter() - start)))
    """
)

WORKERS = textwrap.dedent(
    """
    import gc, json, os, sys, time
    import numpy as np, psutil
    import towerpack.trainer
    import tensorflow.compat.v1 as tf
    with tf.Graph().as_default(), tf.Session() as sess:
        sess.run(tf.reduce_sum(tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]))))
    from towerpack.dataflow import AugmentImageComponent, DataFromList, MapData, MultiProcessRunnerZMQ
    from towerpack.dataflow.image.fbresnet import fbresnet_augmentor

    def collect(dp):
        gc.collect()  # walks every object the worker sees, as a long-running worker's collector will
        return dp

    def main(method):
        image = np.full((375, 500, 3), 128, np.uint8)
        df = AugmentImageComponent(DataFromList([[image, 0]] * 64, shuffle=False), fbresnet_augmentor(True))
        start = time.perf_counter()
        df = MultiProcessRunnerZMQ(MapData(df, collect), 2, start_method=method)
        df.reset_state()
        it = iter(df)
        next(it)
        first = time.perf_counter() - start
        for _ in range(20):
            next(it)
        uss = max(psutil.Process(p).memory_full_info().uss for p in df.worker_pids) / 2**20
        df.close()
        print(json.dumps([first, uss]))

    if __name__ == "__main__":
        main(sys.argv[1])
    """
)


def iter_forever(df):
    while True:
        yield from df


def _cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def ours(lmdb: str, workers: int, warmup: int, count: int) -> tuple[float, float, float]:
    """``(images/s, worker CPU s per image, consumer CPU s per image)``."""
    with image_lmdb_dataflow(lmdb, fbresnet_augmentor(True), BATCH, workers) as df:
        df.reset_state()
        it = iter_forever(df)
        for _ in range(warmup):
            next(it)
        pids = list(df.ds.worker_pids) if workers else []
        workers_cpu, consumer_cpu = _cpu_seconds(pids), time.process_time()
        start = time.perf_counter()
        for _ in range(count):
            next(it)
        seconds = time.perf_counter() - start
        images = count * BATCH
        workers_cpu = (_cpu_seconds(pids) - workers_cpu) / images
        consumer_cpu = (time.process_time() - consumer_cpu) / images
        return images / seconds, workers_cpu, consumer_cpu


def tfdata(mode: str, files: list, record_file: str, warmup: int, count: int) -> float:
    paths, labels = [p for p, _ in files], [int(label) for _, label in files]
    arg = json.dumps([mode, paths, labels, record_file, BATCH, warmup, count])
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", TFDATA, arg], capture_output=True, text=True, timeout=900, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"tf.data ({mode}) failed:\n{proc.stderr[-3000:]}")
    return float(proc.stdout.split()[-1])


def records(lmdb: str, n: int) -> list[np.ndarray]:
    """The encoded JPEGs of the first ``n`` records."""
    from towerpack.dataflow.formats.lmdb import LMDBData

    df = LMDBData(lmdb, shuffle=False, shard=False)
    df.reset_state()
    out = []
    for _key, value in df:
        out.append(np.array(unpack(value)[0]))
        if len(out) == n:
            break
    return out


def stages(lmdb: str, n: int, reps: int) -> dict[str, float]:
    """Seconds per image of each stage of the worker path, one image at a time (best of ``reps``)."""
    from towerpack.dataflow.formats.lmdb import LMDBData

    augs = AugmentorList(fbresnet_augmentor(True))
    datas = records(lmdb, n)
    best: dict[str, float] = {}
    reader = LMDBData(lmdb, shuffle=False, shard=False)
    reader.reset_state()
    for _ in range(reps):
        spent = dict.fromkeys(("read", "draw", "decode", "geometry", "colour", "flip"), 0.0)
        t = time.perf_counter()
        for i, (_key, value) in enumerate(reader):
            unpack(value)
            if i + 1 == n:
                break
        spent["read"] = time.perf_counter() - t
        for data in datas:
            t0 = time.perf_counter()
            header = jpeg_header(data)
            tfms = augs.get_transform_from_shape((header.height, header.width, 3)).tfms
            plan = plan_decode(tfms, header.height, header.width)
            t1 = time.perf_counter()
            img = decode_planned(data, header, plan)  # the crop's window, alone where it can
            t2 = time.perf_counter()
            img = apply_in_order(plan.steps[:-4], img)  # resize
            t3 = time.perf_counter()
            img = apply_in_order(plan.steps[-4:-1], img)  # ToFloat32, the colour jitter, ToUint8
            t4 = time.perf_counter()
            apply_in_order(plan.steps[-1:], img)  # flip
            t5 = time.perf_counter()
            for key, seconds in zip(("draw", "decode", "geometry", "colour", "flip"),
                                    (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):  # fmt: skip
                spent[key] += seconds
        for key, seconds in spent.items():
            best[key] = min(best.get(key, 1e9), seconds / n)
    return best


def augmentation_per_image(lmdb: str, n: int, reps: int, path: ColourPath) -> float:
    """Seconds per image of the whole fbresnet augmentation of decoded images, on colour path ``path``."""
    from towerpack.dataflow.image.decode import decode_image

    images = [decode_image(d) for d in records(lmdb, n)]
    augs = AugmentorList(fbresnet_augmentor(True))
    previous = set_colour_path(path)
    try:
        best = 1e9
        for _ in range(reps):
            start = time.perf_counter()
            for img in images:
                augs.augment(img)
            best = min(best, (time.perf_counter() - start) / n)
        return best
    finally:
        set_colour_path(previous)


def workers_startup(method: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, "workers.py")
        script.write_text(WORKERS)
        proc = subprocess.run(
            [sys.executable, str(script), method], capture_output=True, text=True, timeout=600, cwd=tmp
        )
    if proc.returncode != 0:
        raise RuntimeError(f"worker start-up ({method}) failed:\n{proc.stderr[-3000:]}")
    first, uss = json.loads(proc.stdout.split("\n")[-2])
    return first, uss


def result(case: str, ours_value: float, baseline: float, unit: str, goal: float | None) -> None:
    ratio = ours_value / baseline if baseline else float("nan")
    record = {
        "benchmark": "image_pipeline",
        "case": case,
        "ours": round(ours_value, 6),
        "baseline": round(baseline, 6),
        "unit": unit,
        "ratio": round(ratio, 3),
        "goal": goal,
    }
    print("RESULT " + json.dumps(record), flush=True)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer images, batches and trials")
    parser.add_argument("--trials", type=int, help="trials per contender (default 3, quick 1)")
    parser.add_argument("--images", type=int, help="JPEGs in the generated dataset (default 1024, quick 256)")
    args = parser.parse_args()
    trials = args.trials or (1 if args.quick else 3)
    n_images = args.images or (256 if args.quick else 1024)
    warmup, count = (2, 6) if args.quick else (5, 30)
    load = os.getloadavg()[0]
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, load average {load:.2f} at the start")
    print(
        "windows decoded alone (partial decoding)"
        if partial_decoding()
        else "whole images decoded, then cropped"
    )

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        written = write_ilsvrc12(
            os.path.join(tmp, "ilsvrc"), num_classes=16, train_per_class=n_images // 16, num_val=0,
            num_test=0, imagenet_like=True,
        )  # fmt: skip
        files = written.files["train"]
        lmdb = os.path.join(tmp, "train.lmdb")
        pack_imagenet(written.root, "train", lmdb, meta_dir=written.meta_dir, progress=False)
        size_kb = np.mean([os.path.getsize(p) for p, _ in files]) / 1024
        print(
            f"{n_images} JPEGs of ~500x375, {size_kb:.0f} KB on average, in {time.perf_counter() - t0:.1f} s"
        )

        record_file = os.path.join(tmp, "train.tfrecord")
        best = dict.fromkeys(("ours-1", "ours-2", *TF_MODES), 0.0)
        cpu_split = (0.0, 0.0)
        for trial in range(trials):
            for mode in TF_MODES:
                best[mode] = max(best[mode], tfdata(mode, files, record_file, warmup, count))
            for w in (1, 2):
                rate, workers_cpu, consumer_cpu = ours(lmdb, w, warmup, count)
                if rate > best[f"ours-{w}"]:
                    best[f"ours-{w}"] = rate
                    if w == 2:
                        cpu_split = (workers_cpu, consumer_cpu)
            print(
                f"trial {trial + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in best.items()) + " img/s",
                flush=True,
            )

        n_stage = 64 if args.quick else 256
        reps = 2 if args.quick else 5
        stage = stages(lmdb, n_stage, reps)
        exact = augmentation_per_image(lmdb, n_stage, reps, ColourPath.EXACT)

    fork_first, fork_uss = workers_startup("fork")
    spawn_first, spawn_uss = workers_startup("spawn")

    best_tf_mode = max(TF_MODES, key=lambda m: best[m])
    best_tf = best[best_tf_mode]
    print(f"\n{'pipeline':<46}{'images/s':>10}{'vs best tf.data':>17}")
    names = {"ours-1": "towerpack, 1 worker", "ours-2": "towerpack, 2 workers"}
    for key, value in best.items():
        name = names.get(key, f"tf.data, {key}")
        print(f"{name:<46}{value:>10.0f}{value / best_tf:>17.2f}")

    augment = stage["draw"] + stage["geometry"] + stage["colour"] + stage["flip"]
    serial = stage["read"] + stage["decode"] + augment
    print(f"\n{'one image at a time, ms':<46}{'ms':>10}")
    for key, label in STAGE_LABELS.items():
        print(f"  {label:<44}{stage[key] * 1e3:>10.3f}")
    print(f"  {'augmentation (draw, geometry, colour, flip)':<44}{augment * 1e3:>10.3f}")
    print(f"  {'the same with the EXACT colour path':<44}{exact * 1e3:>10.3f}")
    workers_cpu, consumer_cpu = cpu_split
    print(f"\n{'2 workers, CPU per image, ms':<46}{'ms':>10}")
    print(f"  {'workers (read, decode, augment, send)':<44}{workers_cpu * 1e3:>10.3f}")
    print(f"  {'consumer (receive, batch)':<44}{consumer_cpu * 1e3:>10.3f}")
    total = workers_cpu + consumer_cpu
    print(f"  {'total':<44}{total * 1e3:>10.3f}")
    limit = 2 / total if total else float("nan")
    print(f"2-core limit that implies: {limit:.0f} images/s (reached {best['ours-2'] / limit:.0%}); "
          f"the serial stages alone: {2 / serial:.0f}")  # fmt: skip
    print(f"\n{'workers under TensorFlow':<32}{'first dp s':>12}{'USS MB':>10}")
    print(f"{'forked (ours)':<32}{fork_first:>12.3f}{fork_uss:>10.1f}")
    print(f"{'spawned':<32}{spawn_first:>12.3f}{spawn_uss:>10.1f}")
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")

    result(
        f"fbresnet train, 2 workers vs best tf.data ({best_tf_mode})",
        best["ours-2"],
        best_tf,
        "images/s",
        GOAL_THROUGHPUT,
    )
    result("augmentation per image vs the 0.7 ms budget", augment, GOAL_AUGMENT_S, "s", 1.0)
    result("worker start: first datapoint (fork vs spawn)", fork_first, spawn_first, "s", None)
    result("worker private memory (fork vs spawn)", fork_uss, spawn_uss, "MB", None)


if __name__ == "__main__":
    main()
