"""docs/migrating.md's generated parts (the import tables, the example of a port) are up to date."""

from __future__ import annotations

from pathlib import Path

from towerpack.port import render_docs

MIGRATING = Path(__file__).resolve().parents[2] / "docs" / "migrating.md"


def test_migrating_md_is_rendered_from_the_current_map_and_port():
    text = MIGRATING.read_text(encoding="utf-8")
    assert render_docs.update(text) == text, "run: python -m towerpack.port.render_docs docs/migrating.md"


def test_the_tables_name_every_reference_module_and_every_name_with_no_home():
    tables = render_docs.render_map()
    for module, ref in render_docs.REFERENCE.items():
        assert f"| `{module}` |" in tables
        for name, advice in ref.gone.items():
            assert f"| `{module}.{name}` | {advice} |" in tables
