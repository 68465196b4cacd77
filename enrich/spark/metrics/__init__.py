"""The lookup join's metrics in Spark: carried in its rows, summed on the driver.

- :mod:`.metric_rows`: the hidden metrics column each output batch carries.
- :mod:`.observed`: those rows as ``DataFrame.observe`` metrics (works on Spark Connect).
- :mod:`.accumulator`: the per-name totals on the driver and the streaming listener.
"""
