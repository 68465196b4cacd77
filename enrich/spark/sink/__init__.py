"""The ``redis`` sink: stream entries, hashes or JSON values, idempotent or transactional.

- :mod:`.data_source`: the data source and its batch and stream writers.
- :mod:`.rows`: the options (one frozen value) and how a row becomes a Redis operation.
- :mod:`.columns`: the same, a column at a time, where the types allow it.
- :mod:`.frames`, :mod:`.direct`: the idempotent writes: each row's commands in RESP, a
  column at a time, sent in chunks of rows, a ``MULTI`` each.
- :mod:`.codec`: one codec for every Spark type (what ``RedisLookup`` reads back).
- :mod:`.commit`: staging, the commit marker and the script that publishes a batch.
- :mod:`.hooks`: pause points for the crash harness.

Nothing here imports the source (:mod:`enrich.spark.streams`); both share
:mod:`enrich.spark.redis_options`.
"""
