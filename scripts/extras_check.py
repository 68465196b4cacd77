"""What one extra alone gives: ``python scripts/extras_check.py redis|http``.

Run by ``./scripts/dev test-extras`` in a venv holding only ``pip install -e '.[redis]'``
(or ``[http]``): checks that nothing else came with it (no pyspark, no pandas, not the
other connector's driver), imports the extra's connector and runs a real ``lookup_rows``
against a real server started here (the redis-server ``enrich.demo.redis_binary`` picks,
or ``$ENRICH_REDIS_SERVER``; the demo's aiohttp dimension service). pyarrow and numpy
are dependencies of the package itself (``import enrich`` needs them), so they are there too.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any

# What the extra must not have brought (the other extra's driver, Spark and pandas).
ABSENT = {"redis": ("pyspark", "pandas", "aiohttp"), "http": ("pyspark", "pandas", "redis")}
ROWS: list[dict[str, Any]] = [{"id": 1}, {"id": 2}, {"id": 7}, {"id": None}]


def expected(names: dict[int, str], credit: dict[int, float]) -> list[dict[str, Any]]:
    return [
        {"id": row["id"], "name": names.get(row["id"]), "credit": credit.get(row["id"])}
        for row in ROWS
    ]


def check_redis() -> None:
    import json

    import redis

    from connectors.redis import RedisLookup
    from enrich import lookup_rows
    from enrich.demo.local import local_redis
    from enrich.demo.redis_binary import describe, redis_binary
    from enrich.engine.runtime import run_sync

    print(f"   redis-server: {describe(redis_binary())}")
    with local_redis() as url:
        client = redis.Redis.from_url(url)
        client.mset({f"user:{i}": json.dumps({"name": f"u{i}", "credit": i / 2}) for i in (1, 2)})
        client.close()
        users = RedisLookup(
            url, key_template="user:{}", value="json", schema="name string, credit double"
        )
        try:
            out = list(lookup_rows(ROWS, users, on="id", how="left"))
        finally:
            run_sync(users.aclose)
    assert out == expected({1: "u1", 2: "u2"}, {1: 0.5, 2: 1.0}), out


def check_http() -> None:
    from connectors.http import HttpLookup
    from enrich import lookup_rows
    from enrich.demo.local import dimension_service
    from enrich.engine.runtime import run_sync

    with dimension_service(users=5) as base:  # the demo's aiohttp service, ids 0..4
        per_key = HttpLookup(base + "/users/{}", schema="name string, credit double")
        batched = HttpLookup(
            base + "/users/{}", schema="name string, credit double",
            batch_url=base + "/users/_batch",
        )  # fmt: skip
        try:
            outs = [list(lookup_rows(ROWS, s, on="id", how="left")) for s in (per_key, batched)]
        finally:
            for source in (per_key, batched):
                run_sync(source.aclose)
    want = expected({1: "user-1", 2: "user-2"}, {1: 0.5, 2: 1.0})
    assert outs == [want, want], outs


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ABSENT:
        print("usage: extras_check.py {redis|http}", file=sys.stderr)
        return 2
    extra = argv[0]
    started = time.monotonic()
    present = [name for name in ABSENT[extra] if importlib.util.find_spec(name) is not None]
    assert not present, f"[{extra}] alone should not install {present}"
    {"redis": check_redis, "http": check_http}[extra]()
    took = time.monotonic() - started
    print(f"ok: [{extra}] alone imports its connector and joins rows ({took:.1f} s, no Spark)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
