"""One distribute request, from what the author asked for to a record on the package topic.

Public interface: :class:`DistributeRequest` (``request``), :class:`Distributor`
(``distributor``: build, spill if large, send, answer with the offset) and
:class:`DistributeResult`. Its steps: ``content_source`` (a directory tree as content nodes),
``values`` (request property values as typed package values), ``builder`` (the binary-less
content package), ``spill`` (packages above the inline limit go to the blob store),
``blob_deadline`` (each blob store call of a request within a deadline) and ``cleanup``
(the leader deletes spilled blobs the log no longer holds).
"""

from publisher.distribute.cleanup import BlobCleanup
from publisher.distribute.distributor import DistributeResult, Distributor
from publisher.distribute.request import Action, DistributeRequest
from publisher.distribute.spill import PackageSpill

__all__ = [
    "Action",
    "BlobCleanup",
    "DistributeRequest",
    "DistributeResult",
    "Distributor",
    "PackageSpill",
]
