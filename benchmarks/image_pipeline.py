"""Image pipeline benchmark: ImageNet-style training input, towerpack.dataflow against tf.data.

The work: JPEGs of ImageNet size (about 500x375, generated, in the ILSVRC12 directory layout) ->
decode -> fb.resnet.torch training augmentation (random area/aspect crop resized bicubically to
224x224, brightness, contrast, saturation, PCA lighting, horizontal flip) -> batches of 64 uint8
images with their labels.

- ours: the "efficient dataflow" recipe: the directory packed once into an LMDB of JPEG bytes
  (``dataflow pack-images``), read by ``image_lmdb_dataflow`` with 1 and 2 worker processes;
- baseline: tf.data on the same JPEG files: ``read_file``, ``decode_jpeg``,
  ``sample_distorted_bounding_box`` crop, bicubic resize, the same colour jitter and flip,
  ``num_parallel_calls=AUTOTUNE``, batch, ``prefetch(AUTOTUNE)``.

Images per second after a warm-up, best of the trials (contenders alternate). Goal: 2 workers
>= 1.0 of tf.data on a 2-core machine.

Also, lean workers: in a process that imported ``towerpack.trainer`` and ran a session, the seconds
to the first datapoint of ``MultiProcessRunnerZMQ(df, 2)`` and each worker's private memory (USS,
after a full garbage collection in the worker), forked (ours) against spawned workers that import
TensorFlow again (the baseline). Goals: <= 0.5 s and <= 30 MB per worker.

    python benchmarks/image_pipeline.py [--quick] [--trials N] [--images N]

Always exits 0 after printing its table and RESULT lines.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.image_datasets import write_ilsvrc12  # noqa: E402
from towerpack.dataflow.fbresnet import fbresnet_augmentor  # noqa: E402
from towerpack.dataflow.image_lmdb import image_lmdb_dataflow, pack_imagenet  # noqa: E402

BATCH = 64
GOAL_THROUGHPUT = 1.0
GOAL_START_S = 0.5
GOAL_USS_MB = 30.0

TFDATA = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import tensorflow as tf

    files, labels, batch, warmup, count = json.loads(sys.argv[1])
    EIGVAL = np.array([0.2175, 0.0188, 0.0045], np.float32) * 255.0
    EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                       [-0.5836, -0.6948, 0.4203]], np.float32)

    def train_map(path, label):
        data = tf.io.read_file(path)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(data), bounding_boxes=tf.zeros([0, 0, 4]),
            min_object_covered=0, aspect_ratio_range=[0.75, 1.33], area_range=[0.08, 1.0],
            max_attempts=10, use_image_if_no_bounding_boxes=True)
        image = tf.slice(tf.image.decode_jpeg(data, channels=3), begin, size)
        image = tf.image.resize(image, [224, 224], method="bicubic")
        image = image * tf.random.uniform([], 0.6, 1.4)
        image = tf.image.random_contrast(image, 0.6, 1.4)
        grey = tf.image.rgb_to_grayscale(image)
        alpha = tf.random.uniform([], 0.6, 1.4)
        image = image * alpha + grey * (1 - alpha)
        image = image + tf.linalg.matvec(EIGVEC, tf.random.normal([3], stddev=0.1) * EIGVAL)
        image = tf.image.random_flip_left_right(image)
        return tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8), label

    ds = tf.data.Dataset.from_tensor_slices((files, labels)).shuffle(len(files)).repeat()
    ds = ds.map(train_map, num_parallel_calls=tf.data.AUTOTUNE).batch(batch, drop_remainder=True)
    ds = ds.prefetch(tf.data.AUTOTUNE)
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
    from towerpack.dataflow.fbresnet import fbresnet_augmentor

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


def ours(lmdb: str, workers: int, warmup: int, count: int) -> float:
    with image_lmdb_dataflow(lmdb, fbresnet_augmentor(True), BATCH, workers) as df:
        df.reset_state()
        it = iter_forever(df)
        for _ in range(warmup):
            next(it)
        start = time.perf_counter()
        for _ in range(count):
            next(it)
        return count * BATCH / (time.perf_counter() - start)


def iter_forever(df):
    while True:
        yield from df


def tfdata(files: list, warmup: int, count: int) -> float:
    paths, labels = [p for p, _ in files], [int(label) for _, label in files]
    arg = json.dumps([paths, labels, BATCH, warmup, count])
    proc = subprocess.run([sys.executable, "-c", TFDATA, arg], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"tf.data baseline failed:\n{proc.stderr[-3000:]}")
    return float(proc.stdout.split()[-1])


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


def result(case: str, ours_value: float, baseline: float, unit: str, goal: str) -> None:
    ratio = ours_value / baseline if baseline else float("nan")
    record = {
        "benchmark": "image_pipeline",
        "case": case,
        "ours": round(ours_value, 3),
        "baseline": round(baseline, 3),
        "unit": unit,
        "ratio": round(ratio, 3),
        "goal": goal,
    }
    print("RESULT " + json.dumps(record), flush=True)


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

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        written = write_ilsvrc12(
            os.path.join(tmp, "ilsvrc"), num_classes=16, train_per_class=n_images // 16, num_val=0,
            num_test=0, imagenet_like=True,
        )  # fmt: skip
        lmdb = os.path.join(tmp, "train.lmdb")
        pack_imagenet(written.root, "train", lmdb, meta_dir=written.meta_dir, progress=False)
        size_mb = os.path.getsize(lmdb) / 2**20
        print(f"{n_images} JPEGs of ~500x375 ({size_mb:.0f} MB packed) in {time.perf_counter() - t0:.1f} s")

        best = {"ours-1": 0.0, "ours-2": 0.0, "tf.data": 0.0}
        for trial in range(trials):
            best["tf.data"] = max(best["tf.data"], tfdata(written.files["train"], warmup, count))
            for w in (1, 2):
                best[f"ours-{w}"] = max(best[f"ours-{w}"], ours(lmdb, w, warmup, count))
            print(
                f"trial {trial + 1}: " + ", ".join(f"{k} {v:.0f} img/s" for k, v in best.items()), flush=True
            )

    fork_first, fork_uss = workers_startup("fork")
    spawn_first, spawn_uss = workers_startup("spawn")

    print(f"\n{'case':<32}{'images/s':>10}")
    for k, v in best.items():
        print(f"{k:<32}{v:>10.0f}")
    print(f"\n{'workers under TensorFlow':<32}{'first dp s':>12}{'USS MB':>10}")
    print(f"{'forked (ours)':<32}{fork_first:>12.3f}{fork_uss:>10.1f}")
    print(f"{'spawned':<32}{spawn_first:>12.3f}{spawn_uss:>10.1f}")

    for w in (1, 2):
        goal = f">= {GOAL_THROUGHPUT}" if w == 2 else "reported"
        result(
            f"fbresnet train, {w} worker(s) vs tf.data", best[f"ours-{w}"], best["tf.data"], "images/s", goal
        )
    result(
        "worker start: first datapoint (fork vs spawn)",
        fork_first,
        spawn_first,
        "s",
        f"ours <= {GOAL_START_S}",
    )
    result("worker private memory (fork vs spawn)", fork_uss, spawn_uss, "MB", f"ours <= {GOAL_USS_MB}")


if __name__ == "__main__":
    main()
