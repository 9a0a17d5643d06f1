"""The ImageNet example (examples/imagenet) on a generated ImageNet-layout dataset in the original
format: one process reading the directory; two processes under the real `launch` reading an LMDB
made by `dataflow pack-images`; and the image pipeline benchmark's quick mode. (Its resume after a
pre-emption: test_examples_resume.py.)"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.image_datasets import write_ilsvrc12
from support.launcher_run import launch

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "imagenet" / "resnet.py")
BENCH = str(ROOT / "benchmarks" / "image_pipeline.py")
DATAFLOW = str(Path(sys.executable).with_name("dataflow"))
CLASSES = 4
#: 8 epochs of ResNet-10 at 64 px on 768 images of 4 classes: 0.48-0.61 in 5 runs (chance: 0.25).
SHORT_MODE_ACCURACY = 0.34

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def tiny_imagenet(tmp_path_factory):
    root = tmp_path_factory.mktemp("imagenet")
    return write_ilsvrc12(
        str(root / "ilsvrc"), num_classes=CLASSES, train_per_class=192, num_val=128, num_test=0
    )


def data_args(dataset) -> list[str]:
    return ["--data", dataset.root, "--meta-dir", dataset.meta_dir]


def run_example(cwd, *args, timeout=200) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, EXAMPLE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def accuracy(stdout: str) -> float:
    return float(re.search(r"validation top-1 accuracy: ([0-9.]+)", stdout).group(1))


@pytest.mark.timeout(300)
def test_trains_from_the_directory(tmp_path, tiny_imagenet):
    proc = run_example(tmp_path, "--short", "--epochs", "8", *data_args(tiny_imagenet))
    assert "Trained ResNet-10 (64 px) on 1 tower(s) for 8 epochs" in proc.stdout
    log = proc.stdout + proc.stderr
    assert re.search(r"Epoch 8 \(global_step 192\) finished, .*input wait \d+% of step time", log)
    logdir = tmp_path / "train_log" / "imagenet-resnet"
    stats = json.loads((logdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in stats if "val-error-top1" in r] == list(range(1, 9))
    assert all(0 <= r["input/wait_fraction"] <= 1 for r in stats if "input/wait_fraction" in r)
    assert accuracy(proc.stdout) >= SHORT_MODE_ACCURACY, proc.stdout[-2000:]

    import tensorflow as tf  # the checkpoint carries the reference's ResNet variable names

    names = {n for n, _ in tf.train.list_variables(str(logdir))}
    assert {"conv0/W", "conv0/bn/gamma", "group0/block0/conv1/W", "group3/block0/convshortcut/W"} <= names
    assert {"linear/W", "global_step"} <= names


@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(300)
def test_two_launched_processes_train_from_a_packed_lmdb(tmp_path, tiny_imagenet, horovod_required):
    lmdb = tmp_path / "train.lmdb"
    packed = subprocess.run(
        [DATAFLOW, "pack-images", tiny_imagenet.root, str(lmdb), "--meta-dir", tiny_imagenet.meta_dir],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert packed.returncode == 0, packed.stderr[-3000:]
    proc = launch(
        "--np", "2", EXAMPLE, "--short", *data_args(tiny_imagenet), "--lmdb", str(lmdb), "--workers", "1",
        cwd=tmp_path, timeout=280,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Trained ResNet-10 (64 px) on 2 process(es) for 6 epochs" in proc.stdout
    stats = json.loads((tmp_path / "train_log" / "imagenet-resnet" / "stats.json").read_text())
    # 768 images, 2 ranks of 16: each rank reads its half of every epoch from the LMDB.
    assert [r["global_step"] for r in stats if "val-error-top1" in r] == [24 * e for e in range(1, 7)]


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_image_pipeline_benchmark_quick_mode():
    proc = subprocess.run(
        [sys.executable, BENCH, "--quick", "--images", "64"], capture_output=True, text=True, timeout=280
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 4
    assert all(r["ours"] > 0 and r["baseline"] > 0 for r in results)
    memory = results[3]
    assert memory["case"].startswith("worker private memory") and memory["ours"] < memory["baseline"]
