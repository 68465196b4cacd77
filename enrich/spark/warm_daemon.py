"""A PySpark daemon whose forked workers start with this package already imported.

Spark starts one Python *daemon* per executor (``spark.python.daemon.module``, by
default ``pyspark.daemon``) and forks every Python worker from it. A worker forked from
the stock daemon imports ``pyspark.worker``, pyarrow, the store clients and enrich after
the fork: ~1.4 s of a worker's start on a 2-core machine, paid by every fresh worker of
every stage (``docs/latency.md``, "Warm-up"). This module imports them once, in the
daemon, then hands over to ``pyspark.daemon.manager()``: a worker forked from it finds
them in memory (copy-on-write), and its first batch starts at once.

Set it where the SparkContext is made (it is read when the executor starts its daemon)::

    spark-submit --conf spark.python.daemon.module=enrich.spark.warm_daemon ...

:func:`enrich.spark.session` sets it by default on a local master (see
:func:`~enrich.spark.session.session`). The executors' Python must be able to import
this package *before* any task runs (installed, or a packed virtualenv): a package
shipped only with ``--py-files`` reaches the workers, not the daemon, and the daemon
would fail to start.

Why importing before the fork is safe here: ``pyspark.daemon`` imports the worker after
the fork because pyarrow and pandas start threads on import, and a fork keeps only the
forking thread. pyarrow's threads are its allocator's background thread and its thread
pools, which Arrow re-creates in a forked child (its ``pthread_atfork`` handlers, Arrow
10+); the daemon itself runs no asyncio loop, opens no connection and starts no thread
of ours, so a child inherits no lock held by another thread of ours. The test
``tests/spark/test_warm_daemon.py`` runs Arrow and asyncio work in forked workers.

What stays per worker: the runtime loop, connection pools, caches and a user's opened
:class:`~enrich.AsyncFunction` are made on first use after the fork (each worker has its
own, as before).
"""

from __future__ import annotations

import importlib
import sys
import time

# What the daemon imports, in this order. Each is what a stage's first batch would
# otherwise import in every fresh worker (measured with ``python -X importtime``,
# 2026-11-27, load ~5: pyspark.worker 0.38 s, pyarrow 0.13-0.19 s, pandas 0.2 s,
# redis.asyncio 0.13 s, aiohttp 0.3 s, the join/source/sink modules 0.2-0.5 s on top).
# A module that is not installed (an optional extra) is skipped.
PRELOAD: tuple[str, ...] = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.datasource",
    "pyarrow",
    "pyarrow.compute",
    "pandas",
    "orjson",
    "redis.asyncio",
    "aiohttp",
    "enrich.engine.runtime",
    "enrich.spark.join.batches",
    "enrich.spark.mapping.batches",
    "enrich.spark.streams.read",
    "enrich.spark.sink.data_source",
    "connectors.redis",
    "connectors.http",
)

# True in the daemon and in every worker forked from it: what a test (or a curious
# user) reads in a worker to know it came from this daemon.
WARM = False
# The modules imported, and the seconds the imports took in the daemon.
LOADED: tuple[str, ...] = ()
SECONDS = 0.0


def preload(modules: tuple[str, ...] = PRELOAD) -> tuple[str, ...]:
    """Import ``modules`` (skipping those not installed); returns the ones imported."""
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue  # an extra not installed: its stage (if any) imports nothing of it
        loaded.append(name)
    return tuple(loaded)


def main() -> None:
    """Preload, then run PySpark's own daemon (it never returns while Spark runs)."""
    global WARM, LOADED, SECONDS
    started = time.perf_counter()
    LOADED = preload()
    SECONDS = time.perf_counter() - started
    WARM = True
    import pyspark.daemon

    manager = getattr(pyspark.daemon, "manager", None)
    if manager is None:  # pragma: no cover - a pyspark whose daemon has no manager()
        import runpy

        runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
        return
    manager()


if __name__ == "__main__":
    # Run as ``python -m enrich.spark.warm_daemon <worker module>``: this file is then
    # ``__main__``; the marker must live in the importable module a worker can read.
    sys.modules.pop("enrich.spark.warm_daemon", None)
    from enrich.spark import warm_daemon

    warm_daemon.main()
