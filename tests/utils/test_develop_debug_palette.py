"""towerpack.utils.develop (stand-ins, deprecation, lazy modules), debug (call trace), palette, naming."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import types

import numpy as np
import pytest

from towerpack.utils import develop, naming
from towerpack.utils.palette import PALETTE_HEX, PALETTE_RGB


def test_dummies_name_the_missing_dependency():
    Missing = develop.create_dummy_class("LMDBData", "lmdb")
    with pytest.raises(ImportError, match="Cannot import 'lmdb', therefore 'LMDBData' is not available"):
        Missing("path")
    with pytest.raises(AttributeError, match="Cannot import 'lmdb'"):
        Missing.some_attribute  # noqa: B018
    func = develop.create_dummy_func("intensity_to_rgb", ["matplotlib", "pillow"])
    assert func.__name__ == "intensity_to_rgb"
    with pytest.raises(ImportError, match="Cannot import 'matplotlib,pillow', therefore 'intensity_to_rgb'"):
        func(1, x=2)


def test_building_rtfd(monkeypatch):
    monkeypatch.delenv("READTHEDOCS", raising=False)
    monkeypatch.delenv("DOC_BUILDING", raising=False)
    assert not develop.building_rtfd()
    monkeypatch.setenv("DOC_BUILDING", "1")
    assert develop.building_rtfd()


def test_log_deprecated_messages_and_limit(caplog):
    with caplog.at_level(logging.WARNING, logger="towerpack"):
        develop.log_deprecated("OldThing", "Use NewThing.", "2020-06-06")
        develop.log_deprecated("Gone", "Use Other.")
        develop.log_deprecated(text="A plain note.", eos="2021-01-31")
        for _ in range(4):
            develop.log_deprecated("Twice", max_num_warnings=2)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "[Deprecated] OldThing will be deprecated after 06 Jun. Use NewThing.",
        "[Deprecated] Gone was deprecated. Use Other.",
        "[Deprecated] A plain note. Legacy period ends after 31 Jan",
        "[Deprecated] Twice was deprecated.",
        "[Deprecated] Twice was deprecated.",
    ]
    with pytest.raises(ValueError, match="needs a name or a text"):
        develop.log_deprecated()


def test_deprecated_names_the_function_and_its_caller(caplog):
    @develop.deprecated("Call new() instead.")
    def old(x):
        return x + 1

    with caplog.at_level(logging.WARNING, logger="towerpack"):
        assert old(1) == 2
        line = sys._getframe().f_lineno - 1
    (message,) = [r.getMessage() for r in caplog.records]
    assert message == f"[Deprecated] old [{__file__}:{line}] was deprecated. Call new() instead."
    assert develop.HIDE_DOC(old).__HIDE_SPHINX_DOC__ is True


def test_lazy_loader_imports_on_first_use():
    code = (
        "import sys\n"
        "from towerpack.utils.develop import LazyLoader\n"
        "imgaug = LazyLoader('imgaug', globals(), 'towerpack.dataflow.imgaug')\n"
        "print('towerpack.dataflow.imgaug' in sys.modules)\n"
        "flip = imgaug.Flip\n"
        "print('towerpack.dataflow.imgaug' in sys.modules, type(globals()['imgaug']).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "module"]
    lazy = develop.LazyLoader("json_mod", {}, "json")
    assert isinstance(lazy, types.ModuleType) and "dumps" in dir(lazy)


def test_enable_call_trace_prints_calls_with_their_callers():
    code = (
        "from towerpack.utils.debug import enable_call_trace\n"
        "def inner():\n"
        "    return 1\n"
        "def outer():\n"
        "    return inner()\n"
        "enable_call_trace()\n"
        "outer()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Call to `outer` on line <string>:4 from <string>:7" in lines
    assert "Call to `inner` on line <string>:2 from <string>:5" in lines
    assert not any(re.search(r"`(write|print)`", line) for line in lines)


def test_palette_is_79_distinct_rgb_colours():
    assert PALETTE_RGB.shape == (79, 3) and PALETTE_RGB.dtype == np.float32
    assert PALETTE_RGB.min() >= 0 and PALETTE_RGB.max() <= 255
    assert len({tuple(c) for c in PALETTE_RGB}) == 79
    distance = np.sqrt(((PALETTE_RGB[:, None] - PALETTE_RGB[None]) ** 2).sum(-1))
    np.fill_diagonal(distance, np.inf)
    assert distance.min() > 15  # no two colours are hard to tell apart
    assert PALETTE_HEX[0] == "#{:02x}{:02x}{:02x}".format(*PALETTE_RGB[0].astype(int))
    with pytest.raises(ValueError):
        PALETTE_RGB[0, 0] = 1  # shared by every caller: read-only


def test_naming_constants_are_the_trainers():
    assert naming.GLOBAL_STEP_INCR_OP_NAME == "global_step_incr"
    assert naming.MOVING_SUMMARY_OPS_KEY == "MOVING_SUMMARY_OPS"
