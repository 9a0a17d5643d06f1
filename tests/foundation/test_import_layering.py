"""The packages' import layering: no import cycles, and each package imports only what it may.

The import graph is read from the source with ``ast`` (nothing is imported). Imports are kept in
three kinds: at module level (run when the module is imported), inside functions (run when called)
and under ``if TYPE_CHECKING:`` (never run). Importing ``a.b.c`` first runs the packages ``a`` and
``a.b`` the importer is not inside; those implied imports are edges too: ``base -> callbacks.base``
runs ``callbacks/__init__``, whose other modules may import ``base`` back before it is complete.
"""

from __future__ import annotations

import ast
import enum
import itertools
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("dataflow", "trainer", "launcher")
# The top-level towerpack packages (towerpack.utils ships in the dataflow distribution).
NAMESPACES = ("dataflow", "utils", "trainer", "launcher")
# Third-party modules that load TensorFlow when imported.
TENSORFLOW_MODULES = ("tensorflow", "tf_keras", "keras", "horovod.tensorflow")


class ImportKind(enum.Enum):
    MODULE = "module level"
    FUNCTION = "inside a function"
    TYPE_CHECKING = "under TYPE_CHECKING"


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    kind: ImportKind
    line: int
    implied: bool = False


@dataclass
class ImportGraph:
    """Modules found under some source roots and the imports between them (and to outside modules)."""

    files: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    def edges(self, kinds: Iterable[ImportKind], implied: bool = True) -> dict[str, set[str]]:
        """Internal module -> internal modules it imports, with imports of the given kinds (and the
        packages those imports run first, unless ``implied`` is False)."""
        kinds = set(kinds)
        graph: dict[str, set[str]] = {name: set() for name in self.files}
        for imp in self.imports:
            wanted = imp.kind in kinds and (implied or not imp.implied)
            if wanted and imp.target in self.files and imp.target != imp.source:
                graph[imp.source].add(imp.target)
        return graph

    def where(self, source: str, target: str, kinds: Iterable[ImportKind]) -> Import:
        """The import behind an edge (an explicit one where there is one)."""
        found = [i for i in self.imports if (i.source, i.target) == (source, target) and i.kind in kinds]
        return min(found, key=lambda i: i.implied)

    def outside(self, sources: Iterable[str], kinds: Iterable[ImportKind]) -> list[Import]:
        """The imports of modules outside the graph (third-party ones) made by ``sources``."""
        sources, kinds = set(sources), set(kinds)
        return [
            i for i in self.imports if i.source in sources and i.kind in kinds and i.target not in self.files
        ]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _statements(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, ImportKind]]:
    def walk(node: ast.AST, kind: ImportKind) -> Iterator[tuple[ast.Import | ast.ImportFrom, ImportKind]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, ImportKind.FUNCTION)
            elif isinstance(child, ast.If) and _is_type_checking(child.test) and kind is ImportKind.MODULE:
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), ImportKind.TYPE_CHECKING)
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                yield from walk(child, kind)

    yield from walk(tree, ImportKind.MODULE)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _with_ancestors(target: str, importer: str, is_package: bool) -> list[str]:
    """``target`` plus the packages importing it runs that the importer is not already inside."""
    inside = importer if is_package else importer.rpartition(".")[0]
    parts = target.split(".")
    names = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return [n for n in names if n == target or not (inside == n or inside.startswith(n + "."))]


def build_graph(roots: Iterable[Path]) -> ImportGraph:
    graph = ImportGraph()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            graph.files[module_name(root, path)] = path
    for name, path in graph.files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for stmt, kind in _statements(tree):
            for target in _targets(stmt, name, is_package, graph.files):
                for t in _with_ancestors(target, name, is_package):
                    graph.imports.append(Import(name, t, kind, stmt.lineno, implied=t != target))
    return graph


