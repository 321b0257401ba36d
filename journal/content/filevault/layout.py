"""What scd's reader and writer of FileVault packages share: the zip layout's names, the
namespaces scd knows by URI, and how an scd file node maps onto JCR's nt:file/jcr:content."""

from __future__ import annotations

from journal.content.package import FILE_DATA

JCR_ROOT = "jcr_root"
CONTENT_XML = ".content.xml"
BINARY_SUFFIX = ".binary"
DIR_SUFFIX = ".dir"
JCR_NS = "http://www.jcp.org/jcr/1.0"
# URI of each namespace prefix scd knows; another prefix is written with URN_PREFIX + prefix.
NAMESPACES = {
    "jcr": JCR_NS,
    "nt": "http://www.jcp.org/jcr/nt/1.0",
    "mix": "http://www.jcp.org/jcr/mix/1.0",
    "sv": "http://www.jcp.org/jcr/sv/1.0",
    "rep": "internal",
    "oak": "http://jackrabbit.apache.org/oak/ns/1.0",
    "sling": "http://sling.apache.org/jcr/sling/1.0",
    "cq": "http://www.day.com/jcr/cq/1.0",
    "dam": "http://www.day.com/dam/ns/1.0",
}
PREFIXES = {uri: prefix for prefix, uri in NAMESPACES.items()}
XML_NS = "http://www.w3.org/XML/1998/namespace"
URN_PREFIX = "urn:scd:ns:"
CONTENT = "jcr:content"
RESOURCE_TYPE = "nt:resource"
MIME_TYPE = "jcr:mimeType"
DEFAULT_CONTENT_TYPE = "application/octet-stream"
# An scd file node (nt:file with jcr:data) holds these; in JCR they are its jcr:content's.
RESOURCE_PROPERTIES = frozenset(
    {FILE_DATA, MIME_TYPE, "jcr:encoding", "jcr:lastModified", "jcr:lastModifiedBy"}
)
# scd's form of a binary reference it wrote: scd:<blob key>#<size>#<sha256>. Any other
# {BinaryRef} (an Oak data store reference, <blobId>:<hmac>) is kept verbatim as the blob key
# FOREIGN_REF_KEY + reference, for the importer to resolve.
SCD_REF_PREFIX = "scd:"
FOREIGN_REF_KEY = "filevault-ref/"


def join(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def name_of(path: str) -> str:
    return path.rsplit("/", 1)[1]
