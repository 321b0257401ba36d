"""deploy/mirrormaker.sh refuses to start without a usable configuration (no Java, no jars
needed), and the configuration tests/regions/mirror.py writes names its topics literally."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.regions.mirror import Flow, mm2_properties
from tests.services import DEPLOY_DIR


def mirrormaker(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(DEPLOY_DIR / "mirrormaker.sh"), *args],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("SCD_MM2_")},
            "SCD_HOME": str(tmp_path),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_start_without_a_configuration_fails_and_says_which_variable(tmp_path: Path) -> None:
    result = mirrormaker(tmp_path, "start")
    assert result.returncode == 1
    assert "SCD_MM2_CONFIG" in result.stderr


def test_start_with_a_missing_file_fails(tmp_path: Path) -> None:
    result = mirrormaker(tmp_path, "start", SCD_MM2_CONFIG=str(tmp_path / "none.properties"))
    assert result.returncode == 1
    assert "no file at" in result.stderr


def test_an_unknown_command_is_a_usage_error(tmp_path: Path) -> None:
    result = mirrormaker(tmp_path, "explode")
    assert result.returncode == 2
    assert "usage" in result.stderr


def test_status_of_a_stopped_instance_is_3(tmp_path: Path) -> None:
    assert mirrormaker(tmp_path, "status", SCD_MM2_NAME="mm2-none").returncode == 3


def test_topic_names_are_patterns_matching_only_themselves() -> None:
    text = mm2_properties(
        {"ra": "127.0.0.1:1", "rb": "127.0.0.1:2"}, [Flow("ra", "rb", ["p.package", "p.command"])]
    )
    line = next(x for x in text.splitlines() if x.startswith("ra->rb.topics = "))
    # A properties file reads "\\." as "\.": the regex MirrorMaker compiles.
    pattern = re.compile(line.split(" = ", 1)[1].replace("\\\\", "\\"))
    assert pattern.fullmatch("p.package")
    assert pattern.fullmatch("p.command")
    assert not pattern.fullmatch("pxpackage")
    assert "replication.factor = 1" in text
