"""docs/configuration.md is the generator's output, and the generator sees every setting: each
settings model, each variable scd reads beside them, each variable the deploy scripts read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import Field

from runtime.config import ScdSettings
from scd import configuration_doc
from scd.configuration_doc import (
    COMMAND,
    DOCUMENT,
    OTHER_VARIABLES,
    REPO,
    SETTINGS_MODELS,
    env_example_variables,
    environment_block,
    model_settings,
    render,
    script_variables,
)

# Files of the deploy tooling whose ``${SCD_...:-default}`` reads a user may set.
DEPLOY_FILES = ("deploy/*.sh", "deploy/docker-compose*.yml")
# The daemons' own prefixes: those variables are the settings models'.
SETTING_PREFIXES = ("SCD_JOURNAL_", "SCD_BLOB_", "SCD_PUBLISHER_", "SCD_SUBSCRIBER_")


def test_the_document_is_the_generators_output() -> None:
    assert DOCUMENT.read_text() == render(), f"docs/configuration.md is out of date: run {COMMAND}"


def test_check_mode_reports_a_stale_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text("# Configuration\n")
    monkeypatch.setattr(configuration_doc, "DOCUMENT", stale)
    assert configuration_doc.main(["--check"]) == 1
    assert COMMAND in capsys.readouterr().err
    assert configuration_doc.main([]) == 0
    assert configuration_doc.main(["--check"]) == 0
    assert stale.read_text() == render()


def _all_settings_models() -> set[type[ScdSettings]]:
    found: set[type[ScdSettings]] = set()
    pending = [ScdSettings]
    while pending:
        for sub in pending.pop().__subclasses__():
            if not sub.__module__.startswith("tests."):
                found.add(sub)
            pending.append(sub)
    return found


def test_every_settings_model_is_documented() -> None:
    assert _all_settings_models() <= {model for model, _ in SETTINGS_MODELS}


def test_every_setting_has_a_description_and_a_described_default() -> None:
    for model, _ in SETTINGS_MODELS:
        for name, field in model_settings(model):
            assert field.description, f"{name}: Field(description=...)"
    render()  # raises on a computed default without doc_default


def test_a_computed_default_must_be_described() -> None:
    class Computed(ScdSettings):
        config_section = "publisher"
        value: str = Field(default_factory=lambda: "now", description="a computed value")

    with pytest.raises(ValueError, match="doc_default"):
        configuration_doc._default("SCD_X", Computed.model_fields["value"])


def test_the_host_name_default_is_described_not_evaluated() -> None:
    reference = DOCUMENT.read_text()
    assert "| `SCD_PUBLISHER_INSTANCE_ID` | string | the host name |" in reference


def test_variables_not_in_a_model_are_listed() -> None:
    listed = {v.name for v in OTHER_VARIABLES}
    for model, _ in SETTINGS_MODELS:
        prefix = str(model.model_config.get("env_prefix"))
        assert {f"{prefix}{name}" for name in model.env_not_settings} <= listed
    for variable in OTHER_VARIABLES:
        assert variable.name in (REPO / variable.read_by).read_text(), variable


def _deploy_reads() -> set[str]:
    names: set[str] = set()
    for pattern in DEPLOY_FILES:
        for path in REPO.glob(pattern):
            names |= set(re.findall(r"\$\{(SCD_[A-Z0-9_]+):?[-?]", path.read_text()))
    return {n for n in names if not n.startswith(SETTING_PREFIXES)}


def test_every_deploy_variable_is_declared() -> None:
    declared = {name for _, entries in script_variables() for names, _ in entries for name in names}
    declared |= {
        name for _, groups in env_example_variables() for names, _ in groups for name, _ in names
    }
    missing = _deploy_reads() - declared
    assert not missing, (
        "read by deploy/ but in no '# Environment:' block of a script nor in deploy/.env.example: "
        + ", ".join(sorted(missing))
    )
    for _, entries in script_variables():
        for names, meaning in entries:
            assert meaning, names


def test_an_environment_block_is_parsed() -> None:
    text = (
        "#!/usr/bin/env bash\n"
        "# Environment:\n"
        "#   SCD_A          first, default 1\n"
        "#                  continued\n"
        "#   SCD_B / SCD_C\n"
        "#                  both, default x\n"
        "# Not an entry.\n"
        "#   SCD_D          after the block\n"
    )
    assert environment_block(text) == [
        (["SCD_A"], "first, default 1 continued"),
        (["SCD_B", "SCD_C"], "both, default x"),
    ]
