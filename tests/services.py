"""The one fixture interface to real infrastructure used by the integration tests.

Each service comes from (in order): environment variables, testcontainers when a Docker engine
answers, else the native processes started by the deploy/ scripts. Tests see only these
classes, never how the service was obtained.

Environment variables (``deploy/services.sh env`` prints them for the native services):

* ``SCD_TEST_KAFKA_BOOTSTRAP`` -- a Kafka bootstrap address (``host:port``);
* ``SCD_TEST_S3_ENDPOINT``, ``SCD_TEST_S3_ACCESS_KEY``, ``SCD_TEST_S3_SECRET_KEY``,
  ``SCD_TEST_S3_REGION`` -- an S3-compatible server;
* ``SCD_TEST_KAFKA_IMAGE``, ``SCD_TEST_S3_IMAGE`` -- the images of the testcontainers path
  (default: the ones deploy/ builds on this machine, ``KAFKA_IMAGE`` and ``S3_IMAGE``).

The testcontainers path runs only images already present in the engine: it never pulls (public
registries are out of reach from the machines scd is built on, and a pull that hangs for
minutes is worse than the native servers). An engine without those images means the native
servers, and ``container_fallback`` says why. testcontainers' reaper (Ryuk) is an image from
Docker Hub too, so it is turned off: every container is stopped by the fixture that started it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

    from journal.api import Journal


@dataclass(kw_only=True)
class Service:
    """A reachable server. The session's shared servers cannot be stopped by tests; a test that
    stops one takes its own (``own_native_kafka``, ``own_native_s3``, testcontainers)."""

    origin: str  # "env", "testcontainers" or "native"
    _stop: Callable[[], None] | None = field(default=None, repr=False)
    _start: Callable[[], None] | None = field(default=None, repr=False)

    def stop(self) -> None:
        assert self._stop is not None, f"this {type(self).__name__} cannot be stopped by tests"
        self._stop()

    def start(self) -> None:
        """Start again after stop(), on the same address and data (returns when ready)."""
        assert self._start is not None, f"this {type(self).__name__} cannot be started by tests"
        self._start()


@dataclass
class KafkaService(Service):
    """A reachable Kafka broker."""

    bootstrap: str


@dataclass
class S3Service(Service):
    """A reachable S3-compatible server."""

    endpoint_url: str
    access_key: str
    secret_key: str
    region: str


REPO_ROOT = Path(__file__).resolve().parent.parent
DEPLOY_DIR = REPO_ROOT / "deploy"

# The first native start installs the servers before starting them (fetching jars, and a Go
# build of several minutes on a 2-core machine); 20 minutes fails a hung script without
# cutting a slow first install short.
DEPLOY_SCRIPT_TIMEOUT_S = 1200.0
# Probing Docker must not slow down machines without it: 3 s is ample for a local engine.
DOCKER_PING_TIMEOUT_S = 3
# After a container is started or unpaused, how long its service may take to answer again
# (a Kafka broker resuming from a pause is back within seconds; 60 s covers a loaded host).
CONTAINER_READY_TIMEOUT_S = 60.0
# Pause between readiness attempts on a container.
CONTAINER_READY_POLL_S = 0.5
# Each readiness request may take this long before the attempt counts as failed.
CONTAINER_PROBE_REQUEST_TIMEOUT_S = 5.0

# Images of the testcontainers path, built on this machine by deploy/images (no image registry
# involved), as deploy/docker-compose.yml runs them: the Kafka image takes the apache/kafka
# image's KAFKA_* settings and CLUSTER_ID; the S3 image (versitygw) its root credentials from
# ROOT_ACCESS_KEY / ROOT_SECRET_KEY and serves on port 9000.
KAFKA_IMAGE = "scd-kafka:local"
S3_IMAGE = "scd-s3:local"
S3_CONTAINER_PORT = 9000
# The broker's controller listener inside its container (the client port is chosen per run).
KAFKA_CONTROLLER_PORT = 9093

# The broker settings of deploy/kafka.sh that tests depend on, for the Kafka container.
KAFKA_CONTAINER_ENV = {
    "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
    "KAFKA_MESSAGE_MAX_BYTES": "16777216",
    "KAFKA_REPLICA_FETCH_MAX_BYTES": "16777216",
    "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
    "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
    # Retention tests need deletions within seconds, as with the native broker.
    "KAFKA_LOG_RETENTION_CHECK_INTERVAL_MS": "5000",
    "KAFKA_LOG_INITIAL_TASK_DELAY_MS": "0",
}


class DeployScriptError(RuntimeError):
    """A deploy/ script failed; the message carries its output."""


def run_deploy(
    script: str, *args: str, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``deploy/<script> <args>`` and return its result (raise on failure if ``check``)."""
    proc = subprocess.run(
        ["bash", str(DEPLOY_DIR / script), *args],
        env=dict(env if env is not None else os.environ),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEPLOY_SCRIPT_TIMEOUT_S,
        check=False,
    )
    if check and proc.returncode != 0:
        raise DeployScriptError(
            f"deploy/{script} {' '.join(args)} exited with {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}--- stderr ---\n{proc.stderr}"
        )
    return proc


