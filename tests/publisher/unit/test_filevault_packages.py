"""SCD_PUBLISHER_PACKAGE_TYPE=filevault: the package builder writes FileVault packages named
journal_filevault, holding what scd's own package of the same request holds."""

from __future__ import annotations

import os
from pathlib import Path

from blobstore.local import LocalBlobStore
from journal.content.filevault import FILEVAULT_PACKAGE_TYPE, decode_filevault
from journal.content.package import PACKAGE_TYPE, ContentPackage, decode_package
from journal.wire.messages import ReqType
from publisher.distribute.builder import PackageBuilder
from publisher.distribute.content_source import DirectoryContentSource
from publisher.distribute.request import DistributeRequest

THRESHOLD = 1024


def _nodes(package: ContentPackage) -> dict[str, object]:
    return {n.path: dict(n.properties) for n in package.nodes}


def test_filevault_packages_hold_what_scd_packages_hold(
    blobs: LocalBlobStore, content_root: Path
) -> None:
    (content_root / "site" / "en").mkdir(parents=True)
    (content_root / "site" / "en" / "index.html").write_text("<h1>hi</h1>")
    (content_root / "site" / "en" / "big.bin").write_bytes(os.urandom(THRESHOLD + 1))
    request = DistributeRequest.model_validate(
        {"action": "ADD", "deepPaths": ["/site"], "paths": ["/site/en/index.html"]}
    )
    built = {}
    for filevault in (False, True):
        builder = PackageBuilder(
            blobs,
            DirectoryContentSource(content_root),
            binary_threshold_bytes=THRESHOLD,
            max_package_bytes=10**7,
            clock_ms=lambda: 1_700_000_000_000,
            filevault=filevault,
        )
        built[filevault] = builder.build(request)
    assert built[False].pkg_type == PACKAGE_TYPE
    assert built[True].pkg_type == FILEVAULT_PACKAGE_TYPE
    scd = decode_package(built[False].data)
    read = decode_filevault(built[True].data, package_id="", req_type=ReqType.ADD)
    assert not read.unmodelled.counts
    assert read.package.package_id == built[True].package_id
    assert read.package.created_ms == scd.created_ms
    assert _nodes(read.package) == _nodes(scd)
    assert sorted((r.path, r.deep) for r in read.package.roots) == sorted(
        (r.path, r.deep) for r in scd.roots
    )
    assert built[True].blob_refs  # big.bin by reference
    assert built[True].paths == built[False].paths
