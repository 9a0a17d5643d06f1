"""Ports one module's source: the tensorpack and TensorFlow import rewrites (and exact fixes for names
NumPy, SciPy, Pillow and Python removed, stack/rewrite.py), then what the result still needs from a
person (names with no home, GPU-only guards, removed names, float dimensions) and the TensorFlow names
it uses (checked for the whole run at once, see tf1/api.py)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper

from . import dedup_imports, star_names, tensorpack_imports
from .dependencies import missing_dependencies
from .findings import Finding
from .gpu_guards import fixed_for_cpu, gpu_guards
from .reference_paths import absolutize, reference_package, rewrite_path_strings
from .stack import rewrite as stack_rewrite
from .tf1 import contrib_rewrite, float_shapes
from .tf1 import imports as tensorflow_imports
from .tf1.names import TFUse, tf_uses

# A module that mentions none of these uses no TensorFlow name (the analysis is skipped).
_TF_MODULES = ("tensorflow", "tf_keras", "towerpack.trainer.compat")


@dataclass(frozen=True)
class Ported:
    """A module after the port: its text (bytes, in the file's own encoding), the findings its code
    gives on its own, and the TensorFlow names it uses. Lines are those of the ported text."""

    original: bytes
    source: bytes
    encoding: str
    findings: list[Finding]
    tf_uses: list[TFUse]
    fixed: tuple[str, ...] = ()  # GPU-only guards fixed for CPU runs (fix_gpu_guards), in words
    star_use: star_names.StarUse | None = None  # names its tensorpack star imports may have given

    @property
    def changed(self) -> bool:
        return self.source != self.original

    def text(self, which: bytes) -> str:
        return which.decode(self.encoding)


def port_source(code: str | bytes, path: str = "<source>", fix_gpu_guards: bool = False) -> Ported:
    """Port ``code`` (the file at ``path``: inside a ``tensorpack`` package tree, its relative imports
    name reference modules); raises libcst.ParserSyntaxError when it does not parse. With
    ``fix_gpu_guards``, the GPU-only guards the report would name are fixed for CPU runs."""
    original = code.encode("utf-8") if isinstance(code, str) else code
    module = cst.parse_module(original)
    package = reference_package(path)
    if package is not None:
        module = absolutize(module, package)
    no_home_uses: dict[str, str] = {}
    if "tensorpack" in module.code:
        module, no_home_uses = tensorpack_imports.rewrite(module)
        module = rewrite_path_strings(module)
    if b"tensorflow" in original:
        module = tensorflow_imports.rewrite(module)
        module = contrib_rewrite.rewrite(module)  # tf.contrib names with an exact home
    module = stack_rewrite.rewrite(module)  # NumPy's removed aliases, SciPy, Pillow, the stdlib
    module = float_shapes.rewrite(module)
    fixed: list[str] = []
    if fix_gpu_guards:
        module, fixed = fixed_for_cpu(module)
    module = dedup_imports.rewrite(module, original)  # last: what the rewrites imported twice
    code = module.code
    wrapper = MetadataWrapper(module)
    findings = tensorpack_imports.leftovers(wrapper, path, no_home_uses) if "tensorpack" in code else []
    findings += gpu_guards(code, path)
    findings += missing_dependencies(code, path)
    findings += stack_rewrite.leftovers(wrapper, path)
    findings += float_shapes.float_shapes(wrapper, path)
    findings += contrib_rewrite.leftovers(wrapper, path)
    uses = tf_uses(wrapper) if any(m in code for m in _TF_MODULES) else []
    star_use = star_names.star_use(wrapper, original)
    return Ported(original, module.bytes, module.encoding, findings, uses, tuple(fixed), star_use)


def port_text(code: str) -> str:
    """The ported text of ``code`` (a convenience for tests and the documentation's examples)."""
    return port_source(code).source.decode("utf-8")
