"""What the project relies on from the test infrastructure itself (tests/services.py, deploy/).

Kafka: broker limits as configured by deploy/kafka.sh, and records surviving a broker restart.
S3: the operations the blob store uses, against whichever server the fixtures provide.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined,unused-ignore]
    AdminClient,
    NewTopic,
)

from tests.services import KafkaService, S3Service


@pytest.fixture(scope="module")
def kafka_service(own_kafka: KafkaService) -> KafkaService:
    """A test here stops the broker: this module's own, not the shared one."""
    return own_kafka


@pytest.fixture(scope="module")
def s3_service(own_s3: S3Service) -> S3Service:
    """A test here stops the S3 server: this module's own, not the shared one."""
    return own_s3


pytestmark = pytest.mark.integration

# Generous bounds for one operation on a loaded 2-core runner; a healthy local server answers
# in milliseconds.
KAFKA_OP_TIMEOUT_S = 30.0
# Long enough for a producer to send the metadata request that would auto-create a topic if
# the broker allowed it (librdkafka asks within milliseconds of the first produce()).
AUTO_CREATE_GRACE_S = 1.0
# Consumer poll slice while reading a topic back.
POLL_SLICE_S = 0.5
# Part size of multipart uploads: S3's minimum for all parts but the last.
PART_SIZE = 5 * 1024 * 1024


def _create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])
    futures[topic].result(KAFKA_OP_TIMEOUT_S)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.max.bytes": 4 * 1024 * 1024,
        }
    )
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for value in values:
        producer.produce(topic, value=value, on_delivery=on_delivery)
    assert producer.flush(KAFKA_OP_TIMEOUT_S) == 0
    assert errors == []


def _read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "scd-infra-test", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + KAFKA_OP_TIMEOUT_S
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(POLL_SLICE_S)
            if msg is not None and msg.error() is None:
                value = msg.value()
                assert value is not None
                values.append(value)
    finally:
        consumer.close()
    return values


def test_broker_rejects_auto_creation_and_accepts_big_records_per_topic(
    kafka_service: KafkaService, unique_name: str
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_service.bootstrap})
    producer = Producer({"bootstrap.servers": kafka_service.bootstrap})
    producer.produce(f"{unique_name}-never-created", value=b"x")
    producer.flush(AUTO_CREATE_GRACE_S)
    topics = admin.list_topics(timeout=KAFKA_OP_TIMEOUT_S).topics
    assert f"{unique_name}-never-created" not in topics

    topic = f"{unique_name}-big"
    _create_topic(kafka_service.bootstrap, topic, {"max.message.bytes": str(4 * 1024 * 1024)})
    big = os.urandom(3 * 1024 * 1024)
    _produce(kafka_service.bootstrap, topic, [big])
    assert _read_all(kafka_service.bootstrap, topic, 1) == [big]


@pytest.mark.slow
def test_records_survive_a_broker_restart(kafka_service: KafkaService, unique_name: str) -> None:
    topic = f"{unique_name}-restart"
    _create_topic(kafka_service.bootstrap, topic)
    values = [f"record-{i}".encode() for i in range(50)]
    _produce(kafka_service.bootstrap, topic, values)
    kafka_service.stop()
    kafka_service.start()
    assert _read_all(kafka_service.bootstrap, topic, len(values)) == values


def _s3(service: S3Service) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=service.endpoint_url,
        aws_access_key_id=service.access_key,
        aws_secret_access_key=service.secret_key,
        region_name=service.region,
    )


def test_s3_operations_the_blob_store_uses(s3_service: S3Service, unique_name: str) -> None:
    s3 = _s3(s3_service)
    bucket = unique_name
    s3.create_bucket(Bucket=bucket)

    s3.put_object(Bucket=bucket, Key="small/a.txt", Body=b"hello", Metadata={"kind": "small"})
    assert s3.get_object(Bucket=bucket, Key="small/a.txt")["Body"].read() == b"hello"
    assert s3.head_object(Bucket=bucket, Key="small/a.txt")["Metadata"] == {"kind": "small"}

    data = os.urandom(2 * PART_SIZE + 12345)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="big/b.bin")
    parts = []
    for number, start in enumerate(range(0, len(data), PART_SIZE), start=1):
        part = s3.upload_part(
            Bucket=bucket,
            Key="big/b.bin",
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=data[start : start + PART_SIZE],
        )
        parts.append({"PartNumber": number, "ETag": part["ETag"]})
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="big/b.bin",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": parts},
    )
    body = s3.get_object(Bucket=bucket, Key="big/b.bin")["Body"].read()
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()

    # Metadata update in place: copy onto itself with REPLACE.
    s3.copy_object(
        Bucket=bucket,
        Key="big/b.bin",
        CopySource={"Bucket": bucket, "Key": "big/b.bin"},
        MetadataDirective="REPLACE",
        Metadata={"state": "complete"},
    )
    head = s3.head_object(Bucket=bucket, Key="big/b.bin")
    assert head["Metadata"] == {"state": "complete"}
    assert head["ContentLength"] == len(data)

    listed = s3.list_objects_v2(Bucket=bucket, Prefix="big/")
    assert [obj["Key"] for obj in listed["Contents"]] == ["big/b.bin"]
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="small/missing")
    assert missing.value.response["Error"]["Code"] in ("404", "NoSuchKey")

    for key in ("small/a.txt", "big/b.bin"):
        s3.delete_object(Bucket=bucket, Key=key)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    s3.delete_bucket(Bucket=bucket)


@pytest.mark.slow
def test_objects_survive_an_s3_server_restart(s3_service: S3Service, unique_name: str) -> None:
    s3 = _s3(s3_service)
    s3.create_bucket(Bucket=unique_name)
    s3.put_object(Bucket=unique_name, Key="k", Body=b"kept", Metadata={"m": "1"})
    s3_service.stop()
    s3_service.start()
    got = _s3(s3_service).get_object(Bucket=unique_name, Key="k")
    assert (got["Body"].read(), got["Metadata"]) == (b"kept", {"m": "1"})
