"""The lookup join's metrics in Spark: carried in its rows, summed on the driver, served.

- :mod:`.metric_rows`: the hidden metrics column each output batch carries.
- :mod:`.observed`: those rows as ``DataFrame.observe`` metrics (works on Spark Connect).
- :mod:`.accumulator`: the per-name totals on the driver and the streaming listener.
- :mod:`.serve`: ``/metrics`` for Prometheus (:mod:`.exporter` reads the totals at each
  scrape, :mod:`.progress_board` the queries' progress, :mod:`.stage_labels` what each
  stage is).
"""
