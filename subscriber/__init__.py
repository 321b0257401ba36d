"""The subscriber agent: imports the packages of the package topic into its own content store,
exactly once, reports its progress to the publishers it follows, and serves the content it holds.

Public interface, each imported from its module (so that using one part loads no other, and no
Spark before it is needed): :class:`subscriber.agent.SubscriberAgent` (the agent and its
threads), :class:`subscriber.settings.SubscriberSettings` (``SCD_SUBSCRIBER_*``),
:func:`subscriber.daemon.run` (``scd subscriber``), and reading a store
(:mod:`subscriber.content`, :mod:`subscriber.export`, :mod:`subscriber.tree_reader`).
"""
