"""The Kafka backend of the journal, on confluent-kafka (librdkafka): the journal API with
transactional (fenced) writers and leader election by consumer-group membership.

Public interface: :class:`KafkaJournal`; librdkafka's errors reach callers as journal errors.
"""

from journal.kafka.journal import KafkaJournal

__all__ = ["KafkaJournal"]
