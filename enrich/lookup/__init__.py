"""Lookup joins on the engine (no pyspark).

The floor holds what the join is, as its callers meet it: the source protocol
(:mod:`.source`), the settings (:mod:`.settings`), the key rule (:mod:`.keys`), the
join (:mod:`.join`) and what its rows become (:mod:`.joined`), its metrics
(:mod:`.metrics`) and its iterators (:mod:`.iterators`). Its rooms: the keys in flight
(:mod:`.inflight`: batched, registered, settled, delivered), the columnar lane
(:mod:`.lane`), the caches (:mod:`.cache`) and the dimension's schema and values
(:mod:`.dimension`).

Internal: import the public names from :mod:`enrich`.
"""
