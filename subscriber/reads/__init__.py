"""The read API of a subscriber daemon: the current tree of each agent's store, served from a
read model that each commit keeps current (docs/read-api.md)."""
