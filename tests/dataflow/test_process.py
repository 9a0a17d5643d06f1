"""Start-method policy and the death signal, each checked in a fresh interpreter."""

import textwrap

import pytest

from support.procs import run_python

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(90)]


def test_fork_by_default_and_spawn_once_a_threaded_framework_is_imported():
    code = textwrap.dedent(
        """
        import sys, types
        from towerpack.dataflow.process import get_mp_context
        print(get_mp_context().get_start_method())
        sys.modules["tensorflow"] = types.ModuleType("tensorflow")
        print(get_mp_context().get_start_method())
        print(get_mp_context("fork").get_start_method())
        """
    )
    out = run_python(code, env={"TOWERPACK_DATAFLOW_START_METHOD": ""}).stdout.split()
    assert out == ["fork", "spawn", "fork"]


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
        from towerpack.dataflow.process import enable_death_signal
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
