"""The journal's wire format: protobuf messages (generated ``*_pb2`` from proto/) with their
``type``/``version`` headers (``messages``) and Ed25519-signed records (``signing``).
The content package's own format lives in journal/content/."""
