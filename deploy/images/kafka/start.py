"""Entry point of the scd Kafka image: a single-node KRaft broker configured like the
apache/kafka image, so that deploy/docker-compose.yml serves both image sets.

Every variable KAFKA_<NAME> becomes the broker setting <name> (lower case, "_" -> ".",
"__" -> "_", "___" -> "-"), except the JVM options KAFKA_HEAP_OPTS and KAFKA_OPTS. CLUSTER_ID
formats an empty data directory (KAFKA_LOG_DIRS) before the first start.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

LIBS = "/opt/kafka/libs/*"
CONFIG = "/tmp/server.properties"
LOG4J = "-Dlog4j2.configurationFile=/opt/kafka/log4j2.properties"
JVM_VARIABLES = {"KAFKA_HEAP_OPTS", "KAFKA_OPTS"}


def setting_name(variable: str) -> str:
    name = variable.removeprefix("KAFKA_").lower()
    return (
        name.replace("___", "\0")
        .replace("__", "\1")
        .replace("_", ".")
        .replace("\0", "-")
        .replace("\1", "_")
    )


def main() -> None:
    settings = {
        setting_name(name): value
        for name, value in sorted(os.environ.items())
        if name.startswith("KAFKA_") and name not in JVM_VARIABLES
    }
    with open(CONFIG, "w") as out:
        out.writelines(f"{name}={value}\n" for name, value in settings.items())
    log_dirs = settings.get("log.dirs") or settings.get("log.dir") or "/tmp/kafka-logs"
    if not os.path.exists(os.path.join(log_dirs.split(",")[0], "meta.properties")):
        cluster_id = os.environ.get("CLUSTER_ID")
        if not cluster_id:
            sys.exit("CLUSTER_ID must be set to format an empty data directory")
        subprocess.run(
            [
                "java",
                "-Xmx128m",
                LOG4J,
                "-Dscd.log.level=WARN",
                "-cp",
                LIBS,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                CONFIG,
                "--ignore-formatted",
            ],
            check=True,
        )
    heap = shlex.split(os.environ.get("KAFKA_HEAP_OPTS", "-Xmx512m"))
    extra = shlex.split(os.environ.get("KAFKA_OPTS", ""))
    os.execvp(
        "java",
        [
            "java",
            *heap,
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            LOG4J,
            *extra,
            "-cp",
            LIBS,
            "kafka.Kafka",
            CONFIG,
        ],
    )


if __name__ == "__main__":
    main()
