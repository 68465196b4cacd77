"""Streaming jobs from one config file: parsing (no Spark), the spark-submit entry points
(``enrich_job``, ``sql_job``) and ``enrich check``'s store checks."""