def _targets(stmt: ast.Import | ast.ImportFrom, importer: str, is_package: bool, known: dict) -> list[str]:
    if isinstance(stmt, ast.Import):
        return [alias.name for alias in stmt.names]
    if stmt.level:
        package = importer if is_package else importer.rpartition(".")[0]
        for _ in range(stmt.level - 1):
            package = package.rpartition(".")[0]
        base = ".".join(p for p in (package, stmt.module) if p)
    else:
        base = stmt.module or ""
    # `from pkg import sub` imports the submodule pkg.sub; `from pkg import name` runs pkg.
    subs = [f"{base}.{a.name}" for a in stmt.names if f"{base}.{a.name}" in known]
    return subs if len(subs) == len(stmt.names) else [base, *subs]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path that returns to its start) for every strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(start: str) -> None:
        # Tarjan's algorithm with an explicit stack (module graphs can be deep).
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest cycle through the group's first module (breadth-first back to it)."""
    start = min(group)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if child not in parents:
                    parents[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")


def describe(graph: ImportGraph, cycle: list[str], kinds: Iterable[ImportKind]) -> str:
    steps = []
    for source, target in itertools.pairwise(cycle):
        imp = graph.where(source, target, kinds)
        how = " (runs the package first)" if imp.implied else ""
        steps.append(f"  {source} ({graph.files[source].name}:{imp.line}) -> {target}{how}")
    return "\n".join(steps)


def reachable(graph: dict[str, set[str]], starts: Iterable[str]) -> dict[str, str]:
    """Every module reachable from ``starts``, mapped to the module that first imported it."""
    seen = {s: s for s in starts}
    todo = list(seen)
    while todo:
        node = todo.pop()
        for child in graph.get(node, ()):
            if child not in seen:
                seen[child] = node
                todo.append(child)
    return seen


def chain(seen: dict[str, str], end: str) -> str:
    path = [end]
    while seen[path[-1]] != path[-1]:
        path.append(seen[path[-1]])
    return " -> ".join(reversed(path))


def _is_under(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.fixture(scope="module")
def towerpack_graph() -> ImportGraph:
    return build_graph(REPO / "packages" / p / "src" for p in PACKAGES)


@pytest.mark.parametrize("package", NAMESPACES)
def test_no_import_cycle_at_module_level(towerpack_graph, package):
    kinds = (ImportKind.MODULE,)
    found = [
        c
        for c in cycles(towerpack_graph.edges(kinds))
        if any(_is_under(m, [f"towerpack.{package}"]) for m in c)
    ]
    report = "\n\n".join(describe(towerpack_graph, c, kinds) for c in found)
    assert not found, f"{len(found)} import cycle(s) at module level in towerpack.{package}:\n{report}"


@pytest.mark.parametrize("package", NAMESPACES)
def test_no_import_inside_a_function_closes_a_cycle(towerpack_graph, package):
    """An import moved into a function to dodge a cycle is still a cycle: none that would be one at
    module level (imports kept in functions to put off a heavy dependency import other packages)."""
    module = towerpack_graph.edges([ImportKind.MODULE])
    found = []
    for imp in towerpack_graph.imports:
        lazy = imp.kind is ImportKind.FUNCTION and imp.target in module and imp.source != imp.target
        if not lazy or not _is_under(imp.source, [f"towerpack.{package}"]):
            continue
        seen = reachable(module, [imp.target])
        if imp.source in seen:
            where = f"{towerpack_graph.files[imp.source].name}:{imp.line}, in a function"
            found.append(f"  {imp.source} ({where}) -> {chain(seen, imp.source)}")
    assert not found, f"imports inside functions that close a cycle in towerpack.{package}:\n" + "\n".join(
        sorted(set(found))
    )


def test_dataflow_imports_neither_tensorflow_nor_other_packages(towerpack_graph):
    """Not at module level, not inside functions: a dataflow worker never pays for TensorFlow."""
    bad = forbidden_reach(towerpack_graph, "towerpack.dataflow", (ImportKind.MODULE, ImportKind.FUNCTION))
    assert not bad, "towerpack.dataflow imports what it must not:\n" + "\n".join(bad)


def test_utils_imports_neither_tensorflow_nor_trainer_nor_launcher(towerpack_graph):
    """Not at module level, not inside functions: what needs TensorFlow uses the one the process
    has imported (``sys.modules``), so the launcher and dataflow workers can use all of utils."""
    bad = forbidden_reach(towerpack_graph, "towerpack.utils", (ImportKind.MODULE, ImportKind.FUNCTION))
    assert not bad, "towerpack.utils imports what it must not:\n" + "\n".join(bad)


def test_utils_imports_the_dataflow_only_inside_functions(towerpack_graph):
    """The dataflow imports towerpack.utils, so utils reaches the dataflow only when a function runs
    (get_rng, serialize), never while it is being imported."""
    start = [m for m in towerpack_graph.files if _is_under(m, ["towerpack.utils"])]
    seen = reachable(towerpack_graph.edges([ImportKind.MODULE]), start)
    bad = [chain(seen, m) for m in seen if _is_under(m, ["towerpack.dataflow"])]
    assert not bad, "towerpack.utils imports the dataflow at module level:\n" + "\n".join(bad)


def test_dataflow_leaves_the_logger_setup_to_applications(towerpack_graph):
    """Importing towerpack.utils.logger installs the towerpack log handler; the dataflow logs through
    plain child loggers and never installs it (a process that configures its own logging, such as
    ``dataflow serve``, would print every line twice)."""
    start = [m for m in towerpack_graph.files if _is_under(m, ["towerpack.dataflow"])]
    seen = reachable(towerpack_graph.edges([ImportKind.MODULE]), start)
    assert "towerpack.utils.logger" not in seen, chain(seen, "towerpack.utils.logger")


def test_launcher_imports_neither_tensorflow_nor_trainer_at_module_level(towerpack_graph):
    bad = forbidden_reach(towerpack_graph, "towerpack.launcher", (ImportKind.MODULE,), also=())
    assert not bad, "towerpack.launcher imports at module level what it must not:\n" + "\n".join(bad)


def forbidden_reach(graph, package: str, kinds: tuple, also: tuple = ("towerpack.launcher",)) -> list[str]:
    """The import chains by which ``package`` reaches TensorFlow, the trainer, or ``also``."""
    start = [m for m in graph.files if _is_under(m, [package])]
    seen = reachable(graph.edges(kinds), start)
    bad = [chain(seen, m) for m in seen if _is_under(m, ["towerpack.trainer", *also])]
    bad += [
        f"{chain(seen, i.source)} -> {i.target} (line {i.line})"
        for i in graph.outside(seen, kinds)
        if _is_under(i.target, TENSORFLOW_MODULES)
    ]
    return bad


DATAFLOW = "towerpack.dataflow"
RUNS = (ImportKind.MODULE, ImportKind.FUNCTION)
# The layers of towerpack.dataflow, each with the layers right below it: a module may import the
# modules of its own layer and of every layer under it (at module level and inside functions). A
# layer is a folder, but for resume/'s protocol modules: every stage implements or carries them, so
# they sit below pipeline, while the rest of resume/ (positions, splits, ledger, tracker) drives the
# stages from above it. The package itself and cli.py are the top: no layer imports them.
DATAFLOW_LAYERS: dict[str, tuple[str, ...]] = {
    "wire": (),
    "resume.protocol": (),
    "cli_error": (),
    "pipeline": ("wire", "resume.protocol"),
    "resume": ("pipeline",),
    "parallel": ("resume",),
    "formats": ("resume",),
    "serve": ("parallel",),
    "imgaug": ("pipeline",),
    "dataset": ("formats",),
    "image": ("dataset", "imgaug", "parallel", "cli_error"),
}
RESUME_PROTOCOL = ("protocol", "keys", "ranges")
DATAFLOW_TOP = (DATAFLOW, f"{DATAFLOW}.cli")
# Folders that keep the reference's package API (``from towerpack.dataflow.dataset import Mnist``):
# their __init__ imports their modules. Every other folder's __init__ imports nothing, so importing
# one module of it never runs the others (resume/'s protocol modules would otherwise pull in the
# tracker, which imports pipeline back).
API_FOLDERS = ("dataset", "imgaug")
_IMAGE_DECODE = (
    "datasets of image files decode with image/decode.py (inside a function, so cv2 loads when images "
    "are read); decode sits below the datasets, the rest of image/ (recipes over ILSVRC12) above them"
)
# Imports that break the layers today, each with why it is there. The test fails when one of them
# is gone, so the list only shrinks.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {
    (f"{DATAFLOW}.dataset.base", f"{DATAFLOW}.image.decode"): _IMAGE_DECODE,
    (f"{DATAFLOW}.dataset.bsds500", f"{DATAFLOW}.image.decode"): _IMAGE_DECODE,
}


def dataflow_layer(module: str) -> str | None:
    """The layer of a module of towerpack.dataflow (None: the top, above every layer)."""
    if module in DATAFLOW_TOP:
        return None
    parts = module.split(".")
    if parts[2] == "resume" and len(parts) > 3 and parts[3] in RESUME_PROTOCOL:
        return "resume.protocol"
    return parts[2]


def layers_under(layer: str, path: tuple[str, ...] = ()) -> set[str]:
    """Every layer below ``layer`` (DATAFLOW_LAYERS read down to the bottom)."""
    if layer in path:
        raise AssertionError(f"DATAFLOW_LAYERS has a cycle: {' -> '.join((*path, layer))}")
    under: set[str] = set()
    for lower in DATAFLOW_LAYERS[layer]:
        under |= {lower, *layers_under(lower, (*path, layer))}
    return under


def location(graph: ImportGraph, imp: Import) -> str:
    path = graph.files[imp.source]
    return f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{imp.line}"


def layer_violations(
    graph: ImportGraph, exceptions: Mapping[tuple[str, str], str]
) -> tuple[list[str], set[tuple[str, str]]]:
    """The imports of towerpack.dataflow that reach a layer not below their own (file:line each), and
    the listed exceptions met on the way. Only the imports written out are read: the folder package
    an import runs first is checked by its own imports (outside the API folders it has none)."""
    bad, excused = [], set()
    for imp in graph.imports:
        inside = _is_under(imp.source, [DATAFLOW]) and _is_under(imp.target, [DATAFLOW])
        if imp.implied or imp.kind not in RUNS or not inside or imp.target not in graph.files:
            continue
        mine, theirs = dataflow_layer(imp.source), dataflow_layer(imp.target)
        if mine is None or mine == theirs:
            continue
        if mine not in DATAFLOW_LAYERS:
            bad.append(f"{location(graph, imp)}: {imp.source} is in no layer: add {mine} to DATAFLOW_LAYERS")
        elif theirs is None or theirs not in layers_under(mine):
            if (imp.source, imp.target) in exceptions:
                excused.add((imp.source, imp.target))
                continue
            where = "" if imp.kind is ImportKind.MODULE else f" {imp.kind.value}"
            bad.append(
                f"{location(graph, imp)}: {imp.source} ({mine}) imports {imp.target} "
                f"({theirs or 'the top'}){where}"
            )
    return sorted(set(bad)), excused


def test_dataflow_keeps_its_layers(towerpack_graph):
    """Each folder of towerpack.dataflow imports only the layers below it (DATAFLOW_LAYERS): the wire
    nothing, pipeline the wire and resume's protocol, parallel and formats what pipeline stands on
    and the rest of resume, serve also parallel, image the datasets, augmentors, formats and workers."""
    bad, excused = layer_violations(towerpack_graph, LAYER_EXCEPTIONS)
    assert not bad, "imports that break towerpack.dataflow's layers (DATAFLOW_LAYERS):\n" + "\n".join(bad)
    gone = [f"{s} -> {t}" for s, t in sorted(set(LAYER_EXCEPTIONS) - excused)]
    assert not gone, "LAYER_EXCEPTIONS lists imports the code no longer makes (remove them):\n" + "\n".join(
        gone
    )


def test_dataflow_folders_import_nothing_when_imported(towerpack_graph):
    """Importing a module of a folder first runs the folder's __init__: outside the API folders it
    holds a docstring only."""
    bad = [
        f"{location(towerpack_graph, imp)}: {imp.source} imports {imp.target}"
        for imp in towerpack_graph.imports
        if _is_under(imp.source, [DATAFLOW])
        and dataflow_layer(imp.source) not in (None, *API_FOLDERS)
        and towerpack_graph.files[imp.source].name == "__init__.py"
        and imp.target != "__future__"
    ]
    folders = {dataflow_layer(m) for m in towerpack_graph.files if _is_under(m, [DATAFLOW])}
    assert {"pipeline", "resume", "wire"} <= folders
    assert not bad, "folders of towerpack.dataflow whose __init__ imports:\n" + "\n".join(bad)


def located_chain(graph: ImportGraph, seen: dict[str, str], end: str, kinds: Iterable[ImportKind]) -> str:
    """``chain`` with the file:line of every import on it."""
    path = [end]
    while seen[path[-1]] != path[-1]:
        path.append(seen[path[-1]])
    path.reverse()
    steps = [path[0]]
    for source, target in itertools.pairwise(path):
        steps.append(f"({location(graph, graph.where(source, target, kinds))}) -> {target}")
    return " ".join(steps)


HOST_HELPERS = ("towerpack.utils.placement", "towerpack.utils.hostlist")


@pytest.mark.parametrize("package", ("towerpack.launcher", *HOST_HELPERS))
def test_launcher_and_host_helpers_import_nothing_of_the_dataflow(towerpack_graph, package):
    """The launcher reads Slurm host lists with towerpack.utils.hostlist and the trainer places
    devices with towerpack.utils.placement: none of them loads the dataflow, not even in a function."""
    start = [m for m in towerpack_graph.files if _is_under(m, [package])]
    assert start, f"{package} is not in the graph"
    seen = reachable(towerpack_graph.edges(RUNS), start)
    bad = [located_chain(towerpack_graph, seen, m, RUNS) for m in seen if _is_under(m, [DATAFLOW])]
    assert not bad, f"{package} imports towerpack.dataflow:\n" + "\n".join(sorted(bad))


def test_graph_sees_every_package_and_real_edges(towerpack_graph):
    """The graph is not empty or blind: every package, known imports, TensorFlow from the trainer."""
    for p in NAMESPACES:
        assert f"towerpack.{p}" in towerpack_graph.files
    edges = towerpack_graph.edges((ImportKind.MODULE,), implied=False)
    assert "towerpack.trainer.base" in edges["towerpack.trainer"]
    assert "towerpack.dataflow" in edges["towerpack.trainer.input_source.queue"]
    assert "towerpack.utils.fs" in edges["towerpack.dataflow.dataset.files"]
    assert "towerpack.utils.logger" in edges["towerpack.trainer.logger"]
    lazy = towerpack_graph.edges((ImportKind.FUNCTION,), implied=False)
    assert "towerpack.dataflow.pipeline.seeding" in lazy["towerpack.utils.utils"]
    assert "towerpack.utils.hostlist" in lazy["towerpack.launcher.slurm"]
    assert sum(len(v) for v in edges.values()) > 200
    compat = towerpack_graph.outside(["towerpack.trainer.compat"], [ImportKind.MODULE])
    assert any(_is_under(i.target, TENSORFLOW_MODULES) for i in compat)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_finder_resolves_relative_imports_and_keeps_kinds_apart(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import A\n",
            "pkg/a.py": "from .sub.b import B\nA = 1\n",
            "pkg/sub/__init__.py": "from . import b\n",
            "pkg/sub/b.py": (
                "from typing import TYPE_CHECKING\n"
                "import numpy\n"
                "if TYPE_CHECKING:\n    from ..a import A\n"
                "def f():\n    from .. import a\n"
                "B = 2\n"
            ),
            "pkg/sub/c.py": "from ...pkg import a\nfrom . import b\n",
        },
    )
    graph = build_graph([tmp_path])
    assert set(graph.files) == {"pkg", "pkg.a", "pkg.sub", "pkg.sub.b", "pkg.sub.c"}
    module = graph.edges([ImportKind.MODULE])
    assert module["pkg"] == {"pkg.a"}
    # Importing pkg.sub.b first runs the package pkg.sub (implied); pkg, pkg.a's own, is not run.
    assert module["pkg.a"] == {"pkg.sub", "pkg.sub.b"}
    assert graph.edges([ImportKind.MODULE], implied=False)["pkg.a"] == {"pkg.sub.b"}
    assert module["pkg.sub"] == {"pkg.sub.b"}
    assert module["pkg.sub.b"] == set()
    assert module["pkg.sub.c"] == {"pkg.a", "pkg.sub.b"}
    assert graph.edges([ImportKind.FUNCTION])["pkg.sub.b"] == {"pkg.a"}
    assert graph.edges([ImportKind.TYPE_CHECKING])["pkg.sub.b"] == {"pkg.a"}
    assert [i.target for i in graph.outside(["pkg.sub.b"], [ImportKind.MODULE])] == ["typing", "numpy"]
    assert cycles(module) == []
    assert cycles(graph.edges(list(ImportKind))) == [["pkg.a", "pkg.sub.b", "pkg.a"]]


