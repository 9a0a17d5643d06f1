"""Each distribution imports without the others' heavy dependencies and declares exactly what it imports."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from support.procs import run_python

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dataflow", "trainer", "launcher")

# Imports a sub-process refuses, so a module that needs them fails loudly instead of loading them.
BLOCKER = """
import importlib.abc, pkgutil, sys

class Block(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in self.names or any(name.startswith(n + '.') or name == n for n in self.names):
            raise ImportError(f'{name} must not be imported here')
        return None

sys.meta_path.insert(0, Block(sys.argv[2].split(',')))
pkg = importlib.import_module(sys.argv[1])
for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):
    if not mod.name.endswith('__main__'):
        importlib.import_module(mod.name)
print('ok')
"""


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("towerpack.dataflow", "tensorflow,horovod,towerpack.trainer,towerpack.launcher"),
        ("towerpack.launcher", "tensorflow,horovod.tensorflow,towerpack.trainer,towerpack.dataflow,zmq"),
        ("towerpack.trainer", "towerpack.launcher"),
        ("towerpack.utils", "tensorflow,horovod,towerpack.trainer,towerpack.launcher"),
        # `towerpack port` starts fast: TensorFlow only when a report needs it, in a function.
        ("towerpack.port", "tensorflow,horovod,towerpack.trainer,towerpack.launcher"),
    ],
)
def test_package_and_all_modules_import_without_forbidden_dependencies(package, forbidden):
    code = "import importlib\n" + BLOCKER
    out = run_python(code, package, forbidden, timeout=120)
    assert out.stdout.strip().endswith("ok")


def _imported_top_levels(src: Path) -> set[str]:
    names = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return names


# towerpack packages shipped by a distribution not named after them (PEP 420 namespace).
SHIPPED_BY = {"utils": "towerpack-dataflow", "port": "towerpack-trainer"}
# Imported inside a function, with a clear error when missing, and not on PyPI (pycaffe).
NOT_ON_PYPI = {"caffe"}


def _distribution_of(module: str, dists: dict[str, list[str]]) -> str | None:
    parts = module.split(".")
    if parts[0] == "towerpack":
        return SHIPPED_BY.get(parts[1], f"towerpack-{parts[1]}") if len(parts) > 1 else None
    if parts[0] in sys.stdlib_module_names or parts[0] in NOT_ON_PYPI or parts[0] == "__future__":
        return None
    found = dists.get(parts[0])
    assert found, f"cannot tell which distribution provides '{module}'"
    return _canonical(found[0])


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(reqs: list[str]) -> set[str]:
    return {_canonical(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in reqs}


@pytest.mark.parametrize("name", PACKAGES)
def test_distribution_declares_exactly_what_it_imports(name):
    pkg_dir = ROOT / "packages" / name
    pyproject = tomllib.loads((pkg_dir / "pyproject.toml").read_text())
    dists = packages_distributions()
    own = f"towerpack-{name}"
    imported = {_distribution_of(m, dists) for m in _imported_top_levels(pkg_dir / "src")} - {None, own}
    # TensorFlow is declared through the cpu/gpu extras under either distribution name.
    imported = {"tensorflow-cpu" if d in ("tensorflow", "tensorflow-cpu") else d for d in imported}
    required = _names(pyproject["project"].get("dependencies", []))
    extras = pyproject["project"].get("optional-dependencies", {})
    optional = _names([r for reqs in extras.values() for r in reqs]) - {"tensorflow"}
    assert imported - required - optional == set(), f"{own} imports undeclared distributions"
    assert required - imported == set(), f"{own} requires distributions it never imports"


KERAS_IN_GRAPH_MODE = """
import os
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # no variable is needed before TensorFlow is imported
import numpy as np
import towerpack.trainer.keras  # noqa: F401  (imports tf_keras)
import tf_keras as keras
from towerpack.trainer.compat import tf, tfv1

assert not tf.executing_eagerly()
with tf.Graph().as_default():
    x = tfv1.placeholder(tf.float32, [None, 2])
    layer = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")
    y = layer(x)
    assert isinstance(y, tf.Tensor) and layer.kernel in tfv1.global_variables()
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        print(sess.run(y, {x: np.array([[1.0, 2.0]], np.float32)}).tolist())
"""


def _has_gpu() -> bool:
    import shutil
    import subprocess

    nvidia_smi = shutil.which("nvidia-smi")
    return bool(nvidia_smi) and subprocess.run([nvidia_smi, "-L"], capture_output=True).returncode == 0


def test_keras_extra_keeps_the_tensorflow_distribution_and_works_in_graph_mode():
    from importlib.metadata import PackageNotFoundError, distribution, version

    from packaging.requirements import Requirement

    # tf-keras requires `tensorflow`: next to tensorflow-cpu it must not have brought the CUDA wheel.
    expected, other = ("tensorflow", "tensorflow-cpu") if _has_gpu() else ("tensorflow-cpu", "tensorflow")
    assert version(expected).startswith("2.21.")
    with pytest.raises(PackageNotFoundError):
        distribution(other)
    # The installed tf-keras is the one the [keras] extra asks for.
    extra = tomllib.loads((ROOT / "packages" / "trainer" / "pyproject.toml").read_text())
    (spec,) = [Requirement(r) for r in extra["project"]["optional-dependencies"]["keras"]]
    assert spec.name == "tf-keras" and version("tf-keras") in spec.specifier
    out = run_python(KERAS_IN_GRAPH_MODE, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "[[3.0]]"
