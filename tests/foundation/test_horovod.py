"""Horovod is built with TensorFlow and Gloo, and a 2-process allreduce returns the average."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.horovod, pytest.mark.multiprocess]

RANK_SCRIPT = textwrap.dedent(
    """
    import tensorflow as tf
    import horovod.tensorflow as hvd

    tf.compat.v1.disable_eager_execution()
    hvd.init()
    value = tf.constant([float(hvd.rank() + 1), 10.0 * (hvd.rank() + 1)])
    mean = hvd.allreduce(value, op=hvd.Average)
    with tf.compat.v1.Session() as sess:
        print("RESULT", hvd.rank(), hvd.size(), *sess.run(mean).tolist(), flush=True)
    """
)


def test_horovod_tensorflow_imports_with_gloo(horovod_required):
    code = "import horovod.tensorflow as hvd; print(hvd.gloo_built(), hvd.mpi_built())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["True", "False"]


@pytest.mark.timeout(180)
def test_two_process_gloo_allreduce_with_horovodrun(horovod_required, tmp_path):
    script = tmp_path / "allreduce.py"
    script.write_text(RANK_SCRIPT)
    horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    env = dict(
        os.environ, TF_CPP_MIN_LOG_LEVEL="2", PATH=os.path.dirname(sys.executable) + ":" + os.environ["PATH"]
    )
    proc = subprocess.run(
        [horovodrun, "--gloo", "-np", "2", "-H", "localhost:2", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = sorted(
        line.split("RESULT", 1)[1].split() for line in proc.stdout.splitlines() if "RESULT" in line
    )
    # Ranks contribute [1, 10] and [2, 20]: the average is [1.5, 15] on both.
    assert results == [["0", "2", "1.5", "15.0"], ["1", "2", "1.5", "15.0"]]
