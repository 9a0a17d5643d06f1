"""InjectShell opens a real IPython or pdb session inside a training process while its file exists."""

from __future__ import annotations

import subprocess
import sys

import pytest

from towerpack.trainer import InjectShell

SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer import InjectShell, SimpleTrainer, TrainConfig, launch_train_with_config

x, label = blobs(64)
config = TrainConfig(
    model=SoftmaxClassifier(),
    dataflow=ArrayBatches(x, label, batch_size=16),
    callbacks=[InjectShell(sys.argv[2]), InjectShell(sys.argv[3], shell="pdb")],
    monitors=[],
    steps_per_epoch=3,
    max_epoch=2,
)
launch_train_with_config(config, SimpleTrainer())
print("TRAINED")
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_shells_after_each_epoch_while_the_file_exists(request, tmp_path):
    ipython_flag, pdb_flag = tmp_path / "INJECT_SHELL.tmp", tmp_path / "PDB.tmp"
    ipython_flag.touch()
    pdb_flag.touch()
    # After epochs 1 and 2: an IPython shell, then a pdb one; each looks at the trainer and leaves.
    epoch = "print('ipython', trainer.global_step)\nexit\np ('pdb', trainer.global_step)\nc\n"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            str(request.config.rootpath / "tests"),
            str(ipython_flag),
            str(pdb_flag),
        ],
        input=epoch * 2,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert proc.returncode == 0, proc.stderr
    assert [
        line.split()[-2:] for line in proc.stdout.splitlines() if "ipython 3" in line or "ipython 6" in line
    ] == [
        ["ipython", "3"],
        ["ipython", "6"],
    ]
    assert "('pdb', 3)" in proc.stdout and "('pdb', 6)" in proc.stdout
    assert proc.stdout.rstrip().endswith("TRAINED")
    assert not ipython_flag.exists() and not pdb_flag.exists()  # deleted after training


def test_shell_choice_is_checked():
    with pytest.raises(ValueError, match="unknown shell 'bash'; choose one of 'ipython', 'pdb'"):
        InjectShell(shell="bash")
