"""towerpack.utils and towerpack.utils.utils: the star import, change_env, run-once, durations,
random generators and progress bars."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import subprocess
import sys
import termios

import pytest

import towerpack.utils
from towerpack.utils import utils
from towerpack.utils.progress import INTERVAL_VAR, LAUNCHED_VAR
from towerpack.utils.utils import (
    change_env,
    execute_only_once,
    find_library_full_path,
    get_tqdm,
    get_tqdm_kwargs,
    humanize_time_delta,
)


def test_star_import_gives_the_references_seven_names():
    names: dict = {}
    exec("from towerpack.utils import *", names)
    public = sorted(k for k in names if not k.startswith("__"))
    expected = ["change_env", "execute_only_once", "fix_rng_seed", "get_rng", "get_tqdm"]
    assert public == [*expected, "humanize_time_delta", "logger"]
    assert names["logger"] is towerpack.utils.logger and names["get_tqdm"] is get_tqdm
    # submodules are attributes as soon as they are asked for
    assert towerpack.utils.viz.stack_patches is towerpack.utils.viz.stack_patches
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        towerpack.utils.nothing  # noqa: B018


def test_change_env_restores_the_old_value_also_after_an_exception(monkeypatch):
    monkeypatch.setenv("TP_TEST_VAR", "old")
    monkeypatch.delenv("TP_TEST_UNSET", raising=False)
    with change_env("TP_TEST_VAR", "new"), change_env("TP_TEST_UNSET", 3):
        assert os.environ["TP_TEST_VAR"] == "new" and os.environ["TP_TEST_UNSET"] == "3"
    assert os.environ["TP_TEST_VAR"] == "old" and "TP_TEST_UNSET" not in os.environ
    with pytest.raises(KeyError), change_env("TP_TEST_VAR", None):
        assert "TP_TEST_VAR" not in os.environ
        raise KeyError("boom")
    assert os.environ["TP_TEST_VAR"] == "old"


def test_execute_only_once_is_per_line():
    first = [execute_only_once() for _ in range(3)]
    second = [execute_only_once() for _ in range(2)]
    assert first == [True, False, False] and second == [True, False]


@pytest.mark.parametrize(
    "sec, text",
    [
        (0, "0 seconds"),
        (0.01, "0.01 seconds"),
        (1, "1 second"),
        (42.125, "42.1 seconds"),
        (61, "1 minute 1 second"),
        (87.6, "1 minute 27 seconds"),
        (3600 + 1, "1 hour 1 second"),
        (86400 + 9 * 3600 + 2 * 60 + 3, "1 day 9 hours 2 minutes 3 seconds"),
        (2 * 86400, "2 days"),
    ],
)
def test_humanize_time_delta(sec, text):
    assert humanize_time_delta(sec) == text


def test_humanize_time_delta_keeps_the_largest_units_and_warns_on_negative(caplog):
    assert humanize_time_delta(86400 + 9 * 3600 + 2 * 60 + 3, max_units=2) == "1 day 9 hours"
    assert humanize_time_delta(-2.5) == "-2.5 seconds"
    assert "negative duration" in caplog.text


def draws(seed: str | None, **env: str) -> list[str]:
    """Two generators of get_rng in a new process: their first numbers."""
    code = (
        "from towerpack.utils import get_rng\n"
        "a, b = get_rng(object()), get_rng()\n"
        "print(a.randint(1 << 30), b.randint(1 << 30))\n"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("TOWERPACK_SEED", "RANK", "WORLD_SIZE")}
    if seed is not None:
        environ["TOWERPACK_SEED"] = seed
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**environ, **env}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_get_rng_streams_are_reproducible_with_a_seed_and_differ_by_call_and_rank():
    seeded = draws("7")
    assert draws("7") == seeded  # the same script and seed draw the same numbers
    assert seeded[0] != seeded[1]  # each call has its own stream
    assert draws("8") != seeded
    rank1 = draws("7", RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2")
    assert rank1 != draws("7", RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2")
    assert draws(None) != draws(None)  # no seed: fresh entropy


def test_fix_rng_seed_is_the_dataflows_and_seeds_get_rng(monkeypatch):
    import towerpack.dataflow

    assert utils.fix_rng_seed is towerpack.utils.fix_rng_seed is towerpack.dataflow.fix_rng_seed
    monkeypatch.delenv("TOWERPACK_SEED", raising=False)
    towerpack.utils.fix_rng_seed(11)
    assert os.environ["TOWERPACK_SEED"] == "11"
    towerpack.utils.fix_rng_seed(None)
    assert "TOWERPACK_SEED" not in os.environ


@pytest.fixture
def not_launched(monkeypatch):
    monkeypatch.delenv(LAUNCHED_VAR, raising=False)
    monkeypatch.delenv(INTERVAL_VAR, raising=False)
    monkeypatch.delenv(utils.REFRESH_VAR, raising=False)


def test_get_tqdm_writes_plain_lines_into_a_log(not_launched):
    log = io.StringIO()
    with get_tqdm(total=3, file=log, desc="epoch 1") as bar:
        bar.update(3)
    items = list(get_tqdm(range(5), "count", file=log))
    assert items == [0, 1, 2, 3, 4]
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0].startswith("epoch 1: 0/3 (0%)") and lines[1].startswith("epoch 1: 3/3 (100%)")
    assert lines[-1].startswith("count: 5/5 (100%)")
    with pytest.raises(TypeError, match="multiple values for desc"):
        get_tqdm(range(2), "a", desc="b", file=log)


def test_get_tqdm_draws_a_bar_on_a_terminal(not_launched):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # an 80-column terminal
    try:
        with os.fdopen(slave, "w") as terminal:
            assert get_tqdm_kwargs(file=terminal)["mininterval"] == utils.TERMINAL_REFRESH
            with get_tqdm(total=2, file=terminal, desc="job") as bar:
                bar.update(2)
        os.set_blocking(master, False)
        shown = os.read(master, 65536).decode()
    finally:
        os.close(master)
    final = shown.split("\r")[-2]  # a bar redrawn in place, ascii, as wide as the terminal
    assert final.startswith("job: 100%|####") and "| 2/2 [" in final and 70 < len(final) <= 80


def test_get_tqdm_kwargs_take_the_intervals_from_the_environment(not_launched, monkeypatch):
    log = io.StringIO()
    defaults = get_tqdm_kwargs(file=log)
    assert defaults["mininterval"] == 30.0 and defaults["smoothing"] == 0.5 and defaults["ascii"] is True
    monkeypatch.setenv(INTERVAL_VAR, "7")
    assert get_tqdm_kwargs(file=log)["mininterval"] == 7.0
    monkeypatch.setenv(utils.REFRESH_VAR, "2.5")
    assert get_tqdm_kwargs(file=log)["mininterval"] == 2.5
    assert get_tqdm_kwargs(file=log, mininterval=1, smoothing=0.1)["smoothing"] == 0.1
    monkeypatch.setenv(utils.REFRESH_VAR, "soon")
    with pytest.raises(ValueError, match="TENSORPACK_PROGRESS_REFRESH='soon'"):
        get_tqdm_kwargs(file=log)


def test_find_library_full_path_finds_a_loaded_library():
    path = find_library_full_path("c")  # libc is mapped into every process
    assert path is not None and os.path.isabs(path) and os.path.exists(path)
    assert find_library_full_path("no-such-library-anywhere") is None