def native_defaults(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The SCD_TEST_* variables describing the native services (``deploy/services.sh env``)."""
    out = run_deploy("services.sh", "env", env=env).stdout
    values: dict[str, str] = {}
    for line in out.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            values[name] = value
    return values


@functools.cache
def docker_available() -> bool:
    """True when a Docker engine answers."""
    try:
        import docker

        docker.from_env(timeout=DOCKER_PING_TIMEOUT_S).ping()
    except Exception:
        return False
    return True


def kafka_image() -> str:
    return os.environ.get("SCD_TEST_KAFKA_IMAGE") or KAFKA_IMAGE


def s3_image() -> str:
    return os.environ.get("SCD_TEST_S3_IMAGE") or S3_IMAGE


def image_present(image: str) -> bool:
    """True when the engine holds ``image`` already (asked locally: nothing is pulled)."""
    try:
        import docker
        from docker.errors import ImageNotFound

        client = docker.from_env(timeout=DOCKER_PING_TIMEOUT_S)
        try:
            client.images.get(image)
        except ImageNotFound:
            return False
    except Exception:
        return False
    return True


def container_fallback(image: str) -> str | None:
    """Why the testcontainers path cannot run ``image`` here (None: it can)."""
    if not docker_available():
        return "no Docker engine answers"
    if not image_present(image):
        return (
            f"image {image} is not in the local engine (built by deploy/; "
            "nothing is pulled from a registry)"
        )
    return None


def _no_reaper() -> None:
    """Turn off testcontainers' reaper container, whose image would come from Docker Hub."""
    from testcontainers.core.config import testcontainers_config

    testcontainers_config.ryuk_disabled = True


def _publish_on_loopback(container: Any, container_port: int, host_port: int) -> None:
    """Publish ``container_port`` on 127.0.0.1:``host_port`` only (testcontainers' own
    with_bind_ports publishes on every address; docker-py takes an (address, port) pair)."""
    container.ports[f"{container_port}/tcp"] = ("127.0.0.1", host_port)


def _wait_until(ready: Callable[[], None], what: str) -> None:
    deadline = time.monotonic() + CONTAINER_READY_TIMEOUT_S
    while True:
        try:
            ready()
            return
        except Exception as exc:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what} not ready after {CONTAINER_READY_TIMEOUT_S}s") from exc
        time.sleep(CONTAINER_READY_POLL_S)


def _kafka_answers(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=CONTAINER_PROBE_REQUEST_TIMEOUT_S)
    if not metadata.brokers:
        raise RuntimeError("no broker registered yet")


def _s3_answers(endpoint_url: str, access_key: str, secret_key: str, region: str) -> None:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=region,
        config=Config(
            connect_timeout=CONTAINER_PROBE_REQUEST_TIMEOUT_S,
            read_timeout=CONTAINER_PROBE_REQUEST_TIMEOUT_S,
            retries={"max_attempts": 1},
        ),
    )
    client.list_buckets()


