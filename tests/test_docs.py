"""The documentation stays in step with the code: every relative link of README.md, docs/ and
bench/README.md leads to a file (and heading) that exists, every ``SCD_*`` variable they name is
read by a settings model or a script (tests/scd/test_configuration_doc.py checks that
docs/configuration.md lists every setting)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel
from pydantic_settings import BaseSettings

from blobstore.oak import OakDataStoreSettings
from blobstore.settings import BlobStoreSettings
from journal.settings import JournalSettings
from publisher.settings import PublisherSettings
from subscriber.settings import SubscriberSettings

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([REPO / "README.md", REPO / "bench" / "README.md", *REPO.glob("docs/*.md")])
# Where the code names variables outside the settings models (logging, scripts, test services).
CODE_GLOBS = (
    "**/*.py",
    "deploy/*.sh",
    "deploy/**/Dockerfile",
    "deploy/*.yml",
    "deploy/.env.example",
    ".ci/run",
)
# Names shown on purpose as mistakes the daemons refuse.
MISSPELLED_EXAMPLES = frozenset({"SCD_SUBSCRIBER_BATCH_MAXX"})
# The subscriber reads these two sections from SCD_JOURNAL_* and SCD_BLOB_*, not its own prefix.
NOT_OWN_VARIABLES = frozenset({"journal", "blobstore"})

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
VARIABLE = re.compile(r"SCD_[A-Z0-9_]*(?:\*|<[A-Z]+>)?[A-Z0-9_]*")
SETTINGS: tuple[tuple[type[BaseSettings], str], ...] = (
    (JournalSettings, "SCD_JOURNAL_"),
    (BlobStoreSettings, "SCD_BLOB_"),
    (PublisherSettings, "SCD_PUBLISHER_"),
    (SubscriberSettings, "SCD_SUBSCRIBER_"),
    (OakDataStoreSettings, "SCD_OAK_"),
)


def setting_variables(model: type[BaseModel], prefix: str) -> set[str]:
    """The environment variable of every setting of ``model``, nested models with ``__``."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        if model is SubscriberSettings and name in NOT_OWN_VARIABLES:
            continue
        if isinstance(field.default, BaseModel):
            names |= setting_variables(type(field.default), f"{prefix}{name.upper()}__")
        else:
            names.add(f"{prefix}{name.upper()}")
    return names


def all_setting_variables() -> set[str]:
    return set().union(*(setting_variables(model, prefix) for model, prefix in SETTINGS))


def code_variables() -> set[str]:
    names: set[str] = set()
    for pattern in CODE_GLOBS:
        for path in REPO.glob(pattern):
            if ".venv" in path.parts or "build" in path.parts or path == Path(__file__):
                continue
            names |= set(re.findall(r"SCD_[A-Z0-9_]+", path.read_text(errors="replace")))
    return names


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(document: Path) -> set[str]:
    return {
        anchor(line.lstrip("#"))
        for line in document.read_text().splitlines()
        if re.match(r"#{1,6} ", line)
    }


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_somewhere(document: Path) -> None:
    broken = []
    for target in LINK.findall(document.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path_part, _, fragment = target.partition("#")
        resolved = (document.parent / path_part).resolve() if path_part else document
        if not resolved.exists():
            broken.append(f"{target}: no {resolved}")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading #{fragment} in {resolved.name}")
    assert not broken, f"{document.name}: " + "; ".join(broken)


def test_documented_variables_exist() -> None:
    known = all_setting_variables() | code_variables()
    unknown = set()
    for document in DOCUMENTS:
        for name in VARIABLE.findall(document.read_text()):
            if name in MISSPELLED_EXAMPLES:
                continue
            if "*" in name or "<" in name:
                stem = re.split(r"[*<]", name)[0]
                if not any(k.startswith(stem) for k in known):
                    unknown.add(f"{name} ({document.name})")
            elif name.rstrip("_") not in known and not any(k.startswith(name) for k in known):
                unknown.add(f"{name} ({document.name})")
    assert not unknown, "documented but read nowhere: " + ", ".join(sorted(unknown))


def test_the_readme_fits_on_a_few_screens() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
