"""The content model: the binary-less content package a distribute request becomes (nodes,
properties, values, blob references) with its versioned, compressed codec, and the content rules
every package must pass, checked by the publisher before it sends and by each subscriber before
it imports.

Public interface: :class:`ContentPackage` with :func:`encode_package` / :func:`decode_package`,
:func:`check_package`, :class:`ContentLimits` and :class:`ContentRuleError`.
"""

from journal.content.package import ContentPackage, decode_package, encode_package
from journal.content.rules import ContentLimits, ContentRuleError, check_package

__all__ = [
    "ContentLimits",
    "ContentPackage",
    "ContentRuleError",
    "check_package",
    "decode_package",
    "encode_package",
]
