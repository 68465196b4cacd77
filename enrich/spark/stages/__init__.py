"""What ``lookup_join``, ``async_map`` and the SQL forms add to a query, in plain sight:

- :mod:`.operator_settings`: the operator's knobs in one object
  (:class:`~enrich.spark.OperatorSettings`), and which of them each entry point takes;
- :mod:`.pipeline`: the Python stage a join or a map adds (:class:`~.pipeline.ArrowStage`),
  recorded under the DataFrame it returns, for the ``redis`` sink to run in its own write;
- :mod:`.latency`: the low-latency profile (:func:`~enrich.spark.low_latency`), which
  hands those stages to the sink, and :func:`~enrich.spark.warm_up`.
"""
