"""Checks the TensorFlow names a port leaves against the installed TensorFlow, and words the findings.

tf.contrib, tf.estimator and tf.keras have fixed answers (removed.py). Every other name is looked
up in TensorFlow itself, imported here on first need (a few seconds, once per run): a name TF 2.21
dropped even from ``tf.compat.v1`` is reported. ``tf.compat.v1.layers`` and ``nn.rnn_cell`` exist
only with tf-keras and TF_USE_LEGACY_KERAS=1 (which towerpack.trainer sets where tf-keras is
installed); whether a name exists there is asked of a child interpreter started with that variable.
Without TensorFlow, only the fixed answers are given.
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from types import ModuleType

from ..findings import Finding, Kind
from .names import TFName, TFUse
from .removed import LAYERS_ADVICE, LEGACY_KERAS_ADVICE, contrib_advice, gone_advice, needs_legacy_keras

LEGACY_CHECK_TIMEOUT_S = 300
SHOWN_LINES = 8  # later uses of a name listed in its finding
NOT_CHECKED = (
    "TensorFlow is not installed here: only tf.contrib, tf.estimator, tf.keras, tf.layers and "
    "tf.nn.rnn_cell uses were looked for, not the rest of the TF 1 API"
)


class Availability(enum.Enum):
    PRESENT = "present"
    MISSING = "missing"
    KERAS_2_ONLY = "only with tf-keras and TF_USE_LEGACY_KERAS=1"
    UNCHECKED = "TensorFlow is not installed"


class _Keras3(Exception):
    """TensorFlow's Keras 3 loader refused the name: it belongs to Keras 2."""


def tensorflow() -> ModuleType | None:
    """TensorFlow, imported without its start-up log lines; None when it cannot be imported."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        with _quiet_stderr():
            return importlib.import_module("tensorflow")
    except ImportError:
        return None


@contextlib.contextmanager
def _quiet_stderr():
    """Send file descriptor 2 to /dev/null: TensorFlow's C++ start-up lines ignore TF_CPP_MIN_LOG_LEVEL."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def tf_keras_installed() -> bool:
    try:
        return importlib.util.find_spec("tf_keras") is not None
    except ValueError:  # a module blocked in sys.modules
        return False


def resolve(name: TFName) -> object:
    """The object ``name`` denotes, as the code would reach it; raises when it does not exist."""
    obj = importlib.import_module(name.module)
    for i, attribute in enumerate(name.attributes):
        try:
            obj = getattr(obj, attribute)
        except AttributeError as e:
            if "Keras 3" in str(e):
                raise _Keras3 from e
            if not (i == 0 and name.from_import):
                raise
            obj = importlib.import_module(f"{name.module}.{attribute}")
        if type(obj).__name__ == "KerasLazyLoader" and i == len(name.attributes) - 1:
            obj = _touch(obj)
    return obj


def _touch(loader: object) -> object:
    """A Keras lazy loader stands for a module it loads on first use: with Keras 3 that module is
    often missing (tf.compat.v1.layers). Reading its ``__name__`` loads nothing; ``dir`` loads it."""
    if str(getattr(loader, "__name__", "")).startswith("tf_keras"):
        return loader
    try:
        dir(loader)
    except (ImportError, AttributeError) as e:
        raise _Keras3 from e
    return loader


def _from_tf_keras(obj: object) -> bool:
    module = obj.__name__ if isinstance(obj, ModuleType) else getattr(obj, "__module__", None)
    return isinstance(module, str) and module.startswith("tf_keras")


def exists(name: TFName) -> bool:
    try:
        resolve(name)
    except Exception:
        return False
    return True


def availability(names: Iterable[TFName]) -> dict[TFName, Availability]:
    """How each name fares with the TensorFlow installed here."""
    names = set(names)
    if not names:
        return {}
    if tensorflow() is None:
        return dict.fromkeys(names, Availability.UNCHECKED)
    found: dict[TFName, Availability] = {}
    refused: list[TFName] = []
    for name in sorted(names, key=lambda n: n.dotted):
        try:
            obj = resolve(name)
        except _Keras3:
            refused.append(name)
            continue
        except Exception:
            found[name] = Availability.MISSING
            continue
        found[name] = Availability.KERAS_2_ONLY if _from_tf_keras(obj) else Availability.PRESENT
    if refused:
        legacy = _in_legacy_keras(refused)
        for name in refused:
            found[name] = Availability.KERAS_2_ONLY if legacy.get(name, True) else Availability.MISSING
    return found


