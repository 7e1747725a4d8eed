"""Facts shared between the tasks of a run: `publish`, `subscribe` (with a strict adapter
allow-list) and `follow` (live, through Postgres LISTEN/NOTIFY). See pymem.facts.sharing."""

from .sharing import Fact, FactStream, follow, publish, subscribe

__all__ = ["Fact", "FactStream", "follow", "publish", "subscribe"]
