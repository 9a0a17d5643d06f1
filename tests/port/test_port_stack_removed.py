"""`towerpack port` on what SciPy, Pillow, OpenCV and Python removed since TensorFlow 1's days: exact
replacements rewritten (with the import they need), the rest reported at their line with what to
use; the table checked against the installed libraries."""

from __future__ import annotations

import builtins
import importlib
import subprocess
import sys
import textwrap
import warnings

import pytest

from towerpack.port.codemod import port_source, port_text
from towerpack.port.findings import Kind
from towerpack.port.stack.table import STACK, Status


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# (source, the ported source)
CASES = {
    "Pillow's removed resampling names": (
        """
        import PIL.Image
        from PIL import Image
        from PIL.Image import ANTIALIAS, NEAREST
        a = Image.open("x.png").resize((2, 2), Image.ANTIALIAS), Image.CUBIC, PIL.Image.LINEAR, ANTIALIAS
        """,
        """
        import PIL.Image
        from PIL import Image
        from PIL.Image import LANCZOS as ANTIALIAS, NEAREST
        a = Image.open("x.png").resize((2, 2), Image.LANCZOS), Image.BICUBIC, PIL.Image.BILINEAR, ANTIALIAS
        """,
    ),
    "collections' ABCs: the plain import gains collections.abc, a from-import moves": (
        """
        import collections
        from collections import Iterable, OrderedDict  # containers
        ok = isinstance([], collections.Mapping) or isinstance({}, collections.OrderedDict)
        """,
        """
        import collections
        import collections.abc
        from collections import OrderedDict  # containers
        from collections.abc import Iterable
        ok = isinstance([], collections.abc.Mapping) or isinstance({}, collections.OrderedDict)
        """,
    ),
    "scipy.misc's aliases of scipy.special and scipy.signal's windows": (
        """
        import scipy.misc
        from scipy import signal
        from scipy.misc import logsumexp
        from scipy.integrate import trapz
        b = trapz([1])
        a = scipy.misc.comb(5, 2), signal.hann(8), signal.medfilt([1.0]), logsumexp([1])
        """,
        """
        import scipy.misc
        from scipy import signal
        from scipy.special import logsumexp
        from scipy.integrate import trapezoid as trapz
        b = trapz([1])
        a = scipy.special.comb(5, 2), signal.windows.hann(8), signal.medfilt([1.0]), logsumexp([1])
        """,
    ),
    "behind a module alias, the replacement is written out with its import": (
        """
        import collections as C
        from scipy import misc
        x = C.Mapping, misc.comb(5, 2)
        """,
        """
        import collections as C
        import collections.abc
        from scipy import misc
        import scipy.special
        x = collections.abc.Mapping, scipy.special.comb(5, 2)
        """,
    ),
    "where the replacement's module name is taken, an alias stays; modules named alike stay": (
        """
        import collections as C
        from mylib import collections
        import base64
        x = C.Mapping, collections.Iterable, base64.encodestring(b"x")
        """,
        """
        import collections as C
        from mylib import collections
        import base64
        x = C.Mapping, collections.Iterable, base64.encodebytes(b"x")
        """,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rewrite(name):
    before, after = (src(text) for text in CASES[name])
    assert port_text(before) == after
    assert port_text(after) == after  # a second port changes nothing


REPORTED = src(
    """
    import inspect
    import time
    import collections as C
    from scipy import misc
    from scipy.misc import imread, imresize
    from scipy.interpolate import interp2d
    import scipy.misc
    import cv2


    def load(path, f):
        spec = inspect.getargspec(f)
        start = time.clock()
        image = imresize(misc.imread(path), (64, 64))
        grid = interp2d([0, 1], [0, 1], [[0, 1], [1, 2]])([0.5], [0.5])
        return scipy.misc.imsave("y.png", image), cv2.cv.CV_FOURCC(*"MJPG"), C.Iterable, spec, start, grid
    """
)


def test_names_without_an_exact_replacement_are_reported_at_their_line():
    found = [(f.line, f.kind, f.message) for f in port_source(REPORTED, "load.py").findings]
    assert {(line, kind) for line, kind, _ in found} == {
        (6, Kind.STACK_REMOVED),
        (13, Kind.STACK_REMOVED),
        (14, Kind.STACK_REMOVED),
        (15, Kind.STACK_REMOVED),
        (17, Kind.STACK_REMOVED),
    }  # the port added `import collections.abc` at line 4
    messages = {message.partition(" ")[0]: message for _, _, message in found}
    assert messages["`scipy.misc.imread`"].endswith(
        "was removed in SciPy 1.3; instead: imageio.v2.imread(path) from imageio (pip install imageio), "
        "or cv2.imread (BGR order)"
    )
    assert "`misc.imread`" in messages  # and the dotted use on line 15
    assert "`scipy.interpolate.interp2d`" not in messages  # rewritten: towerpack.utils keeps it
    assert "instead: inspect.getfullargspec" in messages["`inspect.getargspec`"]
    assert "instead: time.perf_counter" in messages["`time.clock`"]
    assert "`C.Iterable`" not in messages  # behind an alias, written out: collections.abc.Iterable
    assert messages["`cv2.cv.CV_FOURCC`"].startswith("`cv2.cv.CV_FOURCC` (cv2.cv) was removed in OpenCV 3;")
    assert "instead: imageio.v2.imwrite" in messages["`scipy.misc.imsave`"]
    assert sum(line == 6 for line, _, _ in found) == 2  # imread and imresize, on their import


def test_the_added_collections_abc_import_is_what_makes_the_port_run():
    """In a bare interpreter nothing imports collections.abc first: the added import is needed."""
    code = "import collections\nprint(isinstance([], collections.Iterable), isinstance({1}, collections.Set))"
    bare = [sys.executable, "-I", "-S", "-c"]
    old = subprocess.run([*bare, code], capture_output=True, text=True, timeout=60)
    assert old.returncode == 1 and "has no attribute 'Iterable'" in old.stderr
    new = subprocess.run([*bare, port_text(code)], capture_output=True, text=True, timeout=60)
    assert (new.returncode, new.stdout) == (0, "True True\n"), new.stderr
    assert port_text(code).startswith("import collections\nimport collections.abc\n")


def _resolve(path: str):
    """The object at a dotted path, importing modules along the way; AttributeError if it is not there."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = builtins if parts[0] == "builtins" else importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for part in parts[end:]:
            obj = getattr(obj, part)
        return obj
    raise AttributeError(path)


def _present(path: str) -> bool:
    try:
        _resolve(path)
    except AttributeError:
        return False
    return True


def test_the_table_matches_the_installed_libraries():
    """Removed names are absent (interp2d is a stub that raises), replacements exist, and the modules
    a replacement uses without an import of its own are reachable from their package."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path, removal in STACK.entries.items():
            assert _present(path) == (removal.status is Status.STUB), path
            if removal.new is not None:
                module, _, name = removal.new.partition(":")
                assert _present(f"{module}.{name}"), path
    with pytest.raises(NotImplementedError, match="interp2d"):
        _resolve("scipy.interpolate.interp2d")([0, 1], [0, 1], [[0, 1], [1, 2]])
    for module in sorted(STACK.attribute_modules):
        package = module.partition(".")[0]
        code = f"import {package}, types; assert isinstance({module}, types.ModuleType)"
        run = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, (module, run.stderr)


def test_interp2d_behind_a_module_alias_is_rewritten_to_the_drop_in_and_runs():
    """Mask pasting as TF 1 detectors wrote it: SciPy 1.14's interp2d raises; the ported code runs."""
    code = src(
        """
        import numpy as np
        from scipy import interpolate

        mask = np.pad(np.ones((4, 4)), 1)
        pixels = np.arange(0.0, 6.0) + 0.5
        paste = interpolate.interp2d(pixels, pixels, mask, fill_value=0.0)
        xs = (np.arange(0.0, 8.0) + 0.5 - 1.0) / 4.0 * 6.0
        print(int((paste(xs, xs) >= 0.5).sum()))
        """
    )
    ported = port_text(code)
    assert "towerpack.utils.interpolate.interp2d(pixels" in ported
    assert "import towerpack.utils.interpolate\n" in ported
    assert port_source(ported, "paste.py").findings == []
    assert port_text(ported) == ported
    old = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert old.returncode == 1 and "interp2d" in old.stderr
    new = subprocess.run([sys.executable, "-c", ported], capture_output=True, text=True, timeout=120)
    assert (new.returncode, new.stdout) == (0, "4\n"), new.stderr
