"""The operator's records, as both of its users meet them (the lookup join and the async
map build on this floor, neither on the other's rooms).

- a record's schema: Spark DDL types (:mod:`.data_types`, :mod:`.ddl`), the parsed
  schema and the coercion of values to it (:mod:`.record_schema`, :mod:`.coerce`,
  :mod:`.scalars`), its Arrow types (:mod:`.arrow_types`);
- a record's failure under the error policies (:mod:`.failure`) and the log lines of
  failed records, a few per minute (:mod:`.log_limit`);
- what the calls did (:mod:`.call_metrics`).
"""
