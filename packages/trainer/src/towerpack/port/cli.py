"""The ``towerpack`` command; ``towerpack port PATH... [--diff] [--check] [--fix-gpu-guards]`` moves a
tensorpack project to towerpack.

It rewrites the files in place (``--diff`` prints a unified diff instead, ``--check`` only says what
would change), prints a summary, then the places that need a person as ``file:line: message``.
Exit status (``ExitCode``): 0 when everything was ported (reported places are warnings; ``--diff``
alone also exits 0), 1 with ``--check`` when files would change, 2 when something could not be
ported: a file that does not parse or cannot be read, a path that does not exist, or a reference
name with no home here.

This module imports neither TensorFlow nor towerpack.trainer, so the command starts fast; the
report imports TensorFlow once, to check the TF 1 names the code uses.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import enum
import io
import sys
import tokenize
from pathlib import Path

import libcst as cst

from . import star_names
from .codemod import Ported, port_source
from .files import python_files
from .findings import Finding, Kind
from .tf1 import api as tf_api


class ExitCode(enum.IntEnum):
    OK = 0
    WOULD_CHANGE = 1
    INCOMPLETE = 2


class Mode(enum.Enum):
    WRITE = "write"
    DIFF = "diff"
    CHECK = "check"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="towerpack", description="towerpack's tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    port = commands.add_parser(
        "port",
        help="move a tensorpack project to towerpack",
        description="Rewrite a tensorpack (0.11) project's imports to towerpack, TensorFlow 1 imports to "
        "tf.compat.v1, tf.contrib names to their maintained homes (tf_slim, TensorFlow Probability, "
        "tf.compat.v1) and names NumPy, SciPy, Pillow and Python removed to their exact replacements, in "
        "place; then report file:line places that need a person (names with no home in towerpack, "
        "tf.contrib and TF 1 APIs without one, other removed names, float shape dimensions, names a star "
        "import no longer gives, GPU-only guards).",
        epilog="Exit status: 0 everything ported (reported places are warnings); 1 with --check: files "
        "would change; 2 something could not be ported (a file that does not parse, a missing path, "
        "a name with no home).",
    )
    port.add_argument("paths", nargs="+", metavar="PATH", help="files, or directories to walk for *.py")
    port.add_argument("--diff", action="store_true", help="print a unified diff instead of writing")
    port.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    port.add_argument(
        "--fix-gpu-guards",
        action="store_true",
        help="also make the GPU-only guards pass on a machine without GPUs, by exactly the edits the "
        "report names: `n = get_num_gpu()` becomes `n = get_num_gpu() or 1`, other guards are dropped",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    mode = Mode.CHECK if args.check else Mode.DIFF if args.diff else Mode.WRITE
    return int(port(args.paths, mode, diff=args.diff, fix_gpu_guards=args.fix_gpu_guards))


def port(
    paths: list[str], mode: Mode, diff: bool = False, out=None, err=None, fix_gpu_guards: bool = False
) -> ExitCode:
    out = out or sys.stdout
    err = err or sys.stderr
    files, missing = python_files(paths)
    failed = len(missing)
    for path in missing:
        print(f"{path}: no such file or directory", file=err)
    ported: list[tuple[Path, Ported]] = []
    for path in files:
        result = _port_file(path, err, fix_gpu_guards)
        if result is None:
            failed += 1
            continue
        ported.append((path, result))
        if result.changed:
            if diff:
                out.writelines(unified_diff(path, result))
            if mode is Mode.WRITE:
                try:
                    path.write_bytes(result.source)
                except OSError as e:
                    print(f"{path}: cannot write: {e.strerror}", file=err)
                    ported.pop()
                    failed += 1
                    continue
                print(f"ported {path}", file=out)
            elif mode is Mode.CHECK:
                print(f"would port {path}", file=out)
            for fix in result.fixed:
                print(
                    f"{path}: {'fixed' if mode is Mode.WRITE else 'would fix'} a GPU-only guard: {fix}",
                    file=out,
                )
    changed = sum(r.changed for _, r in ported)
    verb = "ported" if mode is Mode.WRITE else "would be ported"
    summary = f"towerpack port: {changed} file(s) {verb}, {len(ported) - changed} unchanged"
    print(summary + (f", {failed} could not be ported (see above)" if failed else ""), file=out)
    findings, notes = report([(str(path), r) for path, r in ported])
    if findings:
        print(f"\n{len(findings)} place(s) need a person:", file=out)
        for finding in findings:
            print(finding, file=out)
    for note in notes:
        print(f"note: {note}", file=out)
    if failed or any(f.kind is Kind.NO_HOME for f in findings):
        return ExitCode.INCOMPLETE
    if mode is Mode.CHECK and changed:
        return ExitCode.WOULD_CHANGE
    return ExitCode.OK


def _port_file(path: Path, err, fix_gpu_guards: bool = False) -> Ported | None:
    try:
        code = path.read_bytes()
    except OSError as e:
        print(f"{path}: cannot read: {e.strerror}", file=err)
        return None
    problem = _decode_problem(code)
    if problem is not None:
        print(f"{path}: cannot decode: {problem}", file=err)
        return None
    try:
        return port_source(code, str(path), fix_gpu_guards=fix_gpu_guards)
    except cst.ParserSyntaxError as e:
        print(f"{path}:{_syntax_error(code, e)}", file=err)
        return None
    except Exception as e:  # a bug of the port itself: name the file and go on with the others
        print(f"{path}: could not be ported ({type(e).__name__}: {e}); please report this", file=err)
        return None


def _decode_problem(code: bytes) -> str | None:
    """Why Python could not read ``code`` as text (None: it can): not in the encoding its coding
    line or BOM names, or not UTF-8 without one."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(code).readline)
        code.decode(encoding)
    except SyntaxError as e:  # detect_encoding's way of saying the first lines do not decode
        if "invalid or missing" in str(e):
            return "not UTF-8, and no coding line (`# -*- coding: latin-1 -*-`) names its encoding"
        if "encoding problem" in str(e):
            return f"its UTF-8 BOM contradicts its coding line ({e})"
        return str(e)
    except UnicodeDecodeError as e:
        return f"not {e.encoding}, as its coding line or BOM says ({e.reason} at byte {e.start})"
    return None


