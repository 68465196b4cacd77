"""Lookup joins on the engine: settings, the join, cache, sources, metrics (no pyspark).

Internal: import the public names from :mod:`enrich`.
"""
