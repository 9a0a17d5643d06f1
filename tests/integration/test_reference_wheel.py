"""The reference's own unit tests, from its published 0.11 wheel, pass on towerpack after
`towerpack port` and nothing else.

`make test` downloads the wheel into the cache (never installed, never imported); this test takes
the five test files it bundles out of the archive, with their package paths (their relative
imports name the reference's modules), ports them, and runs them with pytest in a fresh process.
Every test they hold must pass: none skipped, none missing.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

#: The wheel's test files and how many tests each holds.
REFERENCE_TESTS = {
    "tensorpack/dataflow/imgaug/imgaug_test.py": 4,
    "tensorpack/dataflow/serialize_test.py": 4,
    "tensorpack/callbacks/param_test.py": 6,
    "tensorpack/models/models_test.py": 3,
    "tensorpack/tfutils/unit_tests.py": 2,
}
TOWERPACK = str(Path(sys.executable).with_name("towerpack"))


def _extract(wheel: Path, into: Path) -> list[Path]:
    with zipfile.ZipFile(wheel) as archive:
        for name in REFERENCE_TESTS:
            archive.extract(name, into)
    return [into / name for name in REFERENCE_TESTS]


@pytest.mark.timeout(300)
def test_reference_unit_tests_pass_after_towerpack_port(reference_wheel, tmp_path):
    files = _extract(reference_wheel, tmp_path / "src")
    port = subprocess.run(
        [TOWERPACK, "port", str(tmp_path / "src")], capture_output=True, text=True, timeout=120
    )
    assert port.returncode == 0, port.stdout + port.stderr
    for path in files:
        text = path.read_text()
        assert "tensorpack" not in text.replace("towerpack", ""), f"{path.name} still names tensorpack"
        assert "towerpack" in text, f"{path.name} was not ported"
    again = subprocess.run(
        [TOWERPACK, "port", "--check", str(tmp_path / "src")], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, f"a second run would change the files:\n{again.stdout}"

    report = tmp_path / "junit.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={report}",
         "--rootdir", str(tmp_path / "src"), "-o", "addopts=--import-mode=importlib", *map(str, files)],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    cases = ET.parse(report).getroot().iter("testcase")
    passed: dict[str, int] = {}
    for case in cases:
        assert not list(case), f"{case.get('classname')}.{case.get('name')}: {[c.tag for c in case]}"
        module = case.get("classname").rsplit(".", 1)[0]
        passed[module] = passed.get(module, 0) + 1
    expected = {Path(name).stem: n for name, n in REFERENCE_TESTS.items()}
    assert {m.rsplit(".", 1)[-1]: n for m, n in passed.items()} == expected
