"""How long the transactional sink's commit blocks Redis: the longest command, by SLOWLOG.

The commit publishes a whole batch in one Lua script, which runs alone on the server:
its duration is everyone's pause. This stages ``N`` rows (4 columns, encoded by the
sink's own codec) in one staging list, as the executors do, runs the real commit
(:func:`enrich.spark.redis_commit.commit`), and reads the longest command from
``SLOWLOG`` (threshold 0: every command logged), for a stream target and a hash target.
Sizes: ``ENRICH_BENCH_COMMIT="10000,100000,1000000"`` (the default).
"""

from __future__ import annotations

import os
import time

import redis

from enrich.demo.local import local_redis
from enrich.spark import redis_commit
from enrich.spark.sink_codec import pack

from ._report import table, write

SIZES = [int(n) for n in os.environ.get("ENRICH_BENCH_COMMIT", "10000,100000,1000000").split(",")]
STAGE_CHUNK = 5000
IDENTITY = "bench"


def _op(kind: str, i: int) -> bytes:
    fields = ["order_id", str(i), "user_id", str(i % 1000), "amount", "12.5", "tier", "gold"]
    if kind == "stream":
        return pack(["x", "bench:out", *fields])
    return pack(["h", f"bench:order:{i}", *fields])


def measure(client: redis.Redis, kind: str, rows: int) -> tuple[float, float]:
    """(longest command in ms, wall time of the commit in ms)."""
    client.flushall()
    staging = redis_commit.staging_key(IDENTITY, "1", 0, "a")
    client.sadd(redis_commit.index_key(IDENTITY), staging)
    for start in range(0, rows, STAGE_CHUNK):
        client.rpush(staging, *(_op(kind, i) for i in range(start, min(rows, start + STAGE_CHUNK))))
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1024)
    client.slowlog_reset()
    began = time.perf_counter()
    redis_commit.commit(client, IDENTITY, "1", [(staging, rows)], marked=True)
    wall = (time.perf_counter() - began) * 1000
    longest = max(entry["duration"] for entry in client.slowlog_get(1024)) / 1000
    return longest, wall


def main() -> None:
    rows_out = []
    with local_redis() as url:
        client = redis.Redis.from_url(url, socket_timeout=600)
        for kind in ("stream", "hash"):
            for rows in SIZES:
                longest, wall = measure(client, kind, rows)
                rows_out.append([kind, rows, longest, longest * 1000 / rows, wall])
        client.flushall()
        client.close()
    write(
        "sink_commit",
        "Transactional sink: the longest command of a commit (SLOWLOG)",
        [
            (
                "One batch, one commit",
                table(["target", "rows", "longest command ms", "us per row", "wall ms"], rows_out),
            )
        ],
        notes=(
            "The commit script checks each staging list's length, then publishes every row "
            "(XADD, or DEL+HSET) and the marker in one script: read-committed (a reader "
            "never sees part of a batch) costs a pause proportional to the batch. To keep "
            "each pause under 50 ms, bound the batch: maxEntriesPerTrigger <= 50 ms / (us "
            "per row above)."
        ),
    )


if __name__ == "__main__":
    main()
