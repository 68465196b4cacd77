"""``/metrics`` on the driver, for Prometheus: :func:`serve_metrics`.

Example, in a driver program of one's own::

    from enrich.spark import serve_metrics

    server = serve_metrics(spark, 9464)      # http://<driver>:9464/metrics
    query = enriched.writeStream...start()
    query.awaitTermination()
    server.close()

What it serves is described in docs/metrics.md and :mod:`.exporter`.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("enrich.spark")

__all__ = ("MetricsServer", "serve_metrics")


class MetricsServer:
    """A running ``/metrics`` endpoint; :meth:`close` stops it and its listener.

    Attributes:
        port: the port it listens on (the one chosen when asked for 0).
        address: the address it is bound to.
    """

    def __init__(self, spark: Any, board: Any, server: Any, thread: Any) -> None:
        self._spark = spark
        self._board = board
        self._server = server
        self._thread = thread
        self.address: str = server.server_address[0]
        self.port: int = server.server_port

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.address in ("0.0.0.0", "") else self.address
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving (idempotent); the session's listener goes with it."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)
        self._server = None
        try:
            self._spark.streams.removeListener(self._board)
        except Exception:  # the session already stopped: its listeners went with it
            log.debug("the metrics listener was not removed", exc_info=True)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(spark: Any, port: int, address: str = "0.0.0.0") -> MetricsServer:
    """Serve the job's metrics at ``http://<address>:<port>/metrics``, in Prometheus's
    text format, from this driver process, until :meth:`MetricsServer.close`.

    It serves every stage created in this process (lookup joins, async maps, SQL
    lookups: counters, errors by reason, the latency histogram, capacity and the
    adaptive limit), the ``redis-stream`` source's counts, and each streaming query's
    progress heard from now on (rates, batch duration, the source's lag): a listener is
    added to ``spark``'s session. The numbers are read at each scrape from what
    :func:`~enrich.spark.statistics` reads, so they agree with it exactly. Spark Connect
    has no accumulators: there only the queries' progress is served.

    Args:
        spark: the session the job runs in.
        port: the port to listen on (0: a free one, see :attr:`MetricsServer.port`).
        address: the address to bind (default: every interface, so that a cluster's
            Prometheus reaches the driver; ``127.0.0.1`` for this machine only).

    Raises:
        ImportError: ``prometheus-client`` is not installed (the ``metrics`` extra).
        OSError: the port is taken.
    """
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as exc:
        raise ImportError(
            "serve_metrics needs prometheus-client: pip install 'spark-enrich[metrics]'"
        ) from exc
    from .exporter import EnrichCollector
    from .progress_board import ProgressBoard

    board = ProgressBoard()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EnrichCollector(board))
    server, thread = start_http_server(port, addr=address, registry=registry)
    spark.streams.addListener(board)
    served = MetricsServer(spark, board, server, thread)
    log.info("metrics at %s", served.url)
    return served
