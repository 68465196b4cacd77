"""The ``redis`` sink (format ``"redis"``): stream entries, hashes or JSON values,
idempotent or transactional.

- :mod:`.data_source`: the data source and its batch and stream writers.
- :mod:`.row_writes`: the options (one frozen value) and how a row becomes a Redis operation.
- :mod:`.columns`: the same, a column at a time, where the types allow it.
- :mod:`.frames`, :mod:`.direct`: the idempotent writes: each row's commands in RESP, a
  column at a time, sent in chunks of rows, a ``MULTI`` each.
- :mod:`.codec`: one codec for every Spark type (what ``RedisLookup`` reads back).
- :mod:`.two_phase`: staging, the commit marker, the source marks and the script that
  publishes a batch.
- :mod:`.by_source`: the Redis side of exactly once keyed by the source record
  (``sourceIdColumn``; the contract: :mod:`enrich.spark.sink.sink_spi`).

The sink is a :class:`~enrich.spark.sink.joined.JoinableSink`: it may run a query's
Python stage (a join, a map) in its own write.

Nothing here imports the source (:mod:`enrich.spark.streams`); both share
:mod:`enrich.spark.redis_options`.
"""
