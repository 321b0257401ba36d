"""deploy/spark-jars.sh keys the jars it installs in $SCD_HOME by what they are made from (the
Maven pom, scd's own Java sources), by content: two checkouts of the same sources share them,
and a change of a source is a new set. (A key holding the pom's path made each checkout rebuild
scd's jar in place, under the running JVMs of another: classes not found, class archive
refused.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests import services

SCRIPT_TIMEOUT_S = 60.0
OWN_SOURCES = Path("subscriber") / "jvm"


def checkout(root: Path) -> Path:
    """The parts of the repository spark-jars.sh reads, copied under ``root``."""
    repo = services.DEPLOY_DIR.parent
    shutil.copytree(services.DEPLOY_DIR, root / "deploy")
    shutil.copytree(repo / OWN_SOURCES, root / OWN_SOURCES)
    return root


def fingerprint(checkout: Path, home: Path, jar_set: str = "delta") -> str:
    done = subprocess.run(
        ["bash", str(checkout / "deploy" / "spark-jars.sh"), "--fingerprint", jar_set],
        env={**os.environ, "SCD_HOME": str(home)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=True,
    )
    return done.stdout.strip()


def test_two_checkouts_of_the_same_sources_share_the_jars(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, second = checkout(tmp_path / "a"), checkout(tmp_path / "b")
    key = fingerprint(first, home)
    assert len(key) == 16, key
    assert fingerprint(second, home) == key
    assert fingerprint(second, home, "s3a") == fingerprint(first, home, "s3a")


def test_a_changed_source_or_pom_is_a_new_set(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = checkout(tmp_path / "a")
    delta, s3a = fingerprint(root, home), fingerprint(root, home, "s3a")
    source = next((root / OWN_SOURCES / "src").rglob("*.java"))
    source.write_text(source.read_text() + "\n// changed\n")
    assert fingerprint(root, home) != delta
    assert fingerprint(root, home, "s3a") == s3a  # the s3a jars are not scd's own
    pom = root / "deploy" / "spark" / "pom.xml"
    pom.write_text(pom.read_text() + "\n<!-- changed -->\n")
    assert fingerprint(root, home, "s3a") != s3a
