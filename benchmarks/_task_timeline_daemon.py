"""The warm daemon with timestamps (``spark.python.daemon.module`` for
:mod:`benchmarks.task_timeline`): each worker forked from it appends, to the file named by
``ENRICH_TASK_TIMELINE``, when a task's header arrived, when its function was read,
when its first input batch and first output batch passed, when its output ended and its
accumulators were sent, and each message to the driver's metrics inbox. Benchmark only:
it wraps pyspark.worker's internals (pyspark 4.x), and a point pyspark lacks is skipped.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyspark.worker as worker

from enrich.spark.metrics import inbox

_out: Any = None


def note(event: str, *stamps: float) -> None:
    global _out
    if _out is None:  # opened in the worker, after the fork
        _out = open(os.environ["ENRICH_TASK_TIMELINE"], "a", buffering=1)  # noqa: SIM115
    _out.write(f"{os.getpid()} {event} {' '.join(repr(s) for s in stamps)}\n")


def _after(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        note(name, time.time())
        return result

    return timed


def _read_udfs(fn: Callable[..., Any]) -> Callable[..., Any]:
    def read(*args: Any, **kwargs: Any) -> Any:
        func, *rest = fn(*args, **kwargs)
        note("read", time.time())

        def timed(split: int, batches: Iterator[Any]) -> Iterator[Any]:
            def inputs() -> Iterator[Any]:
                first = True
                for batch in batches:
                    if first:
                        note("first_in", time.time())
                        first = False
                    yield batch

            first = True
            for out in func(split, inputs()):
                if first:
                    note("first_out", time.time())
                    first = False
                yield out
            note("out_end", time.time())

        return (timed, *rest)

    return read


def _send(fn: Callable[..., Any]) -> Callable[..., Any]:
    def send(self: Any, update: Any) -> None:
        started = time.time()
        fn(self, update)
        note("inbox", started, time.time())

    return send


receiver = getattr(worker, "SparkSocketMessageReceiver", None)
if receiver is not None:
    receiver.get_init_message = _after("header", receiver.get_init_message)
worker.read_udfs = _read_udfs(worker.read_udfs)
worker.send_accumulator_updates = _after("accumulators", worker.send_accumulator_updates)
inbox.RunReport._send = _send(inbox.RunReport._send)  # type: ignore[method-assign]

if __name__ == "__main__":
    warm = importlib.import_module("enrich.spark.session")
    vars(sys.modules["enrich.spark"]).pop("session", None)  # as its __main__ does
    warm.daemon()
