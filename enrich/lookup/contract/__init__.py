"""What a dimension store's source implements, and what both lookup engines and the
caches read of it: the source protocol (:mod:`.lookup_source`), the columnar source and
its answer (:mod:`.columnar_answer`) and the bulk decoders that build such answers
(:mod:`.bulk_decode`). Connectors reach these through :mod:`enrich.spi`.
"""
