"""Dataflow tests fork worker processes on purpose.

When the whole suite runs, the trainer tests import TensorFlow into this process at collection
time, which would switch the default start method to ``spawn`` (see towerpack.dataflow.process).
These tests use dataflows with lambdas and exercise forked workers, so they ask for ``fork``
explicitly; the default policy itself is tested in a fresh interpreter (test_process.py).
"""

import pytest

from towerpack.dataflow.process import START_METHOD_VAR


@pytest.fixture(autouse=True)
def _fork_workers(monkeypatch):
    monkeypatch.setenv(START_METHOD_VAR, "fork")
