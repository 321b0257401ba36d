"""The journal's wire format: the messages as records, with their ``type``/``version``
headers, in the deployment's format: protobuf (generated from proto/; encoded and decoded by
:func:`journal.wire.messages.encode` and :func:`journal.wire.messages.decode`) or Apache Sling's
JSON messages (:mod:`journal.wire.sling_json`); and Ed25519-signed records
(:class:`journal.wire.signing.RecordSigner`, :class:`journal.wire.signing.RecordVerifier`).
The content package's own format lives in journal/content/."""
