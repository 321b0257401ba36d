"""Content package codec: ContentPackage <-> versioned, compressed bytes.

Envelope: 4-byte magic ``SCDP``, one byte format version, one byte compression codec, then the
(compressed) serialized ContentPackage. A reader refuses a version it does not know with
UnsupportedPackageVersion, so an old subscriber never misreads a newer package.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

from google.protobuf.message import DecodeError as ProtobufDecodeError

from journal.errors import UnsupportedPackageVersion
from journal.wire.package_pb2 import (
    Binary,
    BlobRef,
    ContentPackage,
    FilterRoot,
    MultiValue,
    Node,
    Value,
)
from runtime.errors import DecodeError

__all__ = [
    "FILE_DATA",
    "FILE_TYPE",
    "FOLDER_TYPE",
    "FORMAT_VERSION",
    "LAST_MODIFIED",
    "MAX_DECODED_BYTES",
    "NODE_TYPE",
    "PACKAGE_TYPE",
    "Binary",
    "BlobRef",
    "ContentPackage",
    "FilterRoot",
    "MultiValue",
    "Node",
    "UnsupportedPackageVersion",
    "Value",
    "checksum",
    "decode_package",
    "encode_package",
]

# PackageMessage.pkg_type of every scd package: names this content package format.
PACKAGE_TYPE = "scd-content"
# PackageMessage.pkg_type of a FileVault package (journal/content/filevault): Sling's
# subscribers read a package whose type is their package builder's name, journal_filevault in
# Sling's examples. Defined here, beside scd's own, for the message rules to accept both.
FILEVAULT_PACKAGE_TYPE = "journal_filevault"
MAGIC = b"SCDP"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = frozenset({FORMAT_VERSION})
_HEADER = struct.Struct(">4sBB")
CODEC_NONE = 0
CODEC_ZLIB = 1
# zlib level 1: packages are small protobufs of text-like properties; level 1 gets most of the
# ratio of level 6 at a fraction of the CPU, and publishing sits on the request path.
ZLIB_LEVEL = 1
# Content conventions shared by the publisher's directory source and the subscriber's export.
# A file is a node whose FILE_DATA property holds its bytes (inline or by blob reference);
# NODE_TYPE tells files from folders; LAST_MODIFIED is a date property.
NODE_TYPE = "jcr:primaryType"
FILE_TYPE = "nt:file"
FOLDER_TYPE = "nt:folder"
FILE_DATA = "jcr:data"
LAST_MODIFIED = "jcr:lastModified"

# A package that inflates beyond this is refused instead of exhausting memory (a corrupt or
# hostile payload). The publisher's default maximum package size, which it applies to the
# decoded size too (journal/content/rules.py, ContentLimits.max_package_bytes).
MAX_DECODED_BYTES = 64 * 1024 * 1024


def checksum(data: bytes) -> str:
    """The package checksum carried by PackageMessage.checksum: sha256, hex."""
    return hashlib.sha256(data).hexdigest()


def encode_package(package: ContentPackage, *, compress: bool = True) -> bytes:
    raw = package.SerializeToString()
    if compress:
        return _HEADER.pack(MAGIC, FORMAT_VERSION, CODEC_ZLIB) + zlib.compress(raw, ZLIB_LEVEL)
    return _HEADER.pack(MAGIC, FORMAT_VERSION, CODEC_NONE) + raw


def decode_package(data: bytes, *, max_decoded_bytes: int = MAX_DECODED_BYTES) -> ContentPackage:
    """Parse package bytes; raises UnsupportedPackageVersion or DecodeError with the reason."""
    if len(data) < _HEADER.size:
        raise DecodeError(f"content package too short ({len(data)} bytes)")
    magic, version, codec = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise DecodeError(f"not an scd content package (magic {magic!r})")
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedPackageVersion(
            f"content package format version {version} is not supported "
            f"(this subscriber reads versions {sorted(SUPPORTED_VERSIONS)}); upgrade the subscriber"
        )
    body = data[_HEADER.size :]
    if codec == CODEC_ZLIB:
        body = _inflate(body, max_decoded_bytes)
    elif codec != CODEC_NONE:
        raise DecodeError(f"unknown content package compression codec {codec}")
    package = ContentPackage()
    try:
        package.ParseFromString(body)
    except (ProtobufDecodeError, ValueError) as exc:
        raise DecodeError(f"undecodable content package: {exc}") from exc
    return package


def _inflate(body: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, limit)
    except zlib.error as exc:
        raise DecodeError(f"corrupt content package compression: {exc}") from exc
    if inflater.unconsumed_tail:
        raise DecodeError(f"content package inflates beyond {limit} bytes; refused")
    if not inflater.eof:
        raise DecodeError("truncated content package")
    return out
