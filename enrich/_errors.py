"""The error tree of spark-enrich.

::

    EnrichError
    ├── LookupTimeout (also TimeoutError)   a record ran out of its total timeout
    ├── LookupFailed                        a dimension store failed for one key
    │   └── SourceUnavailable               the store cannot be reached at all
    ├── DecodeError (also ValueError)       a stored value does not fit the schema
    └── SchemaError (also ValueError)       a schema string does not parse

Every error says whether a second try may end differently (``retryable``): the retry
strategies' default exception predicate (:func:`enrich.is_retryable`) retries only those
that say yes. A timeout, a refused connection or a 503 may pass on a second try; a value
that does not decode, a schema that does not match or a 404/400 will not, so they are
final at once, whatever the retry policy's ``max_attempts``.

Settings that are out of range raise a plain ``ValueError`` naming the field and the
value, at construction time (:mod:`enrich.engine.checks`). Every message shows a value
through :func:`short`, so a huge key or document cannot flood a log.

This module imports nothing of the library: it is the floor every other one stands on.
"""

from __future__ import annotations

import reprlib
from typing import Any

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxdict = 6


def short(value: Any) -> str:
    """``repr(value)`` shortened for a message: long strings and bytes are cut in the
    middle, containers after a few items (``reprlib``)."""
    return _repr.repr(value)


class EnrichError(Exception):
    """Base class of every error raised by spark-enrich.

    Attributes:
        retryable: whether trying again may end differently; the default retry predicate
            honours it.
    """

    retryable: bool = True


class LookupTimeout(EnrichError, TimeoutError):
    """A record was not completed within its total timeout (all attempts included).

    Attributes:
        value: the input record that timed out.
        timeout: the timeout in seconds.
        attempts: how many calls had been started for the record.
    """

    def __init__(self, value: Any, timeout: float, attempts: int = 1) -> None:
        super().__init__(
            f"record {short(value)} timed out after {timeout:g}s ({attempts} attempt(s))"
        )
        self.value = value
        self.timeout = timeout
        self.attempts = attempts

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.value, self.timeout, self.attempts))


class LookupFailed(EnrichError):
    """A dimension store failed to answer for one key.

    Attributes:
        key: the lookup key, or None when the failure concerns a whole request.
        kind: a short machine-readable reason ("status:503", "connection", "timeout", ...).
        retryable: whether trying again may succeed (a 503 may, a 401 will not).
        retry_after: the store's own hint, in seconds, of when to try again (Retry-After);
            the engine waits at least this long before the next attempt.
    """

    def __init__(
        self,
        message: str,
        *,
        key: Any = None,
        kind: str = "error",
        retryable: bool = True,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.key = key
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {
            "key": self.key,
            "kind": self.kind,
            "retryable": self.retryable,
            "retry_after": self.retry_after,
        }
        return (_rebuild, (type(self), self.args[0], fields))


class SourceUnavailable(LookupFailed):
    """The dimension store cannot be reached (refused, DNS, TLS, authentication)."""


class DecodeError(EnrichError, ValueError):
    """A stored value could not be decoded into the dimension schema.

    Never retryable: the same value decodes the same way on every try.

    Attributes:
        field: the schema field that did not fit, or None for the whole value.
        value: the offending value (truncated in the message).
    """

    retryable = False

    def __init__(self, message: str, *, field: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value

    @property
    def kind(self) -> str:
        return "decode"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args[0], {"field": self.field, "value": self.value}))


class SchemaError(EnrichError, ValueError):
    """A schema string or object could not be understood (never retryable)."""

    retryable = False


def _rebuild(cls: type[Exception], message: str, fields: dict[str, Any]) -> Exception:
    return cls(message, **fields)
