"""Look up dimension rows in an HTTP/JSON service, one request per key or in batches.

Usage::

    from connectors.http import HttpLookup

    users = HttpLookup(
        "http://users-svc:8080/users/{}",
        schema="name string, tier string",
        headers={"Authorization": f"Bearer {token}"},
        path="data.user",                  # pick the sub-document {"data": {"user": {...}}}
        fields={"tier": "account.tier"},   # read a field from a nested path
        rate_limit=200.0,                  # requests per second, per process
        # requests per second for the whole job (every task), from a bucket in Redis:
        # job_rate_limit=JobRateLimit(rate=1000, redis_url="redis://limits:6379/0"),
        # concurrency="auto",              # in flight per process: adaptive
        max_connections=50,
        timeout=2.0,
    )
    rows = await users.lookup_many(["u1", "u2"])   # {"u1": ("Ada", "gold"), "u2": None}
    await users.aclose()

URL templates have positional ``{}`` slots only (no named slots), in path segments or
query values: ``"http://svc/orgs/{}/users/{}?v=2"`` takes tuple keys ``("acme", "u1")``,
filled in order. Each component is percent-encoded into its own slot, ``/``, ``?``, ``#``,
``..`` and all, so no key can reach another path, host or query parameter.

With ``batch_url="http://users-svc:8080/users:batch"`` the keys are POSTed as a JSON array
(``max_batch`` per request) and the service answers with a JSON object mapping ``str(key)``
to the key's document (null or absent: a miss). Composite (tuple) keys are sent as JSON
arrays and answered under their compact JSON text (``'["acme","u1"]'``). A batch-mode
source is also columnar (``lookup_arrow``, see ``connectors.http.arrow``): the same POSTs,
the answers' objects decoded in bulk into Arrow columns, so Spark joins take the columnar
lane; per-key sources are not (a key's GET answer is handed over as it arrives).

Answers: 200 decodes the JSON (orjson when installed); an object is one row, an array is
several rows (1:N). 404 is a miss. Errors follow :mod:`connectors.http.errors`: 429/503
carry the ``Retry-After`` hint in ``LookupFailed.retry_after``; other 5xx, timeouts and
dropped connections are retryable; 401/403 and other 4xx are not. The connector makes one
attempt per call: the engine retries, honouring ``retry_after``.

Secrets: header values and credentials never appear in ``repr()``, error messages or
logs; neither do query values of the URL templates (put API keys in headers anyway).
"""

from __future__ import annotations

from .source import HttpLookup as HttpLookup

__all__ = ("HttpLookup",)
