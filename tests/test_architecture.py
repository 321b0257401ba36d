"""docs/architecture.md's inventory is the tree: one row per package of the product, naming each
of its modules once, and naming none that does not exist."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCUMENT = REPO / "docs" / "architecture.md"
PRODUCT = ("runtime", "journal", "blobstore", "publisher", "subscriber", "scd")
SECTION = "## What each package owns"

ROW = re.compile(r"^\| `([a-z_/]+/)` \| (.*) \|$")
MODULE = re.compile(r"`([A-Za-z0-9_/]+\.py)`")


def packages() -> set[str]:
    """Every package of the product, as ``path/``."""
    return {
        f"{init.parent.relative_to(REPO).as_posix()}/"
        for root in PRODUCT
        for init in (REPO / root).rglob("__init__.py")
    }


def modules() -> set[str]:
    """Every module of the product but the packages' ``__init__.py``."""
    return {
        path.relative_to(REPO).as_posix()
        for root in PRODUCT
        for path in (REPO / root).rglob("*.py")
        if path.name != "__init__.py"
    }


def inventory() -> tuple[list[str], list[str]]:
    """The packages of the table's rows, and the modules they name (each relative to its
    row's package)."""
    text = DOCUMENT.read_text()
    section = text[text.index(SECTION) :].split("\n## ", 1)[0]
    rows, named = [], []
    for line in section.splitlines():
        row = ROW.match(line)
        if row:
            package, owns = row.groups()
            rows.append(package)
            named += [f"{package}{module}" for module in MODULE.findall(owns)]
    return rows, named


def test_one_row_per_package() -> None:
    rows, _ = inventory()
    repeated = sorted(p for p, n in Counter(rows).items() if n > 1)
    assert not repeated, f"docs/architecture.md: packages with more than one row: {repeated}"
    assert set(rows) == packages(), (
        f"docs/architecture.md: rows for no package {sorted(set(rows) - packages())}, "
        f"packages without a row {sorted(packages() - set(rows))}"
    )


def test_every_module_is_named_once() -> None:
    _, named = inventory()
    repeated = sorted(m for m, n in Counter(named).items() if n > 1)
    assert not repeated, f"docs/architecture.md names these modules twice: {repeated}"
    missing = sorted(modules() - set(named))
    assert not missing, f"modules docs/architecture.md does not name: {missing}"
    unknown = sorted(set(named) - modules())
    assert not unknown, f"docs/architecture.md names modules that do not exist: {unknown}"
