"""``async_map`` on DataFrames: the driver's checks and plan (:mod:`.dataframe`), and the
worker's side over Arrow batches (:mod:`.batches`)."""
