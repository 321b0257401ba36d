"""What the benches take from this machine: the Spark jars deploy/ fetched, a free port."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
SPARK_POM = REPO_DIR / "deploy" / "spark" / "pom.xml"
# Spark's Kafka source asks for the token provider of its own version; the pom pins 4.0.0 for
# pyspark 4.0.1 (whose 4.0.1 does not resolve here), which another Spark must not get.
# The benchmarks' Spark drivers listen on the loopback interface only.
LOOPBACK_DRIVER = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
TOKEN_PROVIDER = "org.apache.spark:spark-token-provider-kafka-0-10_2.13"


def spark_jars(*, kafka: bool = False) -> list[str]:
    """Delta's jars (and with ``kafka`` Spark's Kafka source) for the pyspark and delta-spark
    of this interpreter: those deploy/spark-jars.sh fetched when they are the versions
    deploy/spark/pom.xml names (the project's pins), else :func:`engine_jars` (instant once
    fetched)."""
    pinned = pom_versions()
    installed = engine_versions()
    if (installed["spark"], installed["delta"]) != (pinned["spark"], pinned["delta"]):
        return engine_jars(installed, kafka=kafka)
    command = ["bash", str(REPO_DIR / "deploy" / "spark-jars.sh")]
    if kafka:
        command.append("--kafka")
    lists = subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()
    return [jar for name in lists for jar in Path(name).read_text().split()]


def pom_versions() -> dict[str, str]:
    """The Spark, Delta and Hadoop versions deploy/spark/pom.xml fetches jars for."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    props = ET.parse(SPARK_POM).getroot().find("m:properties", ns)
    if props is None:
        raise ValueError(f"{SPARK_POM}: no <properties>")

    def prop(name: str) -> str:
        node = props.find(f"m:{name}", ns)
        if node is None or not node.text:
            raise ValueError(f"{SPARK_POM}: no <{name}>")
        return node.text.strip()

    return {
        "spark": prop("spark.version"),
        "delta": prop("delta.version"),
        "hadoop": prop("hadoop.version"),
    }


def engine_versions() -> dict[str, str]:
    """This interpreter's pyspark and delta-spark, and the Hadoop its pyspark ships."""
    client = sorted(pyspark_jars_dir().glob("hadoop-client-api-*.jar"))
    match = re.search(r"hadoop-client-api-(.+)\.jar$", client[0].name) if client else None
    return {
        "spark": importlib.metadata.version("pyspark"),
        "delta": importlib.metadata.version("delta-spark"),
        "hadoop": match.group(1) if match else "",
    }


def engine_jars(versions: dict[str, str], *, kafka: bool = False, s3a: bool = False) -> list[str]:
    """The jars of another pyspark/delta-spark pair than the pins (to measure it beside them,
    bench/engines.py), fetched once with Maven from deploy/spark/pom.xml with its versions
    overridden, into ``$SCD_HOME/jars/engine-spark<S>-delta<D>/`` (one list file per set, as
    deploy/spark-jars.sh writes them). Delta's unsuffixed artifact (delta-spark_2.13) is the
    build for the newest Spark that Delta release supports, which must be this pyspark's
    minor (delta-spark's Python package declares the pyspark range)."""
    home = Path(os.environ.get("SCD_HOME") or Path.home() / ".scd")
    root = home / "jars" / f"engine-spark{versions['spark']}-delta{versions['delta']}"
    sets = ["delta", *(["kafka"] if kafka else []), *(["s3a"] if s3a else [])]
    jars: list[str] = []
    for name in sets:
        listing = root / f"{name}.txt"
        if not listing.is_file():
            fetch_engine_set(name, versions, root)
        jars.extend(listing.read_text().split())
    return jars


def fetch_engine_set(name: str, versions: dict[str, str], root: Path) -> None:
    target, partial = root / name, root / f"{name}.tmp"
    overrides = [f"-D{key}.version={value}" for key, value in versions.items() if value]
    print(f"[local] fetching the '{name}' jars of {versions} into {target}", file=sys.stderr)
    subprocess.run(["rm", "-rf", str(partial)], check=True)
    mvn = ["mvn", "-B", "-q", "-f", str(SPARK_POM), *overrides]
    subprocess.run(
        [
            *mvn,
            "-P",
            name,
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={partial}",
        ],
        check=True,
        stdout=sys.stderr,
    )
    if name == "kafka":
        for stale in partial.glob("spark-token-provider-kafka-*.jar"):
            stale.unlink()
        subprocess.run(
            [
                *mvn,
                "dependency:copy",
                f"-Dartifact={TOKEN_PROVIDER}:{versions['spark']}",
                f"-DoutputDirectory={partial}",
            ],
            check=True,
            stdout=sys.stderr,
        )
    # As deploy/spark/pom.xml does for the pins: no second copy of a jar pyspark ships (newer
    # Delta releases bring Jackson, Parquet, Hadoop and log4j jars of other versions).
    shipped = {artifact(jar.name) for jar in pyspark_jars_dir().glob("*.jar")}
    for jar in partial.glob("*.jar"):
        if artifact(jar.name) in shipped:
            jar.unlink()
    subprocess.run(["rm", "-rf", str(target)], check=True)
    partial.rename(target)
    listing = sorted(str(jar) for jar in target.glob("*.jar"))
    if not listing:
        raise RuntimeError(f"no jars were fetched into {target}")
    (root / f"{name}.txt").write_text("\n".join(listing) + "\n")


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def artifact(jar_name: str) -> str:
    """A jar's artifact name without its version (``zstd-jni-1.5.7-3.jar``: ``zstd-jni``)."""
    match = re.match(r"^(.+)-(\d+(?:\.\d+)+[\w.-]*)\.jar$", jar_name)
    return match.group(1) if match else jar_name
