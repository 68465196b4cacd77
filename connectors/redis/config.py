"""Settings of a Redis lookup: the endpoint parsed from its URL, the key template, limits.

Everything here is a frozen, picklable value, validated on construction; a bad setting
raises ``ValueError`` naming the field and the value. The endpoint (URL parsing, the
Sentinel form, credentials) is :mod:`connectors.redis.endpoint`; passwords are kept out
of every ``repr()`` and message by :mod:`enrich.protect.masking`.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from connectors.templates import SlotError, split_slots
from enrich.spi import JobRateLimit, Schema, check_choice, check_int, check_positive

from .endpoint import DEFAULT_PORT, Endpoint

__all__ = (
    "DEFAULT_PORT",
    "ConnectionSettings",
    "Endpoint",
    "KeyTemplate",
    "LookupSettings",
    "ValueFormat",
)

DEFAULT_MAX_BATCH = 500
DEFAULT_POOL_SIZE = 50
DEFAULT_TIMEOUT = 5.0
DEFAULT_KEY_ENCODING = "utf-8"

# One answer (a string value, or a hash's fields together) larger than this fails its key.
DEFAULT_MAX_VALUE_BYTES = 16 * 1024 * 1024


class ValueFormat(Enum):
    """How a Redis value becomes rows of the schema."""

    JSON = "json"  # a string holding a JSON object (one row) or an array of objects
    STRING = "string"  # a string that is the single schema field
    HASH = "hash"  # a hash whose fields are schema fields


@dataclass(frozen=True)
class ConnectionSettings:
    """Everything that decides how connections are opened: the identity of a pool."""

    endpoint: Endpoint
    pool_size: int
    timeout: float
    tls_ca_certs: str | None
    tls_verify: bool
    # "fixed": pool_size pipelines in flight; "auto": an adaptive limit up to it.
    concurrency: str = "fixed"
    # The job-wide rate limit in keys per second (key and Redis filled in), or None.
    job_rate_limit: JobRateLimit | None = None


@dataclass(frozen=True)
class KeyTemplate:
    """A key template such as ``"order:{}:{}"``, rendered to bytes for one lookup key.

    A template with one ``{}`` takes a scalar key (or a 1-tuple); with n ``{}`` it takes
    an n-tuple. Key parts may be ``str`` (encoded with ``encoding``), ``bytes`` (kept
    as they are) or ``int``; ``{{`` and ``}}`` stand for literal braces (hash tags).
    """

    text: str
    encoding: str
    literals: tuple[bytes, ...]  # one more than the placeholders
    # Derived from ``literals`` for render's one-placeholder fast path, so not part of
    # the value: ``b"user:%d"`` for int keys, and the text around the placeholder.
    _single: bool = field(init=False, repr=False, compare=False)
    _int_pattern: bytes = field(init=False, repr=False, compare=False)
    _prefix: bytes = field(init=False, repr=False, compare=False)
    _suffix: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        single = len(self.literals) == 2
        prefix, suffix = self.literals if single else (b"", b"")
        pattern = prefix.replace(b"%", b"%%") + b"%d" + suffix.replace(b"%", b"%%")
        for name, value in [
            ("_single", single),
            ("_int_pattern", pattern),
            ("_prefix", prefix),
            ("_suffix", suffix),
        ]:
            object.__setattr__(self, name, value)  # the dataclass is frozen

    @classmethod
    def parse(cls, template: str, encoding: str) -> KeyTemplate:
        """Validate the template and its encoding.

        Raises:
            ValueError: not a string, no ``{}``, a named or formatted field, bad encoding.
        """
        if not isinstance(template, str):
            raise ValueError(f"key_template must be a string, got {template!r}")
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            raise ValueError(f"key_encoding is not a known codec: {encoding!r}") from None
        try:
            parts = split_slots(template)
        except SlotError as exc:
            if exc.field is None:
                raise ValueError(f"key_template does not parse: {template!r} ({exc})") from None
            raise ValueError(
                f"key_template may only use empty '{{}}' placeholders, got {template!r}"
            ) from None
        if len(parts) < 2:
            raise ValueError(f"key_template needs at least one '{{}}' placeholder: {template!r}")
        literals = [part.encode(encoding) for part in parts]
        return cls(text=template, encoding=encoding, literals=tuple(literals))

    @property
    def arity(self) -> int:
        """How many key parts the template takes."""
        return len(self.literals) - 1

    def render(self, key: Any) -> bytes:
        """The Redis key for ``key``.

        Raises:
            TypeError: the key does not have the template's shape, or a part has a type
                that is not str, bytes or int.
            ValueError: a str part cannot be encoded.
        """
        if self._single:
            # The common case (one int or str part), kept off the general path.
            kind = type(key)
            if kind is int:
                rendered: bytes = self._int_pattern % key  # %d gives the digits of str(key)
                return rendered
            if kind is str:
                part: bytes = key.encode(self.encoding)
                return self._prefix + part + self._suffix
        if isinstance(key, tuple):
            parts: tuple[Any, ...] = key
        elif self.arity == 1:
            parts = (key,)
        else:
            raise TypeError(f"expected a tuple of {self.arity} parts")
        if len(parts) != self.arity:
            raise TypeError(f"expected {self.arity} part(s), got {len(parts)}")
        out = bytearray(self.literals[0])
        for part, literal in zip(parts, self.literals[1:], strict=True):
            out += self._encode(part)
            out += literal
        return bytes(out)

    def _encode(self, part: Any) -> bytes:
        if isinstance(part, (bytes, bytearray, memoryview)):
            return bytes(part)
        if isinstance(part, str):
            return part.encode(self.encoding)
        if isinstance(part, int) and not isinstance(part, bool):
            return str(part).encode("ascii")
        raise TypeError(f"key parts must be str, bytes or int, not {type(part).__name__}")


@dataclass(frozen=True)
class LookupSettings:
    """The validated settings of one ``RedisLookup`` (besides its schema)."""

    connection: ConnectionSettings
    key_template: KeyTemplate
    value: ValueFormat
    # (schema field, hash field) pairs read with HMGET; None means HGETALL.
    hash_fields: tuple[tuple[str, bytes], ...] | None
    max_batch: int
    # The largest answer of one key, in bytes (a string value, or a hash's values summed).
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES


def positive_int(name: str, value: Any) -> int:
    """``value`` if it is an int >= 1, else ``ValueError`` naming ``name``."""
    return check_int(name, value)


def positive_seconds(name: str, value: Any) -> float:
    """``value`` as a float if it is a finite number > 0, else ``ValueError``."""
    return check_positive(name, value, "a number of seconds")


def value_format(value: Any, schema: Schema) -> ValueFormat:
    """The ``value`` setting as a :class:`ValueFormat`, checked against the schema."""
    try:
        fmt = ValueFormat(value)
    except ValueError:
        choices = ", ".join(repr(f.value) for f in ValueFormat)
        raise ValueError(f"value must be one of {choices}, got {value!r}") from None
    if fmt is ValueFormat.STRING and len(schema.fields) != 1:
        raise ValueError(
            f"value='string' needs a schema of exactly one field, got {len(schema.fields)} "
            f"fields {list(schema.names)}"
        )
    return fmt


def hash_fields(
    fields: Sequence[str] | Mapping[str, str] | None,
    fmt: ValueFormat,
    schema: Schema,
    encoding: str,
) -> tuple[tuple[str, bytes], ...] | None:
    """Normalize ``fields`` to (schema field, hash field) pairs; None keeps HGETALL.

    ``fields`` lists schema fields to read with HMGET, or maps schema fields to the
    hash fields that hold them.
    """
    if fields is None:
        return None
    if fmt is not ValueFormat.HASH:
        raise ValueError(f"fields is only for value='hash', got fields={fields!r}")
    if isinstance(fields, (str, bytes)):
        raise ValueError(f"fields must be a list of field names, got {fields!r}")
    pairs = list(fields.items()) if isinstance(fields, Mapping) else [(f, f) for f in fields]
    if not pairs:
        raise ValueError("fields must name at least one field, got an empty collection")
    seen: set[str] = set()
    out = []
    for name, stored in pairs:
        if not isinstance(name, str) or not isinstance(stored, str):
            raise ValueError(f"fields must hold strings, got {name!r}: {stored!r}")
        if name not in schema.names:
            raise ValueError(f"fields names {name!r}, which is not in the schema {schema!r}")
        if name in seen:
            raise ValueError(f"fields names {name!r} twice")
        seen.add(name)
        out.append((name, stored.encode(encoding)))
    return tuple(out)


CONCURRENCY = ("fixed", "auto")


def concurrency(value: Any) -> str:
    """``concurrency=``: ``"fixed"`` or ``"auto"``."""
    return check_choice("concurrency", value, CONCURRENCY)


def job_rate_limit(
    value: float | JobRateLimit | None, endpoint: Endpoint, key_template: str
) -> JobRateLimit | None:
    """``job_rate_limit=`` for a store: its bucket's key named after the store and, when no
    ``redis_url`` is given, the store's own Redis (standalone endpoints only)."""
    limit = JobRateLimit.of(value, name="job_rate_limit")
    if limit is None:
        return None
    default_url = None
    if not endpoint.cluster and not endpoint.is_sentinel:
        from urllib.parse import quote

        user = quote(endpoint.username or "", safe="")
        auth = f"{user}:{quote(endpoint.password, safe='')}@" if endpoint.password else ""
        scheme = "rediss" if endpoint.tls else "redis"
        default_url = f"{scheme}://{auth}{endpoint.host}:{endpoint.port}/{endpoint.db}"
    elif limit.redis_url is None:
        raise ValueError(
            "job_rate_limit on a cluster or Sentinel endpoint needs the Redis of its shared "
            "bucket: JobRateLimit(rate=..., redis_url='redis://host:6379')"
        )
    return limit.for_store(f"redis {endpoint.masked_url()} {key_template}", default_url)
