"""One distribute request, from what the author asked for to a record on the package topic: the
binary-less content package built from a directory tree or the request's nodes, spilled to the
blob store when large, sent, and answered with its offset; the leader's cleanup of spilled blobs
the log no longer holds.

Public interface: :class:`DistributeRequest` and :class:`Action`, :class:`Distributor` with
:class:`DistributeResult`, :class:`PackageSpill` and :class:`BlobCleanup`.
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
