"""Test-wide guards: every test runs with a process tag and fails if it leaves a process alive."""

from __future__ import annotations

import os
import uuid

import pytest

from support.procs import TAG_VAR, describe, kill_all, tagged_processes, wait_gone

# Grace for processes that are already on their way out when the test body returns.
LEFTOVER_GRACE_S = 3.0


@pytest.fixture(autouse=True)
def no_leftover_processes(request):
    """Tag the test's environment; after the test, any process still carrying the tag is a leak."""
    tag = f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"
    old = os.environ.get(TAG_VAR)
    os.environ[TAG_VAR] = tag
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(TAG_VAR, None)
        else:
            os.environ[TAG_VAR] = old
    left = tagged_processes(tag)
    if left:
        left = wait_gone(left, LEFTOVER_GRACE_S)
    if left:
        msg = describe(left)
        kill_all(left)
        pytest.fail(f"test left {len(left)} process(es) running:\n{msg}", pytrace=False)


@pytest.fixture
def horovod_required():
    """Horovod must be importable. Outside CI a build with HOROVOD=0 skips; in CI it is a failure."""
    import importlib.util

    if importlib.util.find_spec("horovod") is not None:
        return
    msg = "Horovod is not installed (run `make setup`; HOROVOD=0 skips building it)"
    if os.environ.get("CI"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def reference_wheel():
    """The reference's (tensorpack 0.11) wheel that `make test` puts in .cache/reference/, read as data.
    Missing: a failure in CI, a skip elsewhere."""
    from pathlib import Path

    path = (
        Path(__file__).resolve().parents[1] / ".cache" / "reference" / "tensorpack-0.11-py2.py3-none-any.whl"
    )
    if path.is_file():
        return path
    msg = f"the reference wheel is missing: {path} (`make test` downloads it)"
    if os.environ.get("CI"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)
