"""Start-method policy and the death signal, each checked in a fresh interpreter."""

import textwrap

import pytest

from support.procs import run_python

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(90)]


def test_fork_by_default_also_under_tensorflow_and_spawn_on_request():
    code = textwrap.dedent(
        """
        import sys, types
        from towerpack.dataflow.parallel.process import get_mp_context
        print(get_mp_context().get_start_method())
        sys.modules["tensorflow"] = types.ModuleType("tensorflow")
        print(get_mp_context().get_start_method())
        print(get_mp_context("spawn").get_start_method())
        """
    )
    out = run_python(code, env={"TOWERPACK_DATAFLOW_START_METHOD": ""}).stdout.split()
    assert out == ["fork", "fork", "spawn"]


@pytest.mark.slow
def test_workers_of_a_tensorflow_process_are_lean():
    """Under a script that imported the trainer and ran a session, workers are forked (a lambda
    dataflow needs no pickling) and share the parent's memory even after a full collection in
    the worker, which walks every object it can see (a spawned worker holds about 260 MB, an
    unfrozen forked one about 100 MB)."""
    code = textwrap.dedent(
        """
        import gc, os, sys
        import numpy as np, psutil
        import towerpack.trainer
        import tensorflow.compat.v1 as tf
        with tf.Graph().as_default(), tf.Session() as sess:
            sess.run(tf.reduce_sum(tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]))))
        from towerpack.dataflow import DataFromList, MapData, MultiProcessRunnerZMQ

        def work(dp):
            gc.collect()
            return [np.int64(os.getpid()), np.int64("tensorflow" in sys.modules)]

        df = MultiProcessRunnerZMQ(MapData(DataFromList([[i] for i in range(40)], shuffle=False), work), 2)
        df.reset_state()
        pids = set()
        for _ in range(20):  # epochs of 40, until both workers have answered
            pids.update(int(pid) for pid, _ in df)
            if len(pids) == 2:
                break
        uss = max(psutil.Process(p).memory_full_info().uss for p in df.worker_pids)
        print(len(pids), round(uss / 2**20))
        df.close()
        """
    )
    workers, uss_mb = map(int, run_python(code, timeout=80).stdout.split()[-2:])
    assert workers == 2
    assert uss_mb < 40, f"a worker holds {uss_mb} MB of private memory"


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_run_opencv_on_one_thread_and_the_parent_keeps_its_threads(method, tmp_path):
    """N workers each with OpenCV's thread pool would oversubscribe the cores. A forked child must
    not resize the pool it inherited (it hangs), so the parent does it around the fork."""
    code = textwrap.dedent(
        f"""
        import cv2, numpy as np
        from towerpack.dataflow import DataFromList, MapData, MultiProcessRunnerZMQ

        def work(dp):
            big = cv2.resize(np.zeros((300, 400, 3), np.uint8), (1600, 1200), interpolation=cv2.INTER_CUBIC)
            return [np.int64(cv2.getNumThreads()), np.int64(big.shape[0])]

        if __name__ == "__main__":
            cv2.setNumThreads(2)
            work(None)  # the parent's pool is running
            df = MultiProcessRunnerZMQ(MapData(DataFromList([[i] for i in range(8)], shuffle=False), work), 2,
                                       start_method={method!r})
            df.reset_state()
            print(sorted({{int(t) for t, _ in df}}), cv2.getNumThreads(), int(work(None)[1]))
            df.close()
        """
    )
    script = tmp_path / "opencv_workers.py"  # spawned workers import the script's functions from it
    script.write_text(code)
    out = run_python(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')", timeout=60)
    assert out.stdout.split()[-3:] == ["[1]", "2", "1200"]


def test_spawn_workers_run_picklable_dataflows_and_explain_unpicklable_ones():
    code = textwrap.dedent(
        """
        import numpy as np
        from towerpack.dataflow import FakeData, MapData, MultiProcessRunnerZMQ
        if __name__ == "__main__":
            fake = FakeData([[3]], size=4, random=False)
            df = MultiProcessRunnerZMQ(fake, num_proc=2, start_method="spawn")
            df.reset_state()
            print(len(list(df)))
            df.close()
            bad = MultiProcessRunnerZMQ(MapData(FakeData([[3]], 4), lambda dp: dp), start_method="spawn")
            try:
                bad.reset_state()
            except RuntimeError as e:
                print("refused:", e)
        """
    )
    out = run_python(code, timeout=60).stdout
    assert out.splitlines()[0] == "4"
    assert "refused:" in out and "cannot be pickled" in out and "start_method='fork'" in out


def test_death_signal_is_armed_in_workers():
    code = textwrap.dedent(
        """
        import ctypes, signal
        from towerpack.dataflow.parallel.process import enable_death_signal
        assert enable_death_signal(signal.SIGTERM)
        value = ctypes.c_int()
        libc = ctypes.CDLL(None)
        assert libc.prctl(2, ctypes.byref(value), 0, 0, 0) == 0  # PR_GET_PDEATHSIG
        print(value.value)
        """
    )
    assert run_python(code).stdout.strip() == str(15)


def test_the_package_never_imports_tensorflow():
    code = "import sys, towerpack.dataflow, towerpack.dataflow.cli; print('tensorflow' in sys.modules)"
    assert run_python(code).stdout.strip() == "False"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_outlive_a_schedulers_signals_and_stop_when_their_parent_says(method):
    """Slurm signals every process of a job step (scancel --signal, SIGTERM at a time limit): the
    workers must keep feeding the training process, which decides when they stop."""
    code = textwrap.dedent(
        f"""
        import os, signal, time
        from towerpack.dataflow import DataFromList, MultiProcessRunnerZMQ, ShardData

        ds = ShardData(DataFromList([[i] for i in range(4000)], shuffle=False))
        df = MultiProcessRunnerZMQ(ds, num_proc=2, start_method={method!r})
        df.reset_state()
        got = []
        for i, dp in enumerate(df):
            got.append(int(dp[0]))
            if i == 20:
                time.sleep(0.5)  # the workers are running (blocked on a full queue)
                for pid in df.worker_pids:
                    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
                        os.kill(pid, sig)
            if len(got) == 4000:
                break
        assert sorted(got) == list(range(4000)), len(got)
        t0 = time.monotonic()
        df.close()
        took = time.monotonic() - t0
        print("stopped", took < 2.5)
        """
    )
    out = run_python(code, timeout=50)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "stopped True" in out.stdout, out.stdout
