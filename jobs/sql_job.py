"""spark-submit entry point: register lookup functions, then run a SQL file.

    spark-submit jobs/sql_job.py --config job.yaml --sql enrich.sql

The same runs with ``enrich run job.yaml --sql enrich.sql``. The config's ``lookups``
become SQL functions (``register_lookup``), its ``async_udfs`` SQL functions calling a
user's async function (``register_async_udf``); its ``source`` (if any) is registered as the
view ``input``; its ``lookup_joins`` become table functions joining a view's rows
(``register_lookup_join``: ``SELECT * FROM users_join(TABLE(input))``), for the view
named by their ``input`` (default ``input``). Statements are separated by ``;``. The
last statement's result is written as the config's ``sink`` says (streaming or not), or
shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs import _config, _entry, _streams
from jobs._files import ConfigError, decode
from jobs._lookups import with_operator_settings


def statements(text: str) -> list[str]:
    """The statements of a SQL file: split on ``;``, comments and blanks dropped."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def run(spark: Any, config: _config.JobConfig, sql: str, duration: float | None = None) -> Any:
    """Register the lookups, run the statements, write (or show) the last result."""
    from enrich.spark.sql.async_udf import register_async_udf
    from enrich.spark.sql.lookup_udf import register_lookup

    _streams.register_data_sources(spark)
    for name, settings in config.lookups.items():
        options = with_operator_settings(settings)
        register_lookup(spark, name, options.pop("source"), **options)
    for name, settings in config.async_udfs.items():
        options = with_operator_settings(settings)
        options.pop("check_row", None)
        register_async_udf(spark, name, options.pop("fn"), options.pop("returns"), **options)
    if config.source is not None:
        _streams.read(spark, config.source).createOrReplaceTempView("input")
    if config.lookup_joins:
        from enrich.spark.sql.join_table import register_lookup_join

        for name, settings in config.lookup_joins.items():
            options = with_operator_settings(settings)
            source, view = options.pop("source"), options.pop("input", "input")
            register_lookup_join(spark, name, source, input=view, **options)
    result = None
    for statement in statements(sql):
        result = spark.sql(statement)
    if result is None:
        return None
    if result.isStreaming:
        query = _streams.start(result, config)
        _streams.await_query(query, duration)
        return query
    if config.sink is not None:
        _streams.write_all(result, config)
    else:
        result.show(truncate=False)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = _entry.arguments((__doc__ or "").splitlines()[0], sql=True).parse_args(argv)

    def prepare(config: _config.JobConfig) -> tuple[_entry.Body, list[str]]:
        try:
            sql = decode(Path(args.sql).read_bytes(), args.sql)
        except OSError as exc:
            raise ConfigError(f"cannot read the SQL file {args.sql!r}: {exc.strerror}") from None
        functions = {**config.lookups, **config.async_udfs}
        policies = {n: str(s.get("on_error", "fail")) for n, s in functions.items()}
        names = list(functions)  # each function's metrics are filed under its name

        def body(spark: Any) -> None:
            run(spark, config, sql, args.duration)
            _entry.summary(names, policies)

        return body, names

    return _entry.main(args, prepare)


if __name__ == "__main__":
    raise SystemExit(main())
