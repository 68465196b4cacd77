"""``async_map`` on DataFrames: the driver's checks and plan (:mod:`.map_frame`), and the
worker's side over Arrow batches (:mod:`.map_batches`)."""
