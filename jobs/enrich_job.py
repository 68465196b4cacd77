"""spark-submit entry point: read a source, apply the configured lookup joins, write.

    spark-submit jobs/enrich_job.py --config job.json

Batch or streaming (``input.streaming``); see ``jobs/_config.py`` for the format.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from jobs import _config

log = logging.getLogger("enrich.jobs")


def read(spark: Any, spec: dict[str, Any]) -> Any:
    streaming = bool(spec.get("streaming", False))
    reader = spark.readStream if streaming else spark.read
    reader = reader.format(spec.get("format", "parquet"))
    if "schema" in spec:
        reader = reader.schema(spec["schema"])
    for key, value in spec.get("options", {}).items():
        reader = reader.option(key, value)
    return reader.load(spec["path"]) if "path" in spec else reader.load()


def write(df: Any, spec: dict[str, Any]) -> Any:
    """Write ``df`` as configured; a streaming write runs until its input is drained
    (``trigger: availableNow``, the default) and returns the finished query."""
    fmt = spec.get("format", "parquet")
    if df.isStreaming:
        writer = df.writeStream.format(fmt).outputMode(spec.get("mode", "append"))
        if "checkpoint" in spec:
            writer = writer.option("checkpointLocation", spec["checkpoint"])
        if spec.get("trigger", "availableNow") == "availableNow":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=spec["trigger"])
        query = writer.start(spec["path"]) if "path" in spec else writer.start()
        query.awaitTermination()
        return query
    writer = df.write.format(fmt).mode(spec.get("mode", "errorifexists"))
    if "path" in spec:
        writer.save(spec["path"])
    else:
        writer.save()
    return None


def run(spark: Any, config: _config.JobConfig) -> Any:
    from enrich.spark import lookup_join, statistics

    df = read(spark, config.input)
    names = []
    for i, join in enumerate(config.joins):
        settings = dict(join)
        settings.setdefault("name", f"join_{i}")
        names.append(settings["name"])
        df = lookup_join(df, settings.pop("source"), **settings)
    result = write(df, config.output)
    for name in names:
        log.info("%s: %s", name, statistics(name).summary())
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="a JSON (or TOML) job config")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = _config.load(args.config)
    from enrich.spark import session

    run(session("enrich-job"), config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
