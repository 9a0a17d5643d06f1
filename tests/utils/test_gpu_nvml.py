"""towerpack.utils.gpu and towerpack.utils.nvml: where the GPU count comes from, CUDA_VISIBLE_DEVICES
as CUDA reads it, change_gpu, and NVML's error on a machine without an NVIDIA driver."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from towerpack.utils import gpu
from towerpack.utils.nvml import NVML_LIBRARY, NVMLContext, NvmlException


@pytest.mark.parametrize(
    "visible, physical, count",
    [
        (None, 4, 4),
        ("", 4, 0),  # an empty list hides every GPU (the reference counted all)
        ("-1", 4, 0),  # the reference counted one
        ("0,1", 4, 2),
        (" 2 , 0 ", 4, 2),
        ("1,5,2", 4, 1),  # read up to the first GPU that does not exist
        ("0,0", 4, 1),  # a repeat ends the list
        ("GPU-8a1b,MIG-2c3d/1/0", 4, 2),
        ("0,gpu0", 4, 1),
        ("3", 2, 0),
    ],
)
def test_visible_gpu_count_reads_cuda_visible_devices_as_cuda_does(visible, physical, count):
    assert gpu.visible_gpu_count(visible, physical) == count


FAKE_NVIDIA_SMI = """#!/bin/sh
[ "$1" = "-L" ] || exit 2
echo "GPU 0: Tesla T4 (UUID: GPU-0000)"
echo "GPU 1: Tesla T4 (UUID: GPU-0001)"
echo "  MIG 1g.5gb Device 0: (UUID: MIG-0001)"
echo "GPU 2: Tesla T4 (UUID: GPU-0002)"
"""


def count_in_a_new_process(tmp_path, code: str, visible: str | None) -> list[str]:
    """Run ``code`` where ``nvidia-smi -L`` lists 3 GPUs (a stand-in program first on PATH) and NVML
    has no driver library to load."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


NO_TF = (
    "import sys\n"
    "from towerpack.utils.gpu import get_num_gpu\n"
    "print(get_num_gpu(), 'tensorflow' in sys.modules)\n"
)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a real nvidia-smi")
def test_without_tensorflow_the_driver_is_asked_and_tensorflow_is_not_imported(tmp_path):
    assert count_in_a_new_process(tmp_path, NO_TF, None) == ["3", "False"]  # the MIG line is no GPU
    assert count_in_a_new_process(tmp_path, NO_TF, "2,0") == ["2", "False"]
    assert count_in_a_new_process(tmp_path, NO_TF, "") == ["0", "False"]


def test_with_tensorflow_imported_the_answer_is_what_tensorflow_can_use(tmp_path):
    code = (
        "import tensorflow as tf\n"
        "from towerpack.utils.gpu import get_num_gpu\n"
        "import towerpack.trainer.devices as devices\n"
        "seen = len(tf.config.list_physical_devices('GPU'))\n"
        "print(get_num_gpu(), seen, devices.get_num_gpu is get_num_gpu)\n"
    )
    n, tf_count, same = count_in_a_new_process(tmp_path, code, None)
    assert n == tf_count and same == "True"  # not the 3 GPUs nvidia-smi lists, unless TF sees them


def test_change_gpu_sets_and_restores_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with gpu.change_gpu(1):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    with gpu.change_gpu(-1):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
        assert gpu.visible_gpu_count(os.environ["CUDA_VISIBLE_DEVICES"], 2) == 0
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert gpu.get_nr_gpu is gpu.get_num_gpu


def test_nvml_context_reports_the_gpus_or_names_the_missing_driver_library():
    try:
        with NVMLContext() as ctx:
            count = ctx.num_devices()
            devices = ctx.devices()
            assert len(devices) == count
            for device in devices:
                memory = device.memory()
                assert memory["total"] >= memory["used"] > 0 and isinstance(device.name(), str)
                assert 0 <= device.utilization()["gpu"] <= 100
            with pytest.raises(IndexError, match=f"no GPU {count}"):
                ctx.device(count)
    except NvmlException as e:  # no NVIDIA driver here
        assert shutil.which("nvidia-smi") is None
        assert NVML_LIBRARY in str(e) and "no NVIDIA driver" in str(e) and e.code == 12
