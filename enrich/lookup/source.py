"""The protocol a dimension store implements to take part in lookup joins."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .schema import Schema


@runtime_checkable
class LookupSource(Protocol):
    """A dimension store answering batches of key lookups.

    A source object is a picklable *description* (URL, key template, schema, settings):
    it travels to Spark executors. Connections are opened lazily, on the runtime loop of
    the process that uses them, and pooled per process (see ``enrich.process_local``).

    ``lookup_many(keys)`` receives distinct keys (a scalar, or a tuple for composite
    keys) and returns a mapping from key to:

    * a tuple of field values in ``schema`` order: the key's row;
    * a list of such tuples: several rows (a 1:N join), possibly empty (a miss);
    * ``None``, or the key absent from the mapping: a miss;
    * an ``Exception`` instance: this key failed on its own (for example a value that
      does not decode, ``DecodeError``); the other keys of the call are unaffected.

    Raising from ``lookup_many`` fails every key of the call (a connection error, a 503);
    the engine's retry and error policy decide what happens to each of their rows.

    Secrets (passwords, tokens) must never appear in ``repr()``, logs or error messages.
    """

    schema: Schema

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        """Look up distinct keys in one round trip (or a few, chunked)."""
        ...

    async def aclose(self) -> None:
        """Close this process's connections for the source (they reopen on next use)."""
        ...
