"""The demo's sample site and its export comparison (the full demo runs in tests/e2e)."""

from __future__ import annotations

import shutil
from pathlib import Path

from journal.demo import BULK_FILE_BYTES, BULK_FILES, compare_trees, make_sample_site


def test_sample_site_is_deterministic(tmp_path: Path) -> None:
    one = make_sample_site(tmp_path / "one")
    two = make_sample_site(tmp_path / "two")
    assert compare_trees(one, two) == []
    bulk = list((one / "assets" / "bulk").iterdir())
    assert len(bulk) == BULK_FILES and all(p.stat().st_size == BULK_FILE_BYTES for p in bulk)


def test_compare_trees_finds_every_kind_of_difference(tmp_path: Path) -> None:
    source = make_sample_site(tmp_path / "source")
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    (copy / "index.html.props.json").write_text("{}")  # export sidecars are not differences
    assert compare_trees(source, copy) == []
    (copy / "about.html").write_text("changed")
    (copy / "css" / "site.css").unlink()
    (copy / "docs" / "extra.md").write_text("new")
    found = compare_trees(source, copy)
    assert any("content differs" in p and "about.html" in p for p in found)
    assert any("missing in export" in p and "site.css" in p for p in found)
    assert any("not in source" in p and "extra.md" in p for p in found)
