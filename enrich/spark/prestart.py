"""Start a session's Python daemons in the background, before its first query needs them.

A cold streaming query ``redis-stream -> lookup_join -> redis`` waits, between
``start()`` and its first output row, for Spark to start one Python process after
another (``docs/latency.md``, "issue 43: where a cold query's first seconds go"): on
the driver a ``pyspark.daemon`` per kind of Python data source call
(``create_data_source``, ``plan_data_source_read``, ``write_into_data_source``, the
streaming sink's runner), each importing pyspark (0.7-0.9 s on a 2-core machine) before
it forks the call's worker, then the executors' daemon (``enrich.spark.session``'s
preload, 1.7-2.2 s) before the first task. Those daemons live as long as the
SparkContext, and Spark starts each once (its worker factory, keyed by the interpreter,
the worker module and the environment, is shared: a call that comes while the daemon
is starting waits for it instead of starting another).

:func:`prestart` runs two tiny batch jobs through a Python data source of its own, in
background threads: a read of one row in one task, and an append of one row to a writer
that keeps nothing. That starts the driver's ``create_data_source``,
``plan_data_source_read``, ``write_into_data_source`` and ``commit_data_source_write``
daemons and the executors' daemon, with a worker of each left idle, while the caller
builds its query; the query's own calls then fork from daemons already running.

What it does not reach: the streaming source's runner (Spark starts a new Python
process for each streaming query) and the streaming sink's commit runner (a daemon
only a streaming write starts); ``low_latency()``'s warm-up starts those too.

Guarantees: the job reads and writes nothing outside this module (no store, no file,
no table), touches no query of the caller's, and a failure (the session stopped
meanwhile) is logged at debug level and otherwise ignored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

log = logging.getLogger(__name__)

NAME = "enrich-prestart"
THREAD = "enrich-prestart"

# Set once a prestart job of this process has ended, with its seconds (None: it failed).
DONE = threading.Event()
SECONDS: float | None = None


def prestart(spark: Any) -> list[threading.Thread]:
    """Run the prestart jobs in daemon threads (named ``enrich-prestart``) and return
    them (join them, or wait on :data:`DONE`, to wait for the daemons)."""
    spark.dataSource.register(_Prestart)
    # Two jobs side by side, the read's planners and the write's: each daemon's start is
    # mostly one interpreter importing pyspark, which two cores run two at a time.
    jobs = (_read, _write)
    began = time.perf_counter()
    lock = threading.Lock()
    ended: list[bool] = []  # one entry per job that ended: whether it succeeded

    def run(job: Any) -> None:
        global SECONDS
        try:
            job(spark)
            succeeded = True
        except Exception as exc:  # the session stopped meanwhile, or a Spark without it
            log.debug("prestarting the session's Python daemons failed: %s", exc)
            succeeded = False
        with lock:
            ended.append(succeeded)
            if len(ended) == len(jobs):
                SECONDS = time.perf_counter() - began if all(ended) else None
                DONE.set()

    threads = [threading.Thread(target=run, args=(job,), name=THREAD, daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    return threads


def _read(spark: Any) -> None:
    """create_data_source, plan_data_source_read, the executors' daemon."""
    spark.read.format(NAME).load().collect()


def _write(spark: Any) -> None:
    """write_into_data_source, commit_data_source_write (and the executors' daemon)."""
    spark.range(1, numPartitions=1).write.format(NAME).mode("append").save()


class _Prestart(DataSource):
    """One row in one partition; a writer that keeps nothing."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "id long"

    def reader(self, schema: Any) -> DataSourceReader:
        return _Reader()

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return _Writer()


class _Reader(DataSourceReader):
    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        yield (0,)


class _Writer(DataSourceWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[Any]) -> None:
        pass

    def abort(self, messages: list[Any]) -> None:
        pass