def test_finder_reports_a_cycle_as_a_path(tmp_path):
    _write(
        tmp_path,
        {
            "p/__init__.py": "",
            "p/x.py": "from .y import Y\nX = 1\n",
            "p/y.py": "from . import z\nY = 1\n",
            "p/z.py": "import p.x\n",
            "p/free.py": "from .x import X\n",
        },
    )
    graph = build_graph([tmp_path])
    kinds = [ImportKind.MODULE]
    (cycle,) = cycles(graph.edges(kinds))
    assert cycle == ["p.x", "p.y", "p.z", "p.x"]
    text = describe(graph, cycle, kinds)
    assert text.splitlines() == [
        "  p.x (x.py:1) -> p.y",
        "  p.y (y.py:1) -> p.z",
        "  p.z (z.py:1) -> p.x",
    ]


def test_layer_check_names_every_import_that_breaks_a_layer(tmp_path):
    _write(
        tmp_path,
        {
            "towerpack/dataflow/__init__.py": "from .pipeline.base import DataFlow\n",
            "towerpack/dataflow/cli.py": "from .serve.server import Server\nfrom .wire import codec\n",
            "towerpack/dataflow/wire/__init__.py": "",
            "towerpack/dataflow/wire/codec.py": "import zmq\n\nfrom ..pipeline.base import DataFlow\n",
            "towerpack/dataflow/pipeline/__init__.py": "",
            "towerpack/dataflow/pipeline/base.py": (
                "from ..resume.protocol import Resumable\nfrom ..wire.codec import pack\n"
                "def f():\n    from ..resume.tracker import Tracker\n"
            ),
            "towerpack/dataflow/pipeline/batch.py": "from .. import cli\nfrom ..dataset.base import D\n",
            "towerpack/dataflow/resume/__init__.py": "",
            "towerpack/dataflow/resume/protocol.py": "",
            "towerpack/dataflow/resume/tracker.py": "from ..pipeline import base\nfrom .protocol import R\n",
            "towerpack/dataflow/serve/__init__.py": "",
            "towerpack/dataflow/serve/server.py": "from ..resume import tracker\nfrom ..wire import codec\n",
            "towerpack/dataflow/dataset/__init__.py": "",
            "towerpack/dataflow/dataset/base.py": "",
        },
    )
    graph = build_graph([tmp_path])
    pkg = "towerpack.dataflow"
    listed = {(f"{pkg}.pipeline.batch", f"{pkg}.dataset.base"): "why", ("a", "b"): "gone"}
    bad, excused = layer_violations(graph, listed)
    assert excused == {(f"{pkg}.pipeline.batch", f"{pkg}.dataset.base")}
    assert [line.split(": ", 1)[1] for line in bad] == [
        f"{pkg}.pipeline.base (pipeline) imports {pkg}.resume.tracker (resume) inside a function",
        f"{pkg}.pipeline.batch (pipeline) imports {pkg}.cli (the top)",
        f"{pkg}.wire.codec (wire) imports {pkg}.pipeline.base (pipeline)",
    ]
    assert bad[1].startswith(f"{tmp_path}/towerpack/dataflow/pipeline/batch.py:1: ")
    assert bad[2].startswith(f"{tmp_path}/towerpack/dataflow/wire/codec.py:3: ")


if __name__ == "__main__":  # a quick look: import counts by kind, and the cycles
    g = build_graph(REPO / "packages" / p / "src" for p in PACKAGES)
    for p in NAMESPACES:
        mine = [i for i in g.imports if _is_under(i.source, [f"towerpack.{p}"]) and not i.implied]
        counts = ", ".join(f"{sum(i.kind is k for i in mine)} {k.value}" for k in ImportKind)
        print(f"towerpack.{p}: {len({i.source for i in mine})} modules; imports: {counts}")
    for kinds in ([ImportKind.MODULE], [ImportKind.MODULE, ImportKind.FUNCTION]):
        print(f"== cycles with imports {' or '.join(k.value for k in kinds)}")
        for c in cycles(g.edges(kinds)):
            print(describe(g, c, kinds), end="\n\n")
    sys.exit(0)
