"""Jackrabbit FileVault packages (binary-less, as Apache Sling distributes them) as a package
type scd reads and writes: :func:`encode_filevault` and :func:`decode_filevault`, what scd
does not model (:class:`Unmodelled`), the package type Sling's publishers name them by
(:data:`FILEVAULT_PACKAGE_TYPE`). docs/filevault.md describes the mapping.
"""

from journal.content.filevault.reading import FileVaultPackage, Unmodelled, decode_filevault
from journal.content.filevault.writing import encode_filevault
from journal.content.package import FILEVAULT_PACKAGE_TYPE

__all__ = [
    "FILEVAULT_PACKAGE_TYPE",
    "FileVaultPackage",
    "Unmodelled",
    "decode_filevault",
    "encode_filevault",
]
