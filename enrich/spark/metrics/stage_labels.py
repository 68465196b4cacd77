"""What a stage is, for labels: its store and capacity, and the query it ran in.

A stage (a lookup join or an async map) is known on the driver by its metrics name.
:func:`describe` notes, when the stage is built, the store it asks (``redis``,
``http``, ``postgres``... from the source's class, ``function`` for a map) and its
``capacity``; the query comes later, from the micro-batches its tasks ran for. These
labels are few per job (one per stage), never per key.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ("StageInfo", "describe", "described", "store_of")


@dataclass(frozen=True)
class StageInfo:
    """A stage's labels.

    Attributes:
        store: the kind of store it asks (``redis``, ``http``, ``function``...).
        capacity: rows in flight per task at most (None: not known).
    """

    store: str = ""
    capacity: int | None = None


_lock = threading.Lock()
_stages: dict[str, StageInfo] = {}


def store_of(source: object) -> str:
    """A store's label from its class: ``RedisLookup`` -> ``redis``, ``HttpLookup`` ->
    ``http``; a class named otherwise, lower-cased."""
    name = type(source).__name__
    for suffix in ("Lookup", "Source"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    return name.lower()


def describe(name: str, *, store: str, capacity: int | None) -> None:
    """Note what stage ``name`` is (the latest description of a name wins)."""
    with _lock:
        _stages[name] = StageInfo(store, capacity)


def described(name: str) -> StageInfo:
    """What :func:`describe` noted of stage ``name`` (empty labels if nothing)."""
    with _lock:
        return _stages.get(name, StageInfo())
