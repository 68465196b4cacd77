"""The dimension's schema and values: Spark DDL types, parsed schemas, Arrow types and the
coercion of stored values to them."""
