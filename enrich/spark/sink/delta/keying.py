"""How Delta's sink keys a micro-batch, and so where the source-record contract does not
apply.

Delta's streaming sink commits each micro-batch once by its batch id (a ``txn`` action
keyed by the query's id and the batch id), inside the JVM: it is keyed by batch id, never
by the source record (:mod:`enrich.spark.sink.sink_spi`), so a replay must carry the same
rows under the same id. Spark's default progress tracking guarantees that; async progress
tracking (the low-latency profile) re-cuts the batches after a failure, which Delta's
keying cannot survive: :data:`DELTA_REFUSED` is the refusal, naming why.

Where it applies, Delta's batch keying is ours to name: a micro-batch written by Delta's
*batch* writer (``foreachBatch``, as a job with a dead letter does) is skipped on replay
when written with ``txnAppId`` (:func:`transaction_id`) and ``txnVersion`` (the batch id).
"""

from __future__ import annotations

import hashlib

# Why the low-latency profile refuses sink="delta" (docs/delta.md).
DELTA_REFUSED = (
    "the low-latency profile cannot write to Delta: it runs under async progress "
    "tracking, which after a failure plans the micro-batches again from the last offsets "
    "it logged, so a batch id may come back with other records; Delta's sink commits "
    "each batch once by its id (a txn action keyed by the query's id and the batch id) "
    "and would skip records it never wrote, or write others twice (Spark itself "
    "refuses it: 'Sink DeltaSink[...] does not support async progress tracking'). Write with "
    "df.writeStream.format('delta') on Spark's default progress tracking (exactly once, "
    "docs/delta.md)"
)


def transaction_id(checkpoint: str | None, where: str) -> str | None:
    """The ``txnAppId`` of a Delta sink written by a batch writer per micro-batch (the
    dead-letter split): stable across restarts from one checkpoint (a hash of its path
    and the sink's place), so that a batch Spark runs again after a failure, with the
    same batch id, is skipped by Delta. None without a checkpoint (a new query each run:
    nothing is replayed)."""
    if not checkpoint:
        return None
    digest = hashlib.sha256(f"{checkpoint}\0{where}".encode()).hexdigest()[:24]
    return f"enrich-{where}-{digest}"
