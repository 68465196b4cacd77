"""The orders stream the stream benchmarks read: its name, its schema, and how it is filled."""

from __future__ import annotations

import random

import redis

from .lookup import KEYS

STREAM = "orders"
ORDER_SCHEMA = "stream_id string, order_id long, user_id long, amount double"


def fill_stream(url: str, rows: int, seed: int = 11, stream: str = STREAM) -> None:
    """``rows`` entries in ``stream`` (pipelined XADD, not timed)."""
    rng = random.Random(seed)
    client = redis.Redis.from_url(url)
    client.delete(stream)
    for start in range(0, rows, 10_000):
        with client.pipeline(transaction=False) as pipe:
            for order_id in range(start, min(rows, start + 10_000)):
                fields = {
                    "order_id": order_id,
                    "user_id": rng.randrange(KEYS),
                    "amount": round(rng.random() * 100, 2),
                }
                pipe.xadd(stream, fields)  # type: ignore[arg-type]
            pipe.execute()
    client.close()
