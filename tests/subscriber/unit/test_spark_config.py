"""Subscriber settings that size the process: the JVM heap (a setting with a clear rule, so a
typo or a hostile value is refused at start instead of reaching spark-submit), the fold
growth, and the class archive's fingerprint (an archive built for another install is not
mapped)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from blobstore.settings import BlobStoreSettings
from subscriber.settings import SubscriberSettings
from subscriber.spark import (
    class_archive_fingerprint,
    class_archive_fingerprint_file,
    default_class_archive_name,
    driver_class_path,
    s3a_credentials,
    spark_config,
)


def test_spark_evaluates_without_generated_code_unless_asked() -> None:
    interpreted = spark_config(SubscriberSettings())
    assert interpreted["spark.sql.codegen.wholeStage"] == "false"
    assert interpreted["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
    generated = spark_config(SubscriberSettings(spark_codegen=True))
    assert "spark.sql.codegen.wholeStage" not in generated
    assert "spark.sql.codegen.factoryMode" not in generated


def test_the_jvm_heap_is_512m_unless_set() -> None:
    assert spark_config(SubscriberSettings())["spark.driver.memory"] == "512m"
    assert spark_config(SubscriberSettings(spark_driver_memory="2g"))["spark.driver.memory"] == "2g"
    assert SubscriberSettings(spark_driver_memory="450M").spark_driver_memory == "450M"


@pytest.mark.parametrize(
    "value",
    ["", "512", "0m", "1.5g", "512mb", "-1g", "1g --conf x=y", "9999999g", "512m\n", "449m", "4k"],
)
def test_a_heap_that_is_not_a_jvm_size_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="spark_driver_memory"):
        SubscriberSettings(spark_driver_memory=value)


@pytest.mark.parametrize("value", ["0", "-0.5", "10.5", "nan", "inf", "half"])
def test_a_fold_growth_out_of_range_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="maintenance_fold_growth"):
        SubscriberSettings.model_validate({"maintenance_fold_growth": value})


def test_the_archive_fingerprint_follows_the_jdk_and_the_spark_jars_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = class_archive_fingerprint()
    assert class_archive_fingerprint() == here
    name = default_class_archive_name()
    # The Spark jars of another install (another virtualenv: the same version, another path).
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "other-venv" / "pyspark"))
    assert class_archive_fingerprint() != here
    assert default_class_archive_name() != name
    monkeypatch.delenv("SPARK_HOME")
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert class_archive_fingerprint() != here


def test_the_archive_fingerprint_follows_the_jars_on_the_driver_s_class_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The JDK maps no archive once a jar on the class path it was built with changed (its size
    or time): an archive built before scd's own jar was rebuilt must not claim to match."""
    jar = tmp_path / "scd-hadoop-localfs-1.jar"
    jar.write_bytes(b"jar")
    settings = SubscriberSettings(spark_jars=[str(jar)], spark_master="local[2]")
    assert driver_class_path(settings) == [str(jar)]
    built_for = class_archive_fingerprint(driver_class_path(settings))
    assert built_for != class_archive_fingerprint()
    name = default_class_archive_name(driver_class_path(settings))
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"archive")
    class_archive_fingerprint_file(archive).write_text(built_for + "\n")
    mapped = settings.model_copy(update={"spark_class_archive": archive})
    assert (
        f"-XX:SharedArchiveFile={archive}" in spark_config(mapped)["spark.driver.extraJavaOptions"]
    )
    stat = jar.stat()
    os.utime(jar, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the jar was rebuilt
    assert class_archive_fingerprint(driver_class_path(settings)) != built_for
    assert default_class_archive_name(driver_class_path(settings)) != name
    assert "spark.driver.extraJavaOptions" not in spark_config(mapped)
    assert "built for another JDK or Spark install" in caplog.text
    # A cluster's driver has no local filesystem jar: another class path, another archive.
    cluster = mapped.model_copy(update={"spark_master": "spark://master:7077"})
    assert driver_class_path(cluster) == []


def test_an_archive_built_for_another_install_is_not_mapped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"archive")
    settings = SubscriberSettings(spark_class_archive=archive)
    option = f"-XX:SharedArchiveFile={archive}"
    # Without a fingerprint (an archive from elsewhere): the JDK's own check decides.
    assert option in spark_config(settings)["spark.driver.extraJavaOptions"]
    class_archive_fingerprint_file(archive).write_text(class_archive_fingerprint() + "\n")
    assert option in spark_config(settings)["spark.driver.extraJavaOptions"]
    class_archive_fingerprint_file(archive).write_text("0123456789abcdef\n")
    assert "spark.driver.extraJavaOptions" not in spark_config(settings)
    assert "built for another JDK or Spark install" in caplog.text


