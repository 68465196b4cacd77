"""How Delta's sink keys a micro-batch, and so where the source-record contract does not
apply.

Delta's streaming sink commits each micro-batch once by its batch id (a ``txn`` action
keyed by the query's id and the batch id), inside the JVM: it is keyed by batch id, never
by the source record (:mod:`enrich.spark.sink.sink_spi`), so a replay must carry the same
rows under the same id. Spark's default progress tracking guarantees that; async progress
tracking (the low-latency profile) re-cuts the batches after a failure, which Delta's
keying cannot survive: :data:`DELTA_REFUSED` is the refusal, naming why.
"""

from __future__ import annotations

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
