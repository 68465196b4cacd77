"""Async maps on the engine (no pyspark): a user's own async function per row, with
Flink's semantics. The settings (:mod:`.map_settings`), the function behind the operator
(:mod:`.calls`: its calls, errors and metrics), its life once per process
(:mod:`.process`), and what its results become (:mod:`.results`).

Internal: ``enrich.spark.async_map`` and ``enrich.spark.sql.register_async_udf`` are the
entry points.
"""
