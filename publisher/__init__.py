"""The publisher agent: accepts distribute requests over REST, puts each content package on the
package topic, and keeps one queue per alive subscriber.

Public interface, each imported from its module (so that using one part loads no other):
:class:`publisher.agent.PublisherAgent` (the agent and its threads),
:class:`publisher.settings.PublisherSettings` (``SCD_PUBLISHER_*``), :func:`publisher.daemon.run`
(``scd publisher``) and :func:`publisher.api.create_app` (its REST API).
"""
