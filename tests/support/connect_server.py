"""A local Spark Connect server in a process of its own, for the Spark Connect tests.

``SparkSession.builder.remote("local[2]")`` starts a local server inside the calling
process, and pyspark refuses to do so where a classic SparkSession already runs
(``SESSION_OR_CONTEXT_EXISTS``): the other Spark tests share one in the pytest process. So
the server runs here, in a child process: ``remote("local[2]")``'s own recipe, a local
classic session with Spark's ``SparkConnectPlugin``, on a port the parent chose; the
tests connect to it with ``remote("sc://127.0.0.1:<port>")``. The child prints
``ready`` once the server listens and stops when its standard input closes.

Run as ``python -m tests.support.connect_server PORT``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

READY = "ready"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def connect_server(env: dict[str, str], timeout: float = 240.0) -> Iterator[str]:
    """Starts the server process; yields its ``sc://`` address; stops it."""
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.connect_server", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
        text=True,
    )
    try:
        assert child.stdout is not None
        lines = []
        for line in child.stdout:  # blocks until the server is up (or the child died)
            lines.append(line)
            if line.strip() == READY:
                break
        else:
            raise RuntimeError(f"the Spark Connect server did not start: {''.join(lines)}")
        yield f"sc://127.0.0.1:{port}"
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


def main(port: str) -> None:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("enrich-connect-tests")
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", port)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(READY, flush=True)
    sys.stdin.read()  # until the parent closes it
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
