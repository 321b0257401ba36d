"""The subscriber agent: imports the packages of the package topic into its own content store,
exactly once, and reports its progress to the publishers it follows.

Public interface (imported from its modules, so that using one part loads no other):
``agent.SubscriberAgent`` (its parts wired together, and their threads),
``settings.SubscriberSettings`` (``SCD_SUBSCRIBER_*``), ``daemon.run`` (started by
``scd subscriber``), ``content`` and ``export`` (reading a store). Packages: ``store/`` (the
content store: protocol, Delta, memory), ``writer/`` (one writer per store), ``bookkeeper/``
(the import loop and its accounting). Modules: ``announcer`` (discovery messages),
``readiness``, ``maintenance`` (idle-time store upkeep), ``http``, ``metrics``, ``spark``,
``cli``.
"""