@pytest.mark.parametrize("fingerprint", ["random bytes", "a directory", "huge"])
def test_a_hostile_fingerprint_file_means_another_install(tmp_path: Path, fingerprint: str) -> None:
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"archive")
    described = class_archive_fingerprint_file(archive)
    if fingerprint == "random bytes":
        described.write_bytes(b"\xff\xfe\x00" + os.urandom(4096))
    elif fingerprint == "a directory":
        described.mkdir()
    else:
        described.write_text(class_archive_fingerprint() + "x" * (1 << 24))  # 16 MiB
    config = spark_config(SubscriberSettings(spark_class_archive=archive))
    assert "spark.driver.extraJavaOptions" not in config


def test_the_fork_free_local_filesystem_is_used_with_its_jar_and_a_local_master() -> None:
    jar = "/opt/jars/scd-hadoop-localfs-1.jar"
    jars = ["/opt/jars/delta-spark_2.13-4.0.1.jar", jar]
    local = spark_config(SubscriberSettings(spark_jars=jars))
    assert local["spark.driver.extraClassPath"] == jar
    assert local["spark.hadoop.fs.file.impl"] == "io.scd.hadoop.LocalFileSystem"
    assert local["spark.hadoop.fs.AbstractFileSystem.file.impl"] == "io.scd.hadoop.LocalFs"
    # Executors of a cluster would not find the class: Hadoop's own filesystem there.
    cluster = spark_config(SubscriberSettings(spark_jars=jars, spark_master="spark://m:7077"))
    without = spark_config(SubscriberSettings(spark_jars=jars[:1]))
    for config in (cluster, without):
        assert "spark.driver.extraClassPath" not in config
        assert not any(key.startswith("spark.hadoop.fs.") for key in config)


def test_installed_jars_go_on_the_class_paths_instead_of_being_shipped() -> None:
    """Executors that have the jars at the same paths read them there: the driver does not copy
    them to each of its executors (spark.jars would)."""
    jars = ["/opt/jars/delta-spark_2.13-4.0.1.jar", "/opt/jars/bundle-2.24.6.jar"]
    shipped = spark_config(SubscriberSettings(spark_jars=jars, spark_master="spark://m:7077"))
    assert shipped["spark.jars"] == ",".join(jars)
    assert "spark.executor.extraClassPath" not in shipped
    installed = spark_config(
        SubscriberSettings(
            spark_jars=jars, spark_master="spark://m:7077", spark_jars_installed=True
        )
    )
    assert "spark.jars" not in installed
    assert installed["spark.driver.extraClassPath"] == ":".join(jars)
    assert installed["spark.executor.extraClassPath"] == ":".join(jars)
    assert "spark.jars.packages" not in installed


def test_the_s3_credentials_are_not_spark_settings() -> None:
    """pyspark hands Spark settings to spark-submit on its command line (readable by every
    local user): the credentials go into the running JVM's Hadoop configuration instead."""
    blobs = BlobStoreSettings(
        backend="s3",
        endpoint_url="http://127.0.0.1:9000",
        bucket="scd-blobs",
        access_key="AKIDEXAMPLE",
        secret_key=SecretStr("s3-secret-value"),
    )
    settings = SubscriberSettings(store_path="s3a://scd-stores/store", blobstore=blobs)
    config = spark_config(settings)
    assert config["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert not [k for k, v in config.items() if "secret" in k or "s3-secret-value" in v]
    assert "AKIDEXAMPLE" not in config.values()
    assert s3a_credentials(settings) == {
        "fs.s3a.access.key": "AKIDEXAMPLE",
        "fs.s3a.secret.key": "s3-secret-value",
    }
    local = BlobStoreSettings(backend="local", local_root=Path("/tmp/blobs"))
    assert s3a_credentials(SubscriberSettings(blobstore=local)) == {}
