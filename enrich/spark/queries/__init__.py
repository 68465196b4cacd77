"""What composes the floors into a query: above the source (:mod:`enrich.spark.streams`),
the stages (:mod:`enrich.spark.stages`, :mod:`enrich.spark.join`) and the sinks
(:mod:`enrich.spark.sink`), which import nothing of it.

- :mod:`.data_sources`: :func:`~enrich.spark.register_data_sources`, the formats of the
  source and the sinks registered with a session.
- :mod:`.latency`: the low-latency profile (:func:`~enrich.spark.low_latency`), which
  hands a query's stages to its sink, and :func:`~enrich.spark.warm_up`.
"""
