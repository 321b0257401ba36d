"""Jackrabbit FileVault packages (binary-less, as Apache Sling distributes them) as a package
type scd reads and writes: :func:`encode_filevault` and :func:`decode_filevault`, what scd
does not model (:class:`Unmodelled`), the package type Sling's publishers name them by
(:data:`FILEVAULT_PACKAGE_TYPE`). docs/filevault.md describes the mapping.
"""

from journal.content.filevault.reading import FileVaultPackage, Unmodelled, decode_filevault
from journal.content.filevault.writing import encode_filevault

# PackageMessage.pkg_type scd writes for a FileVault package: Sling's subscribers read a
# package whose type is their package builder's name, journal_filevault in Sling's examples.
FILEVAULT_PACKAGE_TYPE = "journal_filevault"

__all__ = [
    "FILEVAULT_PACKAGE_TYPE",
    "FileVaultPackage",
    "Unmodelled",
    "decode_filevault",
    "encode_filevault",
]
