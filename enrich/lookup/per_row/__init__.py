"""The per-row lookup engine: the join on the operator (:mod:`.lookup_join`, driven over
chunks by :mod:`.row_engine`) and its keys in flight: batched into requests
(:mod:`.batcher`), registered with the chunks waiting for them (:mod:`.registry`),
settled (cached, retried: :mod:`.settle`) and delivered to those chunks
(:mod:`.delivery`)."""