def _script_action(script: str, action: str, env: Mapping[str, str]) -> Callable[[], None]:
    def act() -> None:
        run_deploy(script, action, env=env)

    return act


# ---------------------------------------------------------------- Kafka


@contextmanager
def provide_kafka() -> Iterator[KafkaService]:
    """A Kafka broker for the test session, from the first source that is available."""
    bootstrap = os.environ.get("SCD_TEST_KAFKA_BOOTSTRAP")
    if bootstrap:
        yield KafkaService(bootstrap, origin="env")
    elif container_fallback(kafka_image()) is None:
        with kafka_container(kafka_image()) as service:
            yield service
    else:
        with _native_kafka() as service:
            yield service


@contextmanager
def kafka_container(image: str) -> Iterator[KafkaService]:
    """A single-node KRaft broker in a container of ``image`` (present locally), its client
    port published on 127.0.0.1 under the same number, which is what it advertises."""
    from testcontainers.core.container import DockerContainer

    _no_reaper()
    port = free_port()
    env = {
        "CLUSTER_ID": secrets.token_urlsafe(16)[:22],
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@localhost:{KAFKA_CONTROLLER_PORT}",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{port},CONTROLLER://:{KAFKA_CONTROLLER_PORT}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        **KAFKA_CONTAINER_ENV,
    }
    container: Any = DockerContainer(image)
    _publish_on_loopback(container, port, port)
    for name, value in env.items():
        container.with_env(name, value)
    container.start()
    try:
        bootstrap = f"127.0.0.1:{port}"
        _wait_until(lambda: _kafka_answers(bootstrap), f"Kafka container at {bootstrap}")

        # A paused container keeps its sockets open but answers nothing: to a client that is
        # a broker gone silent, the fault the outage tests need.
        def stop() -> None:
            container.get_wrapped_container().pause()

        def start() -> None:
            container.get_wrapped_container().unpause()
            _wait_until(lambda: _kafka_answers(bootstrap), f"Kafka container at {bootstrap}")

        yield KafkaService(bootstrap, origin="testcontainers", _stop=stop, _start=start)
    finally:
        _unpause_and_stop(container)


def native_services() -> tuple[KafkaService, S3Service]:
    """The native Kafka and S3 servers as ``deploy/services.sh env`` describes them (started
    or not: the caller starts them)."""
    native = native_defaults()
    kafka = KafkaService(native["SCD_TEST_KAFKA_BOOTSTRAP"], origin="native")
    s3 = S3Service(
        native["SCD_TEST_S3_ENDPOINT"],
        native["SCD_TEST_S3_ACCESS_KEY"],
        native["SCD_TEST_S3_SECRET_KEY"],
        native["SCD_TEST_S3_REGION"],
        origin="native",
    )
    return kafka, s3


@contextmanager
def _native_kafka() -> Iterator[KafkaService]:
    bootstrap = native_defaults()["SCD_TEST_KAFKA_BOOTSTRAP"]
    was_running = run_deploy("kafka.sh", "status", check=False).returncode == 0
    run_deploy("kafka.sh", "start")  # installs the broker first when needed
    try:
        yield KafkaService(
            bootstrap,
            origin="native",
        )
    finally:
        # Leave the machine as found: stop what this session started, and bring back a
        # broker that was already running (a test may have left it stopped).
        run_deploy("kafka.sh", "start" if was_running else "stop")


# ---------------------------------------------------------------- S3


