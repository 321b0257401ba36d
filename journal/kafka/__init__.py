"""The Kafka backend of the journal, on confluent-kafka (librdkafka).

Public interface: :class:`KafkaJournal`. Inside: ``journal`` (topics, sending, admin),
``consumer`` (records and positions), ``fenced`` (transactional writers, one per fence id),
``leadership`` (leader election by consumer-group membership), ``errors`` (librdkafka errors
as journal errors).
"""

from journal.kafka.journal import KafkaJournal

__all__ = ["KafkaJournal"]
