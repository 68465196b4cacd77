"""The sinks: each a peer in its own room, written on one SPI.

- :mod:`.spi`: the sink SPI, exactly once keyed by the source record (the source
  record's columns, the options ``sourceIdColumn`` / ``sourceStreamColumn``, marks, what a
  replay skips), defined once for every sink that offers it.
- :mod:`.joined`: a query's Python stages (a join, a map) run inside a sink's own write,
  offered to any sink written on the SPI.
- :mod:`.redis`: the ``redis`` sink (stream entries, hashes, JSON; idempotent or
  transactional, keyed by batch id or by the source record).
- :mod:`.kafka_eos`: the ``kafka-eos`` sink (Kafka exactly once, keyed by the source
  record).
- :mod:`.kafka`: the ``kafka-alo`` sink (Kafka at least once, Spark's Kafka sink's
  options and rows; the low-latency profile's ``sink="kafka"``).
- :mod:`.kafka_config`: the Kafka sinks' client settings from the ``kafka.*`` options.
- :mod:`.delta`: Delta Lake (Spark's own ``delta`` sink, keyed by batch id): its jars and
  session settings.
- :mod:`.hooks`: pause points for the crash harness, shared by the sinks.

A new sink: docs/writing-a-sink.md. Nothing here imports the source
(:mod:`enrich.spark.streams`) nor the stages above (:mod:`enrich.spark.stages`).
"""