@contextmanager
def provide_s3() -> Iterator[S3Service]:
    """An S3-compatible server for the test session, from the first source available."""
    endpoint = os.environ.get("SCD_TEST_S3_ENDPOINT")
    if endpoint:

        def setting(name: str) -> str:
            value = os.environ.get(name)
            if not value:
                raise ValueError(f"SCD_TEST_S3_ENDPOINT is set but {name} is not")
            return value

        access_key = setting("SCD_TEST_S3_ACCESS_KEY")
        secret_key = setting("SCD_TEST_S3_SECRET_KEY")
        region = os.environ.get("SCD_TEST_S3_REGION") or "us-east-1"
        yield S3Service(endpoint, access_key, secret_key, region, origin="env")
    elif container_fallback(s3_image()) is None:
        with s3_container(s3_image()) as service:
            yield service
    else:
        with _native_s3() as service:
            yield service


@contextmanager
def s3_container(image: str) -> Iterator[S3Service]:
    """An S3 server in a container of ``image`` (present locally), published on 127.0.0.1."""
    from testcontainers.core.container import DockerContainer

    _no_reaper()
    access_key, secret_key, region = "scdadmin", secrets.token_hex(16), "us-east-1"
    port = free_port()
    container: Any = DockerContainer(image)
    container.with_env("ROOT_ACCESS_KEY", access_key).with_env("ROOT_SECRET_KEY", secret_key)
    _publish_on_loopback(container, S3_CONTAINER_PORT, port)
    container.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"

        def answers() -> None:
            _s3_answers(endpoint, access_key, secret_key, region)

        _wait_until(answers, f"S3 container at {endpoint}")

        def stop() -> None:
            container.get_wrapped_container().pause()

        def start() -> None:
            container.get_wrapped_container().unpause()
            _wait_until(answers, f"S3 container at {endpoint}")

        yield S3Service(
            endpoint,
            access_key,
            secret_key,
            region,
            origin="testcontainers",
            _stop=stop,
            _start=start,
        )
    finally:
        _unpause_and_stop(container)


@contextmanager
def _native_s3() -> Iterator[S3Service]:
    settings = native_defaults()
    was_running = run_deploy("s3.sh", "status", check=False).returncode == 0
    run_deploy("s3.sh", "start")  # builds the server first when needed
    try:
        yield S3Service(
            settings["SCD_TEST_S3_ENDPOINT"],
            settings["SCD_TEST_S3_ACCESS_KEY"],
            settings["SCD_TEST_S3_SECRET_KEY"],
            settings["SCD_TEST_S3_REGION"],
            origin="native",
        )
    finally:
        run_deploy("s3.sh", "start" if was_running else "stop")


def _unpause_and_stop(container: Any) -> None:
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    if wrapped.status == "paused":  # a paused container cannot be stopped
        wrapped.unpause()
    container.stop()


# ---------------------------------------------------------------- private native servers


def scd_home() -> Path:
    return Path(os.environ.get("SCD_HOME") or Path.home() / ".scd")


@dataclass
class OwnServer:
    """A native server of this test's own (its own name, ports and data), which it may freeze
    (SIGSTOP: connections stay open, nothing answers) without touching the shared ones."""

    name: str
    pidfile: Path

    @contextmanager
    def frozen(self) -> Iterator[None]:
        import signal

        pid = int(self.pidfile.read_text().strip())
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)


@contextmanager
def own_native_kafka(hint: str) -> Iterator[tuple[KafkaService, OwnServer]]:
    """A broker of deploy/kafka.sh under its own name and ports, removed afterwards; the
    caller may stop, start or freeze it without touching the shared one."""
    name = f"kafka-{unique_name(hint)}"
    port, controller = free_port(), free_port()
    env = {
        **os.environ,
        "SCD_KAFKA_NAME": name,
        "SCD_KAFKA_PORT": str(port),
        "SCD_KAFKA_CONTROLLER_PORT": str(controller),
    }
    run_deploy("kafka.sh", "start", env=env)
    try:
        service = KafkaService(
            f"127.0.0.1:{port}",
            origin="native",
            _stop=_script_action("kafka.sh", "stop", env),
            _start=_script_action("kafka.sh", "start", env),
        )
        yield service, OwnServer(name, scd_home() / "run" / f"{name}.pid")
    finally:
        _remove_own("kafka.sh", name, env)


