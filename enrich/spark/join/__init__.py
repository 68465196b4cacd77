"""``lookup_join`` on DataFrames: the driver's checks and plan, and the worker's side over
Arrow batches."""
