"""What ``lookup_join``, ``async_map`` and the SQL forms add to a query, in plain sight:

- :mod:`.operator_settings`: the operator's knobs in one object
  (:class:`~enrich.spark.OperatorSettings`), and which of them each entry point takes;
- :mod:`.arrow_stage`: a Python stage, named (:class:`~.arrow_stage.ArrowStage`);
- :mod:`.pipeline`: the Python stage a join or a map adds,
  named by the DataFrame it returns (:mod:`.staged_frame`), for a sink to run in its own
  write (:mod:`enrich.spark.sink.joined`).

The low-latency profile, which hands those stages to a sink, sits above the floors it
composes: :mod:`enrich.spark.queries.latency`.
"""
