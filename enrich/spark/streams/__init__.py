"""The ``redis-stream`` source: Redis Streams as a replayable Spark source.

- :mod:`.stream_source`: the data source, its streaming and batch readers, the registration.
- :mod:`.stream_options`: the options, read once on the driver into one frozen value.
- :mod:`.offsets`: offsets per stream and partition, the end of a micro-batch.
- :mod:`.read`: what one task reads (one stream, a range of ids).
- :mod:`.fields`: entries to rows (Spark's reader modes, the corrupt-record column).
- :mod:`.loss`: trimmed or deleted input, named (``failOnDataLoss``).
- :mod:`.stream_counts`: what the tasks count (malformed, dropped, lost entries).

Nothing here imports the sink (:mod:`enrich.spark.sink`); both share
:mod:`enrich.spark.redis_options`.
"""
