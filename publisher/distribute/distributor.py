"""One distribute request, end to end: build the package, spill it if large, put the
PackageMessage on the package topic and answer with the offset it got.

Order matters for "nothing half-written": the message is encoded and size-checked before any
blob is stored; a spilled blob is stored before the message is sent (a subscriber may fetch it
the moment the record is visible) and stamped with the offset after. A failed send leaves an
unstamped blob that the cleanup stamps and later deletes; the blob is never deleted on a failed
send, because a send that timed out may still have reached the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from journal.api import Journal
from journal.sequence import Sequencer
from journal.wire.messages import PackageMessage, encode
from journal.wire.signing import RecordSigner
from publisher.distribute.builder import BuiltPackage, PackageBuilder
from publisher.distribute.request import Action, DistributeRequest
from publisher.distribute.spill import PackageSpill
from publisher.distribute.values import UploadedPart
from publisher.metrics import PublisherMetrics
from runtime.errors import ScdError

log = logging.getLogger(__name__)

# The largest sequence number (its varint is the longest): the size check uses it.
MAX_SEQUENCE = 2**63 - 1


@dataclass(frozen=True)
class DistributeResult:
    package_id: str
    action: Action
    offset: int
    size: int
    spilled: bool
    blob_key: str | None
    paths: list[str]
    deep_paths: list[str]
    node_count: int
    binaries_referenced: int
    throttled_s: float  # how long the request was held back before it was built


class Distributor:
    def __init__(
        self,
        journal: Journal,
        topic: str,
        builder: PackageBuilder,
        spill: PackageSpill,
        *,
        agent_name: str,
        instance_id: str,
        metrics: PublisherMetrics,
        throttle: Callable[[], float],
        sequencer: Sequencer,
        signer: RecordSigner | None = None,
    ) -> None:
        """``throttle`` holds a request back as long as throttling asks
        (publisher/queues/throttle.py) and returns how long that was; ``sequencer`` numbers each
        package record (journal/sequence.py); ``signer`` signs it (signed records)."""
        self.journal = journal
        self.topic = topic
        self.builder = builder
        self.spill = spill
        self.agent_name = agent_name
        self.instance_id = instance_id
        self.metrics = metrics
        self.throttle = throttle
        self.sequencer = sequencer
        self.signer = signer

    def distribute(
        self, request: DistributeRequest, parts: Mapping[str, UploadedPart] | None = None
    ) -> DistributeResult:
        try:
            return self._distribute(request, parts)
        except ScdError as exc:
            self.metrics.dropped_requests.labels(type(exc).__name__).inc()
            raise

    def _distribute(
        self, request: DistributeRequest, parts: Mapping[str, UploadedPart] | None
    ) -> DistributeResult:
        throttled_s = self.throttle()
        started = time.perf_counter()
        built = self.builder.build(request, parts)
        built_at = time.perf_counter()
        self.metrics.build_package_duration.observe(built_at - started)

        spilled = self.spill.needed(len(built.data))
        key = self.spill.key_for(built.package_id) if spilled else None
        message = self.message(built, key)
        # Refuse an oversized record (thousands of paths) before a blob is stored for it; the
        # largest number stands in for the one given just before sending.
        message.sequence = MAX_SEQUENCE
        value, headers = self._encoded(message)
        self.journal.check_size(self.topic, value, None, headers)
        if key is not None:
            self.spill.store(built.package_id, built.data, built.checksum)
        # Numbered, signed and queued under the sequencer's lock, so that this instance's
        # records reach the log in the order of their numbers; acknowledged outside it.
        offset = self.sequencer.send(lambda sequence: self._numbered(message, sequence))
        if key is not None:
            self.spill.stamp(key, offset)
        self.metrics.enqueue_package_duration.observe(time.perf_counter() - built_at)
        self.metrics.accepted_requests.labels(built.action.value).inc()
        self.metrics.exported_package_size.observe(len(built.data))
        if spilled:
            self.metrics.spilled_packages.inc()
        log.info(
            "distributed %s %s at offset %d (%d bytes%s, %d nodes, paths %s)",
            built.action,
            built.package_id,
            offset,
            len(built.data),
            f", spilled to {key}" if key else "",
            built.node_count,
            built.paths[:5],
            extra={"agent": self.agent_name, "pkg_id": built.package_id, "offset": offset},
        )
        return DistributeResult(
            package_id=built.package_id,
            action=built.action,
            offset=offset,
            size=len(built.data),
            spilled=spilled,
            blob_key=key,
            paths=built.paths,
            deep_paths=built.deep_paths,
            node_count=built.node_count,
            binaries_referenced=len(built.blob_refs),
            throttled_s=throttled_s,
        )

    def _numbered(self, message: PackageMessage, sequence: int) -> tuple[bytes, dict[str, str]]:
        message.sequence = sequence
        return self._encoded(message)

    def _encoded(self, message: PackageMessage) -> tuple[bytes, dict[str, str]]:
        value, headers = encode(message)
        if self.signer is not None:
            headers = self.signer.signed_headers(self.topic, headers, value)
        return value, headers

    def message(self, built: BuiltPackage, blob_key: str | None) -> PackageMessage:
        message = PackageMessage(
            pub_sling_id=self.instance_id,
            pub_agent_name=self.agent_name,
            pkg_id=built.package_id,
            req_type=built.action.req_type,  # type: ignore[arg-type]
            pkg_length=len(built.data),
            pkg_type=built.pkg_type,
            user_id=built.user_id or "",
            created_ms=built.created_ms,
            checksum=built.checksum,
        )
        message.paths.extend(built.paths)
        message.deep_paths.extend(built.deep_paths)
        message.metadata.update(built.metadata)
        if blob_key is not None:
            message.pkg_binary_ref = blob_key
        else:
            message.pkg_binary = built.data
        return message