@contextmanager
def own_native_s3(hint: str) -> Iterator[tuple[S3Service, OwnServer]]:
    """An S3 server of deploy/s3.sh under its own name, port and credentials, removed
    afterwards."""
    name = f"s3-{unique_name(hint)}"
    port = free_port()
    access_key, secret_key, region = "scdtest", secrets.token_hex(16), "us-east-1"
    env = {
        **os.environ,
        "SCD_S3_NAME": name,
        "SCD_S3_PORT": str(port),
        "SCD_S3_ACCESS_KEY": access_key,
        "SCD_S3_SECRET_KEY": secret_key,
        "SCD_S3_REGION": region,
    }
    run_deploy("s3.sh", "start", env=env)
    try:
        service = S3Service(
            f"http://127.0.0.1:{port}",
            access_key,
            secret_key,
            region,
            origin="native",
            _stop=_script_action("s3.sh", "stop", env),
            _start=_script_action("s3.sh", "start", env),
        )
        yield service, OwnServer(name, scd_home() / "run" / f"{name}.pid")
    finally:
        _remove_own("s3.sh", name, env)


def _remove_own(script: str, name: str, env: Mapping[str, str]) -> None:
    run_deploy(script, "stop", env=env)
    shutil.rmtree(scd_home() / name, ignore_errors=True)
    for leftover in (scd_home() / "logs" / f"{name}.log", scd_home() / "run" / f"{name}.lock"):
        leftover.unlink(missing_ok=True)


# ---------------------------------------------------------------- helpers


# Room for suffixes: S3 bucket names stop at 63 characters, and tests append their own parts.
_NAME_HINT_CHARS = 20


# The journal's topics by kind: the name fields of journal.settings.TopicSettings.
TOPIC_KINDS = ("package", "status", "discovery", "command", "event")


def unique_topics(prefix: str) -> dict[str, str]:
    """A test's own topic name per kind on a shared broker: ``prefix.kind``."""
    return {kind: f"{prefix}.{kind}" for kind in TOPIC_KINDS}


def unique_name(hint: str) -> str:
    """A short name valid for Kafka topics and S3 buckets, unique across test runs.

    Lowercase letters, digits and hyphens; starts with a letter; the hint (usually the test
    name) makes leftovers on a shared server recognisable.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", hint.lower().removeprefix("test_")).strip("-")
    slug = slug[:_NAME_HINT_CHARS].strip("-")
    if not slug[:1].isalpha():
        slug = f"t{slug}"
    return f"{slug}-{secrets.token_hex(4)}"


def java_available() -> bool:
    return shutil.which("java") is not None


# Delta rebuilds table state with 50 tasks and Spark shuffles into 200 by default: on small
# test tables that is pure overhead, so both use 2 tasks (one per core of a small runner).
SPARK_TEST_PARALLELISM = 2
# The driver listens on the loopback interface only.
LOOPBACK_DRIVER = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


@contextmanager
def local_spark() -> Iterator[Any]:
    """A local SparkSession with Delta Lake and s3a on its classpath.

    The JVM that the first session starts keeps its classpath for the life of the Python
    process, so a test run must share one session, created with every jar any test needs:
    the Delta jars and the s3a filesystem (S3 settings come later, see ``use_s3``).
    """
    from subscriber.settings import SubscriberSettings
    from subscriber.spark import spark_session

    # The subscriber's own Spark settings, with a larger heap: one session serves a whole
    # test run's stores.
    settings = SubscriberSettings(
        spark_master="local[2]",
        spark_jars=spark_jars(s3a=True),
        spark_shuffle_partitions=SPARK_TEST_PARALLELISM,
        spark_class_archive=spark_class_archive(),
        spark_driver_memory="1g",
    )
    spark = spark_session(settings, "scd-tests", extra=LOOPBACK_DRIVER)
    try:
        yield spark
    finally:
        spark.stop()


def s3_client(s3: S3Service) -> S3Client:
    """A boto3 client of ``s3`` with its credentials."""
    import boto3

    client: S3Client = boto3.session.Session().client(
        "s3",
        endpoint_url=s3.endpoint_url,
        aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key,
        region_name=s3.region,
    )
    return client


def s3a_settings(s3: S3Service) -> dict[str, str]:
    """The Hadoop settings of an s3a:// filesystem on ``s3``, its credentials with them."""
    from subscriber.spark import ACCESS_KEY, SECRET_KEY

    return {
        "fs.s3a.endpoint": s3.endpoint_url,
        "fs.s3a.endpoint.region": s3.region,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": str(s3.endpoint_url.startswith("https")).lower(),
        ACCESS_KEY: s3.access_key,
        SECRET_KEY: s3.secret_key,
    }


