"""towerpack.utils.logger: the towerpack logger on stderr, its log directory and file, and who installs it."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import pexpect
import pytest

from towerpack.utils import logger

PREFIX = r"\[\d{4} \d\d:\d\d:\d\d [^\]]+:\d+\] "


@pytest.fixture
def fresh_logdir():
    """Leaves no log directory (and no open log file) behind."""
    yield
    logger.unset_logger_dir()


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_messages_go_to_stderr_with_a_prefix_and_child_loggers_share_the_handler():
    done = run_python(
        "import logging\n"
        "from towerpack.utils import logger\n"
        "logger.info('hello %d', 3)\n"
        "logger.warn('careful')\n"
        "logging.getLogger('towerpack.trainer.callbacks').warning('from the trainer')\n"
        "logging.getLogger('towerpack.dataflow.pipeline.printing').info('from the dataflow')\n"
        "logging.getLogger('elsewhere').info('not ours')\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 4, lines
    assert re.fullmatch(PREFIX + "INFO hello 3", lines[0])
    assert re.fullmatch(PREFIX + "WARNING careful", lines[1])
    assert re.fullmatch(PREFIX + "WARNING from the trainer", lines[2])
    assert re.fullmatch(PREFIX + "INFO from the dataflow", lines[3])


def test_importing_the_dataflow_or_other_utils_installs_no_handler():
    """Only importing the logger itself sets up logging; a dataflow process keeps plain loggers."""
    done = run_python(
        "import logging\n"
        "import towerpack.dataflow, towerpack.utils.fs, towerpack.utils.viz, towerpack.utils.argtools\n"
        "import towerpack.utils\n"
        "print(len(logging.getLogger('towerpack').handlers))\n"
        "logging.getLogger('towerpack.dataflow.x').info('invisible')\n"
        "from towerpack.utils import logger\n"
        "print(len(logging.getLogger('towerpack').handlers))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"]
    assert "invisible" not in done.stderr


def test_set_logger_dir_writes_every_towerpack_record_to_log_log(tmp_path, fresh_logdir):
    d = tmp_path / "run"
    assert logger.set_logger_dir(d) == str(d)
    assert logger.get_logger_dir() == logger.LOG_DIR == str(d)
    logger.info("one")
    logging.getLogger("towerpack.trainer.callbacks").warning("two")
    logging.getLogger("towerpack.utils.fs").info("three")
    text = (d / "log.log").read_text()
    assert f"Log directory: {d}" in text and "Argv: " in text
    for line in ("INFO one", "WARNING two", "INFO three"):
        assert re.search(PREFIX + line + "$", text, re.M), text
    logger.unset_logger_dir()
    logger.info("after")
    assert "after" not in (d / "log.log").read_text()
    assert logger.get_logger_dir() is None


def test_a_nonempty_directory_needs_an_action_and_never_prompts(tmp_path, fresh_logdir):
    d = tmp_path / "run"
    d.mkdir()
    (d / "model-1.index").write_text("x")
    with pytest.raises(FileExistsError, match=r"action=.*'k' = keep"):
        logger.set_logger_dir(d)
    with pytest.raises(FileExistsError):
        logger.set_logger_dir(d, action=logger.DirAction.QUIT)
    # keep: appends to the log of the earlier run
    logger.set_logger_dir(d, action="k")
    logger.info("first run")
    logger.set_logger_dir(d, action="keep")
    logger.info("second run")
    text = (d / "log.log").read_text()
    assert text.index("first run") < text.index("second run")
    # new: a fresh sibling directory; backup: the old one moves aside
    new = logger.set_logger_dir(d, action="n")
    assert new.startswith(str(d) + "-") and os.path.isdir(new) and (d / "model-1.index").exists()
    logger.set_logger_dir(d, action="B")
    assert sorted(os.listdir(d)) == ["log.log"]
    backups = [p for p in tmp_path.iterdir() if p.name.startswith("run-") and (p / "model-1.index").exists()]
    assert len(backups) == 1
    (d / "extra").write_text("y")
    logger.set_logger_dir(d, action="d")
    assert sorted(os.listdir(d)) == ["log.log"]
    with pytest.raises(ValueError, match="unknown logger dir action 'z'"):
        logger.set_logger_dir(d, action="z")
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        logger.set_logger_dir(tmp_path / "file")


def test_auto_set_dir_is_named_after_the_script(tmp_path):
    script = tmp_path / "train-mnist.py"
    script.write_text(
        "from towerpack.utils import logger\n"
        "print(logger.auto_set_dir())\n"
        "print(logger.auto_set_dir(action='k', name='lr0.1'))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["train_log/train-mnist", "train_log/train-mnist:lr0.1"]
    assert (tmp_path / "train_log" / "train-mnist:lr0.1" / "log.log").exists()


def test_level_and_filters_are_the_loggers():
    seen = []
    only_keep = logging.Filter()
    only_keep.filter = lambda record: seen.append(record.getMessage()) or "keep" in record.getMessage()
    logger.addFilter(only_keep)
    try:
        with pytest.raises(AssertionError), _assert_logs():  # fails: nothing passes the filter
            logger.warn("drop this")
        with _assert_logs() as cm:
            logger.warning("keep this")
        assert cm.output == ["WARNING:towerpack:keep this"]
        logger.setLevel(logging.ERROR)
        logger.warn("below the level")
        assert "below the level" not in seen
    finally:
        logger.setLevel(logging.INFO)
        logger.LOGGER.removeFilter(only_keep)


def _assert_logs():
    import unittest

    return unittest.TestCase().assertLogs(logger=logger._logger, level="WARNING")


def test_without_an_action_the_environment_decides_then_a_terminal_is_asked(
    tmp_path, fresh_logdir, monkeypatch
):
    d = tmp_path / "run"
    d.mkdir()
    (d / "model-1.index").write_text("x")
    monkeypatch.setenv(logger.ACTION_VAR, "k")
    assert logger.set_logger_dir(d) == str(d)
    assert (d / "model-1.index").exists()
    monkeypatch.setenv(logger.ACTION_VAR, "q")
    with pytest.raises(FileExistsError, match=logger.ACTION_VAR):
        logger.set_logger_dir(d)


@pytest.mark.timeout(60)
def test_on_a_terminal_the_user_is_asked_until_the_answer_is_an_action(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "model-1.index").write_text("x")
    code = f"from towerpack.utils import logger; print('used', logger.set_logger_dir({str(d)!r}))"
    env = {k: v for k, v in os.environ.items() if k != logger.ACTION_VAR}
    child = pexpect.spawn(sys.executable, ["-c", code], env=env, encoding="utf-8", timeout=30)
    try:
        child.expect(r"exists and is not empty")
        child.expect(r"Action \[k/b/d/n/q\]: ")
        child.sendline("maybe")  # not an action: asked again
        child.expect(r"Action \[k/b/d/n/q\]: ")
        child.sendline("d")
        child.expect(r"used " + re.escape(str(d)))
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert sorted(os.listdir(d)) == ["log.log"]  # deleted, as answered


def test_other_ranks_use_the_directory_as_rank_0_leaves_it(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "model-1.index").write_text("x")
    code = (
        "from towerpack.utils import logger\n"
        f"print(logger.set_logger_dir({str(d)!r}, action='d'))\n"
        "print(logger.get_logger_dir())\n"
    )
    done = run_python(code, RANK="1", WORLD_SIZE="2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(d), str(d)]
    assert sorted(os.listdir(d)) == ["model-1.index"]  # nothing deleted, no log file of rank 1's
    assert "rank 0 keeps it and its log file; rank 1 writes none there" in done.stderr
