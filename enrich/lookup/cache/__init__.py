"""The lookup caches: the partial cache (LookupCache: settings, store, integer-key table,
recency) and the full cache (FullCache: settings, snapshot, source)."""