def _syntax_error(code: bytes, error: cst.ParserSyntaxError) -> str:
    """``line:column: does not parse: why``, located by Python's own parser where it disagrees too
    (it points at the offending token; libcst may point past it)."""
    try:
        ast.parse(code)
    except SyntaxError as e:
        if e.lineno is not None:
            return f"{e.lineno}:{e.offset}: does not parse: {e.msg}"
    except ValueError:
        pass
    return f"{error.raw_line}:{error.raw_column + 1}: does not parse: {error.message}"


def unified_diff(path: Path | str, result: Ported) -> list[str]:
    before = result.text(result.original).splitlines(keepends=True)
    after = result.text(result.source).splitlines(keepends=True)
    lines = list(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def report(ported: list[tuple[str, Ported]]) -> tuple[list[Finding], list[str]]:
    """The findings of all files (TensorFlow names checked in one go), sorted by file and line, and
    notes on the check itself."""
    names = {use.name for _, r in ported for use in r.tf_uses if tf_api.needs_lookup(use.name)}
    checked = tf_api.availability(names)
    findings = [f for _, r in ported for f in r.findings]
    for path, r in ported:
        findings += tf_api.findings(path, r.tf_uses, checked)
        findings += star_names.findings(path, r.star_use)
    notes = [tf_api.NOT_CHECKED] if tf_api.Availability.UNCHECKED in checked.values() else []
    return sorted(findings, key=lambda f: (f.path, f.line, f.message)), notes


if __name__ == "__main__":
    sys.exit(main())
