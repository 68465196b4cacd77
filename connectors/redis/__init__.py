"""Redis as a dimension store: batched lookups by key, from strings, JSON or hashes.

Example::

    from connectors.redis import RedisLookup

    users = RedisLookup(
        "redis://reader:secret@cache.internal:6379/0",
        key_template="user:{}",
        value="json",  # '{"name": "Ada", "tier": "gold"}' under user:42
        schema="name string, tier string",
    )
    rows = await users.lookup_many([42, 43])  # {42: ("Ada", "gold"), 43: None}

    orders = RedisLookup(
        "rediss://cluster-node:6379",
        cluster=True,
        key_template="order:{}:{}",  # composite keys: ("eu", 7) -> order:eu:7
        value="hash",
        fields=["status", "total"],  # HMGET these fields; fields=None reads HGETALL
        schema="status string, total double",
    )

Value formats:

* ``"json"``: a string holding a JSON object (one row) or an array of objects (several
  rows, a 1:N join); JSON ``null`` and ``[]`` are misses.
* ``"string"``: the raw value is the schema's single field (``"payload binary"`` keeps
  the bytes as they are).
* ``"hash"``: a hash whose fields are schema fields, coerced from their byte strings.

A key that does not exist, or holds a type MGET does not read, is a miss.

Sentinel: ``redis+sentinel://:pw@s1:26379,s2:26379,s3:26379/mymaster/0`` asks the
sentinels for the master of ``mymaster`` and follows it across failovers: connections
to a master that went away fail (``SourceUnavailable``, retryable, so the engine's retry
strategy bridges the failover) and the next ones go to the promoted replica.

Cluster: pass ``cluster=True`` (there is no URL scheme for it); the URL names any node.
MGETs are split by hash slot and sent as one pipeline per node. Use ``{{...}}`` in the
key template for a literal hash tag: ``"{{user}}:{}"`` puts every key on one slot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

from enrich.spi import (
    AdaptiveLimit,
    JobRateLimit,
    LimitStatistics,
    LookupFailed,
    Schema,
    SchemaLike,
    answers_as_completed,
    peek_process_limit,
    take_waits,
)

from . import bounds, client, codec
from .codec import Command
from .config import (
    DEFAULT_KEY_ENCODING,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_VALUE_BYTES,
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    ConnectionSettings,
    Endpoint,
    KeyTemplate,
    LookupSettings,
    concurrency as check_concurrency,
    hash_fields,
    job_rate_limit as check_job_rate_limit,
    positive_int,
    positive_seconds,
    value_format,
)

__all__ = ("RedisLookup",)


class RedisLookup:
    """A picklable description of a Redis lookup, implementing ``enrich.LookupSource``.

    Guarantees:

    * Construction validates every setting (``ValueError`` naming the field and value)
      and opens nothing; the object holds no live state, so it pickles to executors.
    * Connections open on the first ``lookup_many`` and are pooled per process and
      event loop: equal copies of a source (e.g. unpickled twice) share one pool of at
      most ``pool_size`` connections.
    * A call sends at most ``max_batch`` keys per MGET and per pipeline.
    * A value that does not decode, a key that does not fit the template, or a per-key
      server error (WRONGTYPE) is that key's exception; the other keys are unaffected.
      Connection, timeout, authentication and cluster errors raise ``LookupFailed``
      (``SourceUnavailable`` when the store cannot be reached) for the whole call.
    * ``lookup_each`` hands each pipeline's answers over as soon as its replies arrive
      (a call larger than ``max_batch``, or a cluster's MGETs spread over several
      pipelines), so a slow pipeline holds back no other.
    * A value larger than ``max_value_bytes`` fails its own key (``kind="too_large"``).
    * No password (in the userinfo, in a query parameter, as a keyword, for the master
      or the sentinels) appears in a ``repr()``, message or log line.

    Args:
        url: ``redis://[user[:password]@]host[:port][/db]``, ``rediss://`` for TLS, or
            ``redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/master[/db]``
            naming the sentinels and the master's service name. ``?username=`` and
            ``?password=`` query parameters are read as redis-py reads them.
        key_template: the Redis key with ``{}`` for the lookup key, or one ``{}`` per part
            of a composite (tuple) key. Key parts may be str, bytes or int.
        value: ``"json"``, ``"string"`` or ``"hash"`` (see the module docstring).
        schema: the fields the lookup adds, as DDL, a mapping or a ``Schema``.
        fields: for ``value="hash"``, the schema fields to read with HMGET (or a mapping
            from schema field to hash field); None reads the whole hash with HGETALL.
        max_batch: most keys per MGET or per pipeline.
        pool_size: most connections per process (per node on a cluster), and pipelines
            in flight.
        job_rate_limit: keys per second for the *whole job* (every process sharing the
            bucket): a number (the bucket lives in this store's own Redis; a cluster or
            Sentinel endpoint needs a ``JobRateLimit`` with ``redis_url``) or a
            :class:`~enrich.protect.JobRateLimit`; None: no limit. An unreachable
            limiter slows lookups to its fallback rate, it never fails them.
        concurrency: ``"fixed"`` (``pool_size`` pipelines in flight) or ``"auto"`` (an
            adaptive limit up to ``pool_size`` that backs off on timeouts and latency
            above the target; see :meth:`concurrency_statistics`).
        timeout: seconds for connecting, for each reply, and for waiting on the pool.
        cluster: the URL names a node of a Redis Cluster.
        username: ACL user, if not in the URL.
        password: password, if not in the URL.
        key_encoding: codec for str key parts, template text and hash field names.
        tls_ca_certs: a CA bundle file for ``rediss://`` (default: the system store).
        tls_verify: verify the server's certificate and host name under ``rediss://``.
        max_value_bytes: the largest answer of one key (a string value, or a hash's
            fields and values together); a larger one fails that key alone with
            ``kind="too_large"``, naming the limit.
        sentinel_username: ACL user on the sentinels, for a ``redis+sentinel://`` URL.
        sentinel_password: password of the sentinels, for a ``redis+sentinel://`` URL.
    """

    schema: Schema
    # lookup_arrow splits its keys into MGETs of max_batch itself (the columnar lane
    # then hands it a chunk's keys in one call).
    splits_requests = True

    def __init__(
        self,
        url: str,
        *,
        key_template: str,
        value: Literal["json", "string", "hash"],
        schema: SchemaLike,
        fields: Sequence[str] | Mapping[str, str] | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        pool_size: int = DEFAULT_POOL_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        cluster: bool = False,
        username: str | None = None,
        password: str | None = None,
        key_encoding: str = DEFAULT_KEY_ENCODING,
        tls_ca_certs: str | None = None,
        tls_verify: bool = True,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        sentinel_username: str | None = None,
        sentinel_password: str | None = None,
        job_rate_limit: float | JobRateLimit | None = None,
        concurrency: str = "fixed",
    ) -> None:
        if not isinstance(cluster, bool):
            raise ValueError(f"cluster must be a bool, got {cluster!r}")
        if not isinstance(tls_verify, bool):
            raise ValueError(f"tls_verify must be a bool, got {tls_verify!r}")
        if tls_ca_certs is not None and not isinstance(tls_ca_certs, str):
            raise ValueError(f"tls_ca_certs must be a file path, got {tls_ca_certs!r}")
        self.schema = Schema.of(schema)
        fmt = value_format(value, self.schema)
        template = KeyTemplate.parse(key_template, key_encoding)
        endpoint = Endpoint.parse(
            url,
            cluster=cluster,
            username=username,
            password=password,
            sentinel_username=sentinel_username,
            sentinel_password=sentinel_password,
        )
        self._settings = LookupSettings(
            connection=ConnectionSettings(
                endpoint=endpoint,
                pool_size=positive_int("pool_size", pool_size),
                timeout=positive_seconds("timeout", timeout),
                tls_ca_certs=tls_ca_certs,
                tls_verify=tls_verify,
                concurrency=check_concurrency(concurrency),
                job_rate_limit=check_job_rate_limit(job_rate_limit, endpoint, key_template),
            ),
            key_template=template,
            value=fmt,
            hash_fields=hash_fields(fields, fmt, self.schema, key_encoding),
            max_batch=positive_int("max_batch", max_batch),
            max_value_bytes=positive_int("max_value_bytes", max_value_bytes),
        )

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        """Look up ``keys``: a row tuple, a list of rows (JSON arrays), None or an error each.

        Raises:
            LookupFailed: the call failed as a whole (see the class docstring).
        """
        results, wanted = self._render(keys)
        if not wanted:
            return results
        settings = self._settings
        endpoint = settings.connection.endpoint
        commands = codec.plan(settings, wanted, cluster=endpoint.cluster)
        batches = codec.pack(commands, settings.max_batch)
        handle = client.client_for(settings.connection)
        replies = await client.execute(handle, batches, endpoint)
        denied: list[Command] = []
        for batch, batch_replies in zip(batches, replies, strict=True):
            self._read(batch, batch_replies, results, denied)
        if denied:
            await self._ask_singly(handle, denied, results)
        return results

    async def lookup_each(self, keys: Sequence[Any]) -> AsyncIterator[Mapping[Any, Any]]:
        """Look up ``keys`` as :meth:`lookup_many` does, handing over each pipeline's
        answers as soon as they arrive.

        Raises:
            LookupFailed: a pipeline failed as a whole; the keys not yet handed over fail.
        """
        results, wanted = self._render(keys)
        if results:
            yield results
        if not wanted:
            return
        settings = self._settings
        endpoint = settings.connection.endpoint
        commands = codec.plan(settings, wanted, cluster=endpoint.cluster)
        batches = codec.pack(commands, settings.max_batch)
        handle = client.client_for(settings.connection)
        calls = {n: client.execute(handle, [batch], endpoint) for n, batch in enumerate(batches)}
        denied: list[Command] = []
        async for done in answers_as_completed(calls):
            found: dict[Any, Any] = {}
            for n, replies in done.items():
                self._read(batches[n], replies[0], found, denied)
            if found:
                yield found
        if denied:
            found = {}
            await self._ask_singly(handle, denied, found)
            yield found

    def _render(self, keys: Sequence[Any]) -> tuple[dict[Any, Any], list[tuple[Any, bytes]]]:
        """The Redis key of each lookup key; keys that do not fit the template fail."""
        settings = self._settings
        results: dict[Any, Any] = {}
        wanted: list[tuple[Any, bytes]] = []
        for key in keys:
            try:
                wanted.append((key, settings.key_template.render(key)))
            except (TypeError, ValueError) as exc:
                template = settings.key_template.text
                results[key] = LookupFailed(
                    f"key {key!r} does not fit key_template {template!r}: {exc}",
                    key=key,
                    kind="key",
                    retryable=False,
                )
        return results, wanted

    def _read(
        self,
        batch: Sequence[Command],
        replies: Sequence[Any],
        results: dict[Any, Any],
        denied: list[Command],
    ) -> None:
        """Decode one pipeline's replies into ``results``; MGETs refused for lack of
        permission go to ``denied``, to be asked again key by key."""
        endpoint = self._settings.connection.endpoint
        for command, reply in zip(batch, replies, strict=True):
            if isinstance(reply, Exception):
                if len(command.keys) > 1 and client.is_denied(reply):
                    denied.append(command)  # one denied key refuses the whole MGET
                    continue
                for key in command.keys:
                    results[key] = client.translate(reply, endpoint, key=key)
            else:
                self._decode(command, reply, endpoint, results)

    async def _ask_singly(
        self, handle: Any, denied: list[Command], results: dict[Any, Any]
    ) -> None:
        # Ask again key by key, so that only the denied keys fail.
        singles = [codec.single(command, i) for command in denied for i in range(len(command.keys))]
        await self._run_commands(handle, singles, self._settings.connection.endpoint, results)

    async def lookup_arrow(self, keys: Any, struct_type: Any) -> Any:
        """The columnar lookup (``enrich.spi.ColumnarSource``): same outcomes
        as ``lookup_many``, JSON objects decoded in bulk (see ``connectors.redis.arrow``)."""
        decode = await self.fetch_arrow(keys, struct_type)
        return decode()

    async def fetch_arrow(self, keys: Any, struct_type: Any) -> Any:
        """``lookup_arrow`` split at the reply: the MGETs now, the bulk decode returned
        as a step the caller runs on its own thread (see ``connectors.redis.arrow``)."""
        from .arrow import fetch_arrow  # pyarrow is needed only on this path

        return await fetch_arrow(self._settings, self.schema, self.lookup_many, keys, struct_type)

    def store_key(self, key: Any) -> bytes:
        """The Redis key of lookup key ``key`` (a full cache's snapshot is keyed by it).

        Raises:
            ValueError, TypeError: the key does not fit the key template.
        """
        return self._settings.key_template.render(key)

    def scan_dimension(self, page_rows: int) -> AsyncIterator[tuple[Any, int]]:
        """Every key the key template matches, with its answer, a page at a time, for
        ``enrich.FullCache``: ``SCAN``, pipelined reads, Arrow pages (see
        ``connectors.redis.scan``)."""
        from .scan import scan_dimension

        return scan_dimension(self, page_rows)

    async def _run_commands(
        self,
        handle: Any,
        commands: list[Command],
        endpoint: Endpoint,
        results: dict[Any, Any],
    ) -> None:
        batches = codec.pack(commands, self._settings.max_batch)
        replies = await client.execute(handle, batches, endpoint)
        for batch, batch_replies in zip(batches, replies, strict=True):
            for command, reply in zip(batch, batch_replies, strict=True):
                if isinstance(reply, Exception):
                    for key in command.keys:
                        results[key] = client.translate(reply, endpoint, key=key)
                else:
                    self._decode(command, reply, endpoint, results)

    def _decode(
        self, command: Command, reply: Any, endpoint: Endpoint, results: dict[Any, Any]
    ) -> None:
        settings = self._settings
        command, reply, too_large = bounds.split_oversized(
            command, reply, settings.value, settings.max_value_bytes, f"redis at {endpoint.address}"
        )
        results.update(too_large)
        if command.keys:
            results.update(codec.decode(command, reply, settings, self.schema))

    def rate_limit_waits(self) -> tuple[int, float]:
        """With ``job_rate_limit``: this process's waits for its permits (how many, and
        their seconds) since the last call; joins add them to their metrics."""
        return take_waits(self._settings.connection.job_rate_limit)

    def adaptive_limit(self) -> AdaptiveLimit | None:
        """With ``concurrency="auto"``: this process's adaptive limit, once a request
        made it; else None (joins copy its state into their metrics)."""
        return peek_process_limit(client.adaptive_key(self._settings.connection))

    def concurrency_statistics(self) -> LimitStatistics | None:
        """With ``concurrency="auto"``: this process's adaptive limit (its limit, target
        latency and throttled pipelines so far), None before the first call or without."""
        limit = self.adaptive_limit()
        return None if limit is None else limit.statistics()

    async def aclose(self) -> None:
        """Close this process's client for these settings on the running loop.

        A later ``lookup_many`` opens a new one. Copies sharing the pool lose it too.
        """
        await client.close_client(self._settings.connection)

    def __repr__(self) -> str:
        s = self._settings
        c = s.connection
        parts = [
            repr(c.endpoint.masked_url()),
            f"key_template={s.key_template.text!r}",
            f"value={s.value.value!r}",
            f"schema={self.schema!r}",
        ]
        if s.hash_fields is not None:
            shown = {name: f.decode(s.key_template.encoding) for name, f in s.hash_fields}
            parts.append(f"fields={shown!r}")
        parts += [f"max_batch={s.max_batch}", f"pool_size={c.pool_size}", f"timeout={c.timeout:g}"]
        if c.endpoint.cluster:
            parts.append("cluster=True")
        if s.max_value_bytes != DEFAULT_MAX_VALUE_BYTES:
            parts.append(f"max_value_bytes={s.max_value_bytes}")
        if c.job_rate_limit is not None:
            parts.append(f"job_rate_limit={c.job_rate_limit.described()}")
        if c.concurrency != "fixed":
            parts.append(f"concurrency={c.concurrency!r}")
        return f"RedisLookup({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RedisLookup):
            return NotImplemented
        return self._settings == other._settings and self.schema == other.schema

    def __hash__(self) -> int:
        return hash((self._settings, self.schema))
