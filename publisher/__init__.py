"""The publisher agent: accepts distribute requests over REST, puts each content package on the
package topic, and keeps one queue per alive subscriber.

Public interface (imported from its modules, so that using one part loads no other):
``agent.PublisherAgent`` (its concepts wired together), ``settings.PublisherSettings``
(``SCD_PUBLISHER_*``), ``daemon.run`` (started by ``scd publisher``), ``api.create_app`` (the
REST API). Packages: ``distribute/`` (one request to one record), ``queues/`` (per-subscriber
queues over the package topic), ``api/`` (REST routes), ``console/`` (the operator page).
Modules: ``discovery`` (which subscribers are alive, how far each got), ``distributed_events``
(PackageDistributedMessage on the event topic), ``clear`` (clear commands), ``leader``,
``bad_records``, ``metrics``, ``errors``, ``cli``, ``client`` (the one client of the REST API).
"""
