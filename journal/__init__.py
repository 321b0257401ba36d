"""The journal: the log that carries every message between publisher and subscribers, on Kafka or
on an embedded SQLite file, behind one backend-neutral API.

What it offers, each imported from its module (importing the package loads no backend, so the
``scd`` command line starts without confluent-kafka): :class:`journal.api.Journal` and its
consumers, records, positions and topic specs; :func:`journal.factory.open_journal`, the backend
a :class:`journal.settings.JournalSettings` names; :func:`journal.topics.topic_specs`, the five
topics; typed messages (:mod:`journal.messaging`); the journal's errors (:mod:`journal.errors`).
"""
