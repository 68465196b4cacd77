"""Lookup joins on the engine (no pyspark): one face, two engines.

The face (:mod:`.interface`): chunks of keys in, one joined result per chunk out. Its
two engines: the per-row join on the operator (:mod:`.per_row`: the join, its keys in
flight batched, registered, settled and delivered) and the columnar lane (:mod:`.lane`:
Arrow keys, pipelined requests, rows taken by index); :mod:`.engines` says which one a
join's keys take. What both build on, below them: the source contract
(:mod:`.contract`), the outcomes they hand out (:mod:`.outcome`), the key rule
(:mod:`.key_rule`), the settings (:mod:`.join_settings`) and the caches (:mod:`.cache`).
The iterators callers use (:mod:`.iterators`) stand on top. A record's schema, failure
and metrics are the operator's floor, shared with the async map
(:mod:`enrich.engine.records`).

Internal: import the public names from :mod:`enrich`.
"""
