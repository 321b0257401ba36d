"""Turn a package record into the content package to import: inline bytes or a blob-store
reference, length and checksum verified, format version checked, decoded within a size limit,
as the package type the message names (scd's own or a FileVault package, whose content scd does
not model is returned as an Unmodelled report).

Memory is bounded by what the record declares: a blob is read up to its declared length (one
byte more tells a longer blob), and a package inflates only up to the decoded-size limit.
"""

from __future__ import annotations

from blobstore.api import BlobStore
from blobstore.errors import BlobNotFound, BlobStoreError, InvalidBlobKey
from journal.content import rules
from journal.content.filevault import FILEVAULT_PACKAGE_TYPE, Unmodelled, decode_filevault
from journal.content.package import ContentPackage, checksum, decode_package
from journal.wire.messages import PackageMessage
from runtime.errors import DecodeError
from subscriber.errors import CorruptPackage, PackageUnavailable


def package_bytes(message: PackageMessage, blobs: BlobStore | None) -> bytes:
    if message.pkg_binary_ref:
        if blobs is None:
            raise PackageUnavailable(
                f"package {message.pkg_id} is stored by reference ({message.pkg_binary_ref}) "
                "but this subscriber has no blob store configured"
            )
        try:
            with blobs.get(message.pkg_binary_ref) as stream:
                data = stream.read(message.pkg_length + 1)
        except InvalidBlobKey as exc:  # no blob store holds such a key: it never will
            raise CorruptPackage(f"package {message.pkg_id}: {exc}") from exc
        except BlobNotFound as exc:
            raise PackageUnavailable(
                f"package {message.pkg_id}: blob {message.pkg_binary_ref} not found"
            ) from exc
        except BlobStoreError as exc:
            raise PackageUnavailable(f"package {message.pkg_id}: {exc}") from exc
    else:
        data = message.pkg_binary
    if message.pkg_length and len(data) != message.pkg_length:
        longer = " or more" if len(data) > message.pkg_length else ""
        raise CorruptPackage(
            f"package {message.pkg_id}: {len(data)}{longer} bytes, message says "
            f"{message.pkg_length}"
        )
    if message.checksum and checksum(data) != message.checksum:
        raise CorruptPackage(
            f"package {message.pkg_id}: checksum mismatch (expected {message.checksum[:64]}, "
            f"got {checksum(data)})"
        )
    return data


def read_package(
    message: PackageMessage, blobs: BlobStore | None, limits: rules.ContentLimits
) -> tuple[ContentPackage, Unmodelled]:
    """The content package and what it holds that scd does not model (nothing, for scd's own
    package type)."""
    data = package_bytes(message, blobs)
    if not data:
        return ContentPackage(package_id=message.pkg_id, req_type=message.req_type), Unmodelled()
    try:
        if message.pkg_type == FILEVAULT_PACKAGE_TYPE:
            read = decode_filevault(
                data, package_id=message.pkg_id, req_type=message.req_type, limits=limits
            )
            return read.package, read.unmodelled
        return decode_package(data, max_decoded_bytes=limits.max_package_bytes), Unmodelled()
    except DecodeError as exc:
        raise CorruptPackage(f"package {message.pkg_id}: {exc}") from exc
