"""`towerpack port` on NumPy's removed names: exact aliases rewritten only where the name provably is
NumPy's, the rest reported with their line; the table checked against the installed NumPy; and a
ported script that used `np.int`, `np.float`, `np.bool` as dtypes run for real."""

from __future__ import annotations

import builtins
import importlib
import subprocess
import sys
import textwrap
import warnings

import numpy
import pytest

from towerpack.port.codemod import port_source, port_text
from towerpack.port.findings import Kind
from towerpack.port.stack.numpy_table import NUMPY
from towerpack.port.stack.table import Status


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# (source, the ported source)
CASES = {
    "the builtin aliases become the builtins": (
        """
        import numpy as np
        a = np.zeros(3, dtype=np.int)
        b = a.astype(np.float), np.bool, np.object, np.str, np.long, np.unicode, np.complex
        ok = isinstance(1.0, np.float) and np.issubdtype(a.dtype, np.int)
        """,
        """
        import numpy as np
        a = np.zeros(3, dtype=int)
        b = a.astype(float), bool, object, str, int, str, complex
        ok = isinstance(1.0, float) and np.issubdtype(a.dtype, int)
        """,
    ),
    "NumPy 2.0's aliases, with the negation in parentheses where it is an operand": (
        """
        import numpy
        x = [numpy.float_(1), numpy.NaN, numpy.Inf, numpy.NINF, numpy.product([2]), numpy.round_(1.5)]
        y = 2 - numpy.NINF, numpy.NINF.real, numpy.string_, numpy.unicode_, numpy.PZERO
        try:
            pass
        except numpy.AxisError:
            pass
        """,
        """
        import numpy
        x = [numpy.float64(1), numpy.nan, numpy.inf, -numpy.inf, numpy.prod([2]), numpy.round(1.5)]
        y = 2 - (-numpy.inf), (-numpy.inf).real, numpy.bytes_, numpy.str_, 0.0
        try:
            pass
        except numpy.exceptions.AxisError:
            pass
        """,
    ),
    "from-imports keep their local name; a builtin's import goes; a moved name moves": (
        """
        from numpy import float_, int, NaN, zeros  # numbers
        from numpy import AxisError
        a = zeros(2, dtype=float_) + NaN
        """,
        """
        from numpy import float64 as float_, nan as NaN, zeros  # numbers
        from numpy.exceptions import AxisError
        a = zeros(2, dtype=float_) + NaN
        """,
    ),
    "a builtin's from-import goes, and np.int beside it becomes int in the same pass": (
        """
        from numpy import (
            float_,  # f
            int,
            zeros,  # z
        )
        import numpy as np
        x = int(3), np.int, zeros(2, dtype=float_)
        """,
        """
        from numpy import (
            float64 as float_,  # f
            zeros,  # z
        )
        import numpy as np
        x = int(3), int, zeros(2, dtype=float_)
        """,
    ),
    "np bound to something else is not NumPy": (
        """
        import jax.numpy as np
        from mylib import numpy
        x = np.float_(1), np.int, numpy.NaN
        """,
        """
        import jax.numpy as np
        from mylib import numpy
        x = np.float_(1), np.int, numpy.NaN
        """,
    ),
    "a parameter named np, a reassigned np and a rebound int are left alone": (
        """
        import numpy as np


        def f(np):
            return np.int


        def g(a):
            int = len(a)
            return np.int, np.float


        class C:
            np = None

            def m(self):
                return self.np.float_
        """,
        """
        import numpy as np


        def f(np):
            return np.int


        def g(a):
            int = len(a)
            return np.int, float


        class C:
            np = None

            def m(self):
                return self.np.float_
        """,
    ),
    "an np that may have been rebound by then is not rewritten; one that cannot have been is": (
        """
        import numpy as np
        x = np.int
        if x:
            np = None
        y = np.int
        """,
        """
        import numpy as np
        x = int
        if x:
            np = None
        y = np.int
        """,
    ),
    "names NumPy still has stay": (
        """
        import numpy as np
        x = np.int64, np.float32, np.bool_, np.inf, np.nan, np.prod, np.isin
        """,
        """
        import numpy as np
        x = np.int64, np.float32, np.bool_, np.inf, np.nan, np.prod, np.isin
        """,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rewrite(name):
    before, after = (src(text) for text in CASES[name])
    assert port_text(before) == after
    assert port_text(after) == after  # a second port changes nothing


def _found(code: str) -> list[tuple[int, Kind, str]]:
    return [(f.line, f.kind, f.message) for f in port_source(src(code), "m.py").findings]


def test_names_without_an_exact_replacement_are_reported_at_their_line():
    code = """
        import numpy as np
        from numpy import NINF, asfarray
        from numpy import int as npint, long


        def g(a):
            int = 3
            return np.asfarray(a), np.in1d(a, [int]), np.int


        b = np.float_(2.5), np.asscalar(np.ones(1))
        """
    found = _found(code)
    assert [(line, kind) for line, kind, _ in found] == [
        (2, Kind.NUMPY_REMOVED),
        (2, Kind.NUMPY_REMOVED),
        (3, Kind.NUMPY_REMOVED),
        (3, Kind.NUMPY_REMOVED),
        (8, Kind.NUMPY_REMOVED),
        (8, Kind.NUMPY_REMOVED),
        (8, Kind.NUMPY_REMOVED),
        (11, Kind.NUMPY_REMOVED),
    ]
    messages = "\n".join(message for _, _, message in found)
    assert "`numpy.NINF` was removed in NumPy 2.0; instead: -numpy.inf" in messages
    assert "`np.asfarray` (numpy.asfarray) was removed in NumPy 2.0; instead: np.asarray(" in messages
    assert "`np.in1d` (numpy.in1d) was removed in NumPy 2.4; instead: np.isin(a, b).ravel()" in messages
    assert "`np.int` (numpy.int) was removed in NumPy 1.24; instead: int" in messages  # int is rebound
    assert "`numpy.int` was removed in NumPy 1.24; instead: int" in messages  # from numpy import int as
    assert "`numpy.long` was removed in NumPy 1.24 and now names something else; instead: int" in messages
    assert "`np.asscalar` (numpy.asscalar) was removed in NumPy 1.23; instead: a.item()" in messages


def _resolve(path: str):
    module, _, name = path.partition(":")
    return getattr(builtins if module == "builtins" else importlib.import_module(module), name)


def test_the_table_matches_the_installed_numpy():
    """Every removed name is absent (or means something else now), every replacement exists, and the
    submodules used without an import of their own are reachable from `import numpy`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path, removal in NUMPY.entries.items():
            name = path.removeprefix("numpy.")
            present = hasattr(numpy, name)
            assert present == (removal.status is not Status.REMOVED), path
            if removal.new is None:
                continue
            new = removal.new.removeprefix("-")
            value = _resolve(new) if ":" in new else float(new)
            if removal.status is Status.REDEFINED:
                assert getattr(numpy, name) is not value, path
            if removal.status is Status.DEPRECATED:
                assert getattr(numpy, name)([[1], [2]]).tolist() == value([[1], [2]]).tolist(), path
    modules = sorted(NUMPY.attribute_modules)
    code = f"import numpy, types; print(all(isinstance(eval(m), types.ModuleType) for m in {modules!r}))"
    run = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"


SCRIPT = """
import numpy as np

a = np.arange(6).astype(np.float).reshape(2, 3)
mask = np.zeros(3, dtype=np.bool)
mask[1] = True
counts = np.array([1.7, 2.2]).astype(np.int)
kinds = np.array(["a", 1], dtype=np.object)
RESULT = (
    str(a.dtype), float(a.sum()), str(mask.dtype), mask.tolist(), counts.tolist(), str(counts.dtype),
    str(kinds.dtype), isinstance(3.0, np.float), str(np.float_(2).dtype), bool(np.NaN != np.NaN),
    int(np.product([2, 3])), float(-np.NINF), np.issubdtype(a.dtype, np.float),
)
"""


def test_a_ported_script_runs_under_the_installed_numpy_with_the_old_results():
    with pytest.raises(AttributeError, match=r"np\.float"):
        exec(compile(SCRIPT, "old.py", "exec"), {})
    ported = port_text(SCRIPT)
    namespace: dict = {}
    exec(compile(ported, "ported.py", "exec"), namespace)
    # What NumPy 1.19 gave: np.float was float (float64 arrays), np.int was int (int64 here), ...
    assert namespace["RESULT"] == (
        "float64", 15.0, "bool", [False, True, False], [1, 2], "int64",
        "object", True, "float64", True, 6, float("inf"), True,
    )  # fmt: skip