def use_s3(spark: Any, s3: S3Service) -> None:
    """Point the session's s3a:// filesystem at ``s3`` (for buckets opened from now on)."""
    from subscriber.spark import set_hadoop

    set_hadoop(spark, s3a_settings(s3))


def spark_class_archive() -> Path | None:
    """The class-data archive of the tests' Spark JVMs (subscriber/spark_archive.py) in
    SCD_HOME, named after the JDK and Spark install it is valid for; built by the first caller
    (about 90 s, once per install). None while another process builds it: its caller's JVMs
    start without it meanwhile."""
    import fcntl

    from subscriber.settings import SubscriberSettings
    from subscriber.spark_archive import archive_name

    archive = scd_home() / "spark" / archive_name(SubscriberSettings(spark_jars=spark_jars()))
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.with_suffix(".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        if not archive.is_file():
            _remove_orphaned_class_archives(archive.parent)
            built = subprocess.run(
                [sys.executable, "-m", "scd", "spark-archive", str(archive)],
                env={**os.environ, "SCD_SUBSCRIBER_SPARK_JARS": ",".join(spark_jars())},
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert built.returncode == 0, f"scd spark-archive failed:\n{built.stderr[-3000:]}"
    return archive


def _remove_orphaned_class_archives(folder: Path) -> None:
    """Archives of Spark installs that are gone (each virtualenv is one),
    about 190 MB each."""
    from subscriber.spark import class_archive_fingerprint_file, read_class_archive_fingerprint

    for archive in folder.glob("classes-*.jsa"):
        try:
            jars = json.loads(read_class_archive_fingerprint(archive) or "null")["spark_jars"]
        except (OSError, ValueError, KeyError, TypeError):
            jars = None
        if jars is None or not Path(jars).is_dir():
            fingerprint = class_archive_fingerprint_file(archive)
            for path in (archive, fingerprint, archive.with_suffix(".lock")):
                path.unlink(missing_ok=True)


def spark_jars(*, s3a: bool = False) -> list[str]:
    """Jars to add to a local SparkSession (``spark.jars``): Delta Lake, and s3a if asked.

    Fetched by deploy/spark-jars.sh on first use (needs Maven); instant afterwards.
    """
    out = run_deploy("spark-jars.sh", *(["--s3a"] if s3a else [])).stdout
    jars: list[str] = []
    for list_file in out.splitlines():
        jars.extend(line for line in Path(list_file).read_text().splitlines() if line)
    return jars


# Offsets read back from a topic's end to find its last record: a publisher's leader writes in
# transactions, whose markers take offsets of their own (one per batch, at least one record).
TAIL_OFFSETS = 64


def last_record_offset(journal: Journal, topic: str, partition: int = 0) -> int:
    """The offset of the last record of ``topic`` (-1: none); transaction markers after it are
    not records. Reads the last TAIL_OFFSETS offsets, within 30 s."""
    from journal.api import Position

    end = journal.latest_offset(topic, partition)
    last = -1
    deadline = time.monotonic() + 30.0
    with journal.consumer(topic, Position.latest(-TAIL_OFFSETS), [partition]) as consumer:
        while consumer.positions().get(partition, end) < end and time.monotonic() < deadline:
            for record in consumer.poll(0.5):
                if record.offset < end:
                    last = max(last, record.offset)
    return last


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
