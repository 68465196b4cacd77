"""A Python data source that says whether Spark's processes were forked by the fork
server: its reader is made by the driver-side planner, read by an executor's worker."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader

FORKSERVER = "enrich.spark.session.forkserver"


def forked() -> bool:
    """Whether this process was forked by the fork server (read, not imported)."""
    return bool(getattr(sys.modules.get(FORKSERVER), "FORKED", False))


class ForkedSource(DataSource):
    """One row: whether the driver's planner that made the reader, and the executor's
    worker that read, were forked by the server."""

    @classmethod
    def name(cls) -> str:
        return "enrich_test_forked"

    def schema(self) -> str:
        return "planned_forked boolean, read_forked boolean, warm boolean"

    def reader(self, schema: object) -> DataSourceReader:
        return ForkedReader(forked())


class ForkedReader(DataSourceReader):
    def __init__(self, planned_forked: bool) -> None:
        self.planned_forked = planned_forked

    def read(self, partition: object) -> Iterator[tuple[bool, bool, bool]]:
        daemon = sys.modules.get("enrich.spark.session")
        yield (self.planned_forked, forked(), bool(getattr(daemon, "WARM", False)))
