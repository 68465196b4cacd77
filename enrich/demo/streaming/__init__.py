"""The demo's streaming part: a query watched live until it has shown rows, then its
totals (:mod:`.live`; the live line's states in :mod:`.stream_watch`, the sink's counts
in :mod:`.sink_tally`, the waits it announces in :mod:`.waits`)."""
