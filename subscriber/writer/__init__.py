"""One writer per store: of the subscriber processes sharing a store, one imports, the others
wait as hot standbys.

Public interface: :class:`WriterLease` (which process may write, with an epoch, on a lease
object beside the store, local or on S3), :class:`WriterRole` (active or standby, renewed and
stepped down), :class:`WriterGuard` (the Delta store refuses a deposed writer's commits) and
:class:`WriterDeposed`.
"""

from subscriber.errors import LeaseError, WriterDeposed
from subscriber.writer.guard import WriterGuard
from subscriber.writer.lease import LeaseRecord, WriterLease, lease_object
from subscriber.writer.role import Role, WriterRole

__all__ = [
    "LeaseError",
    "LeaseRecord",
    "Role",
    "WriterDeposed",
    "WriterGuard",
    "WriterLease",
    "WriterRole",
    "lease_object",
]
