"""A trace of every Python process of a Spark query (``benchmarks/start_trace.py``).

On ``PYTHONPATH`` with ``ENRICH_START_TRACE`` set to a file, every Python interpreter
Spark starts (the driver's, the daemons', the driver-side planner and runner processes)
loads this file at start-up and appends one JSON line per event to that file: the
process's start, each fork, each outermost import over 5 ms (with its seconds), and the
entry and exit of each worker module's ``main`` and of the redis-stream source's and
the redis sink's methods. Nothing is written when the variable is unset.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

_PATH = os.environ.get("ENRICH_START_TRACE")


def _log(event: str, **fields: object) -> None:
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "ppid": os.getppid(),
                       "event": event, **fields}) + "\n"  # fmt: skip
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # type: ignore[arg-type]
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _started() -> float:
    with open("/proc/self/stat") as stat:
        ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as boot:
        btime = next(int(x.split()[1]) for x in boot if x.startswith("btime"))
    return btime + ticks / os.sysconf("SC_CLK_TCK")


_WRAPPED: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "enrich.spark.streams.stream_source": (
        ("RedisStreamReader", ("initialOffset", "latestOffset", "partitions", "read", "commit")),
        ("RedisStreamDataSource", ("schema", "streamReader")),
    ),
    "enrich.spark.sink.redis.data_source": (
        ("RedisStreamWriter", ("write", "commit")),
        ("RedisSinkDataSource", ("streamWriter",)),
    ),
    "enrich.spark.sink.kafka.alo_sink": (("KafkaAloStreamWriter", ("write", "commit")),),
}


def _wrap(owner: object, name: str, label: str) -> None:
    fn = getattr(owner, name)
    if hasattr(fn, "__wrapped__"):
        return

    def traced(*args: object, **kwargs: object) -> object:
        began = time.time()
        _log("call", name=label, phase="enter")
        try:
            return fn(*args, **kwargs)
        finally:
            _log("call", name=label, phase="exit", s=time.time() - began)

    traced.__wrapped__ = fn  # type: ignore[attr-defined]
    setattr(owner, name, traced)


def _after_import(name: str, module: object) -> None:
    runner = name == "pyspark.worker" or name.startswith(
        ("pyspark.sql.worker.", "pyspark.sql.streaming.python_")
    )
    if runner and hasattr(module, "main"):
        _wrap(module, "main", name + ".main")
    for cls_name, methods in _WRAPPED.get(name, ()):
        cls = getattr(module, cls_name)
        for method in methods:
            _wrap(cls, method, f"{cls_name}.{method}")


if _PATH:
    import importlib._bootstrap as _bootstrap

    _state = threading.local()
    _original = _bootstrap._find_and_load

    def _find_and_load(name: str, import_: object) -> object:
        depth = getattr(_state, "depth", 0)
        _state.depth = depth + 1
        began = time.time()
        try:
            module = _original(name, import_)
        finally:
            _state.depth = depth
        took = time.time() - began
        if took > 0.005 and depth <= 1:
            _log("import", name=name, depth=depth, s=round(took, 4), at=began)
        _after_import(name, module)
        return module

    _bootstrap._find_and_load = _find_and_load
    _log("start", argv=sys.argv, exe=sys.executable, born=_started())
    os.register_at_fork(after_in_child=lambda: _log("fork"))
