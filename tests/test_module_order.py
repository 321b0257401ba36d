"""The modules tests/conftest.py starts first exist: a renamed one would silently fall back to
collection order and leave a long module for the end of a CI run."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_MODULES

ROOT = Path(__file__).resolve().parent.parent


def test_every_longest_module_exists_once() -> None:
    missing = [module for module in LONGEST_MODULES if not (ROOT / module).is_file()]
    assert not missing
    assert len(set(LONGEST_MODULES)) == len(LONGEST_MODULES)
