"""The journal: the log that carries every message between publisher and subscribers.

Public interface, each in its module (importing the package loads no backend): the
backend-neutral API (``api``: :class:`Journal`, :class:`Consumer`, :class:`Record`,
:class:`Position`, :class:`TopicSpec`), ``factory.open_journal`` for the backend that
``settings.JournalSettings`` names, ``topics.topic_specs`` for the five topics, and the journal
errors (``errors``). Subpackages: ``kafka/`` and ``sqlite/`` (the two backends), ``wire/``
(message codec and signed records), ``content/`` (the content package and its rules).
``messaging`` sends and polls typed messages; ``cli`` and ``keys`` are the journal's ``scd``
subcommands.
"""