def _in_legacy_keras(names: list[TFName]) -> dict[TFName, bool]:
    """Whether each name exists with TF_USE_LEGACY_KERAS=1, asked of a child interpreter (the variable
    counts only before TensorFlow is imported); {} when tf-keras is not installed to ask."""
    if not tf_keras_installed():
        return {}
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
    request = json.dumps([[n.module, list(n.attributes), n.from_import] for n in names])
    code = "from towerpack.port.tf1.api import legacy_check_main; legacy_check_main()"
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=request,
            capture_output=True,
            text=True,
            env=env,
            timeout=LEGACY_CHECK_TIMEOUT_S,
            check=True,
        )
        answers = json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return {}
    return dict(zip(names, answers, strict=True))


def legacy_check_main() -> None:
    """In the child: read names as JSON from stdin, print whether each exists."""
    tensorflow()
    names = [TFName(m, tuple(a), f) for m, a, f in json.loads(sys.stdin.read())]
    print(json.dumps([exists(n) for n in names]))


def needs_lookup(name: TFName) -> bool:
    """Whether the answer for ``name`` depends on the installed TensorFlow."""
    api = name.api()
    if api is None:
        return True
    return bool(api[1]) and contrib_advice(api[1]) is None and gone_advice(api[1]) is None


def findings(path: str, uses: list[TFUse], checked: dict[TFName, Availability]) -> list[Finding]:
    """One finding per TensorFlow name of a file that needs a person, at its first use (later lines
    are listed in the message)."""
    first: dict[tuple[Kind, str], tuple[int, str, list[int]]] = {}
    for use in sorted(uses, key=lambda u: u.line):
        found = _finding(use, checked.get(use.name, Availability.PRESENT))
        if found is None:
            continue
        kind, message = found
        key = (kind, message)
        if key in first:
            first[key][2].append(use.line)
        else:
            first[key] = (use.line, message, [])
    out = []
    for (kind, _), (line, message, more) in first.items():
        later = sorted(set(more) - {line})
        if later:
            shown = ", ".join(map(str, later[:SHOWN_LINES]))
            rest = f" and {len(later) - SHOWN_LINES} more" if len(later) > SHOWN_LINES else ""
            message += f" (also line{'s' if len(later) > 1 else ''} {shown}{rest})"
        out.append(Finding(path, line, kind, message))
    return out


def _finding(use: TFUse, state: Availability) -> tuple[Kind, str] | None:
    name, written = use.name, use.written
    api = name.api()
    if api is None:
        if state is not Availability.MISSING:
            return None
        if name.module.split(".")[0] != "tf_keras":
            return Kind.TF_REMOVED, f"`{written}` cannot be imported with {_version()}"
        if tf_keras_installed():
            return Kind.TF_REMOVED, f"`{written}` is not in tf-keras"
        return Kind.TF_LEGACY_KERAS, (
            f"`{written}`: tf-keras is not installed (next to tensorflow-cpu: "
            "pip install --no-deps 'tf-keras==2.21.*')"
        )
    which, path = api
    advice = contrib_advice(path)
    if advice is not None:
        return Kind.TF_CONTRIB, f"`{written}`: {advice}"
    advice = gone_advice(path)
    if advice is not None:
        if path.split(".")[0] != "keras":
            return Kind.TF_REMOVED, f"`{written}`: {advice}"
        if not tf_keras_installed():  # else towerpack.trainer makes tf.keras Keras 2
            return Kind.TF_KERAS, f"`{written}`: {advice}"
        return None
    legacy = which == "v1" and needs_legacy_keras(path)
    full = f"tf.compat.v1.{path}" if which == "v1" else f"tensorflow.{path}"
    shown = f"`{written}`" + ("" if written == full else f" ({full})")
    if legacy and state is Availability.MISSING:
        return Kind.TF_REMOVED, f"{shown} does not exist in {_version()}, not even with tf-keras"
    if legacy or state is Availability.KERAS_2_ONLY:
        if state is Availability.PRESENT or tf_keras_installed():
            return None  # towerpack.trainer turns Keras 2 on where tf-keras is installed
        extra = f"; {LAYERS_ADVICE}" if path.split(".")[0] == "layers" else ""
        return Kind.TF_LEGACY_KERAS, f"{shown} {LEGACY_KERAS_ADVICE}{extra}"
    if state is Availability.MISSING:
        return Kind.TF_REMOVED, f"{shown} {_missing(which, path)}"
    return None


def _missing(which: str, path: str) -> str:
    """Why a name is missing, and where the other API of TensorFlow 2 has it, if it does."""
    parts = tuple(path.split("."))
    if which == "v1":
        if exists(TFName("tensorflow", parts)):
            return f"is not in {_version()}'s tf.compat.v1 (its TF 2 API has tf.{path})"
        return f"is gone from {_version()}, tf.compat.v1 included"
    if exists(TFName("tensorflow.compat.v1", parts)):
        return f"is not in {_version()}'s TF 2 API: use tf.compat.v1.{path}"
    return f"is gone from {_version()}, tf.compat.v1 included"


def _version() -> str:
    tf = sys.modules.get("tensorflow")
    return f"TensorFlow {getattr(tf, '__version__', '2')}"
