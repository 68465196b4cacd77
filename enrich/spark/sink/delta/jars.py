"""Delta Lake as the sink of an enrichment query: its jars, the session settings it
needs, and the Spark line it runs on.

Delta's own streaming sink (``writeStream.format("delta")``) is exactly once by its
commit protocol: each micro-batch is one table version whose commit carries a ``txn``
action keyed by the query's id, with the batch id as its version. Spark writes a batch's
offsets to the checkpoint before running it and its commit after, so a query killed
between Delta's commit and Spark's runs the same batch again (the same offsets, the same
id) on restart; Delta finds that id committed and writes nothing. A batch killed before
Delta's commit left no version, only data files no version names (never read; ``VACUUM``
removes them). Nothing of this project is on that path: a ``lookup_join`` or
``async_map`` before the sink is replayed with its batch, and the rows it produced the
first time were never committed.

What breaks it: a batch id reused for other rows. Async progress tracking re-plans the
batches after the last offsets it logged (:mod:`~enrich.spark.queries.latency`), so a
replayed id may carry other records: Delta would skip rows it never wrote, or write
rows twice. Spark refuses async progress tracking on Delta's sink, and so does
:func:`enrich.spark.low_latency` (``sink="delta"``), naming why.

What this module adds: where Delta's jars are (``scripts/delta/fetch`` copies them from
Maven Central into the checkout's git-ignored ``.cache/delta``; ``$ENRICH_DELTA_JARS``
names another folder), the settings a session needs for them (:func:`delta_conf`), and a
check that the running pyspark is the Spark line those jars were built for
(:func:`check_spark_line`): Delta publishes one artifact per Spark line
(``delta-spark_4.2_2.13``), and the newest it supports, 4.2, is older than this
project's pinned pyspark, so Delta runs in a venv of its own (``./scripts/dev
test-delta`` builds ``.venv-delta``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from enrich._errors import EnrichError

FORMAT = "delta"
JARS_VARIABLE = "ENRICH_DELTA_JARS"
EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# Delta's state reconstruction after each commit runs this many tasks (Delta's default
# is 50: on local[2] that is most of a small micro-batch's time).
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
_MAIN_JAR = re.compile(r"^delta-spark_(\d+)\.(\d+)_2\.13-[\w.-]+\.jar$")
_ROOT = Path(__file__).resolve().parents[4]


class DeltaUnavailable(EnrichError):
    """Delta cannot run here: its jars are not fetched, or the running pyspark is not
    the Spark line they were built for (the message says which and what to run)."""


def jars_dir() -> Path:
    """Where the fetched jars are: ``$ENRICH_DELTA_JARS``, else the checkout's
    ``.cache/delta``."""
    configured = os.environ.get(JARS_VARIABLE)
    return Path(configured) if configured else _ROOT / ".cache" / "delta"


def delta_jars() -> list[Path]:
    """Delta's connector and its dependencies (for ``spark.jars``).

    Raises:
        DeltaUnavailable: no ``delta-spark_<line>_2.13`` jar in :func:`jars_dir`.
    """
    folder = jars_dir()
    jars = sorted(folder.glob("*.jar"))
    if not any(_MAIN_JAR.match(jar.name) for jar in jars):
        raise DeltaUnavailable(
            f"no delta-spark jar in {folder}: run scripts/delta/fetch (Maven Central "
            f"through mvn; ./scripts/dev test-delta runs it) or point {JARS_VARIABLE} at "
            "a folder holding Delta's jars"
        )
    return jars


def spark_line(jars: list[Path]) -> tuple[int, int]:
    """The Spark line (major, minor) Delta's connector among ``jars`` was built for."""
    for jar in jars:
        found = _MAIN_JAR.match(jar.name)
        if found:
            return int(found.group(1)), int(found.group(2))
    raise DeltaUnavailable(f"no delta-spark jar among {', '.join(j.name for j in jars)}")


def check_spark_line(jars: list[Path], version: str | None = None) -> None:
    """Raise :class:`DeltaUnavailable` unless pyspark ``version`` (default: the
    installed one) is the line Delta's jars were built for: Delta's classes link
    against Spark's internals, which change between lines."""
    if version is None:
        import pyspark

        version = pyspark.__version__
    major, minor = (int(part) for part in version.split(".")[:2])
    line = spark_line(jars)
    if (major, minor) != line:
        raise DeltaUnavailable(
            f"Delta's jars in {jars_dir()} are built for Spark {line[0]}.{line[1]}, and "
            f"this is pyspark {version}: run the job with pyspark {line[0]}.{line[1]} "
            "(./scripts/dev test-delta builds .venv-delta with it, see docs/delta.md)"
        )


def delta_conf(snapshot_partitions: int | None = None) -> dict[str, str]:
    """The session settings of a query with a Delta sink: Delta's jars in
    ``spark.jars`` (to be joined with any others, such as Kafka's connector), its SQL
    extension and catalog. ``snapshot_partitions`` sets Delta's state-reconstruction
    tasks (default 50; a local master wants its core count).

    Raises:
        DeltaUnavailable: the jars are not fetched, or are for another Spark line.
    """
    jars = delta_jars()
    check_spark_line(jars)
    conf = {
        "spark.jars": ",".join(str(jar) for jar in jars),
        "spark.sql.extensions": EXTENSIONS,
        "spark.sql.catalog.spark_catalog": CATALOG,
    }
    if snapshot_partitions is not None:
        conf[SNAPSHOT_PARTITIONS] = str(snapshot_partitions)
    return conf
